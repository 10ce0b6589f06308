"""Local training's records for the report (cflcore.strategies.run_records): a reference, not a contestant."""
from __future__ import annotations

from .run_records import MethodRecords, register_records


@register_records("local")
class LocalRecords(MethodRecords):
    reference = "local training: every client alone, no aggregation, the lower band, ARI 0 by construction"
