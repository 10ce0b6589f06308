"""OCFL's run records read after the run (cflcore.strategies.run_records): whether its trigger ever fired."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .run_records import MethodRecords, NoAction, register_records

if TYPE_CHECKING:
    import pandas as pd


@register_records("ocfl")
class OCFLRecords(MethodRecords):
    thresholds = ("min_cluster_fraction", "resolution")  # HDBSCAN's minimum cluster size, a Louvain clusterer's resolution

    @classmethod
    def did_not_act(cls, server: "pd.DataFrame", params: Mapping[str, Any]) -> NoAction | None:
        """The trigger never fired (``clustered`` false every round; cflcore/strategies/ocfl.py's diagnostics): no round
        at or past ``min_round``, or the temperature (its moving average, ``trigger_value``) never rose above the round
        before's, with its first and last values."""
        if "clustered" not in server:
            return None
        if server["clustered"].fillna(False).astype(bool).any():
            return None
        rounds, min_round = len(server), int(params["min_round"])
        if min_round >= rounds:
            return NoAction("trigger never fired: min_round {min_round} is past the run's {rounds} rounds",
                            {"min_round": min_round, "rounds": rounds})
        t = server["trigger_value"].astype(float).dropna()
        rise = "rose above" if params["trigger"] == "strict" else "stayed at or rose above"
        return NoAction(f"trigger never fired: the temperature never {rise} the round before's in {{rounds}} rounds "
                        "(from {first} to {last})",
                        {"rounds": rounds, "first": float(t.iloc[0]) if len(t) else float("nan"),
                         "last": float(t.iloc[-1]) if len(t) else float("nan")})
