"""The oracle's records for the report (cflcore.strategies.run_records): a reference, not a contestant."""
from __future__ import annotations

from .run_records import MethodRecords, register_records


@register_records("oracle")
class OracleRecords(MethodRecords):
    reference = "every client with its true group from round 0, the upper band, ARI 1.00 by construction"
