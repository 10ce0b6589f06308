"""Louvain CFL's records read after the run (cflcore.strategies.run_records): its threshold, the resolution."""
from __future__ import annotations

from .run_records import MethodRecords, register_records


@register_records("louvain")
class LouvainRecords(MethodRecords):
    thresholds = ("resolution",)  # the modularity's resolution (002 §IV-B; cflcore/strategies/louvain.py)
