"""FedAvg's (BNC's) records for the report (cflcore.strategies.run_records): a reference, not a contestant."""
from __future__ import annotations

from .run_records import MethodRecords, register_records


@register_records("bnc")
class FedAvgRecords(MethodRecords):
    reference = "FedAvg: one model for every client, no grouping, ARI 0 by construction"
