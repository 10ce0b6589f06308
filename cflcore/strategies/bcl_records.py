"""BCL's run records read after the run (cflcore.strategies.run_records): whether it reached its clustering round."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .run_records import MethodRecords, NoAction, register_records

if TYPE_CHECKING:
    import pandas as pd


@register_records("bcl")
class BCLRecords(MethodRecords):
    thresholds = ("distance_threshold",)  # the dendrogram's cut (000 searched 0.05-0.4)

    @classmethod
    def did_not_act(cls, server: "pd.DataFrame", params: Mapping[str, Any]) -> NoAction | None:
        """Never clustered (``clustered`` false every round; cflcore/strategies/bcl.py): its clustering round is past the
        run's rounds."""
        if "clustered" not in server or server["clustered"].fillna(False).astype(bool).any():
            return None
        return NoAction("its clustering round {round} is past the run's {rounds} rounds",
                        {"round": int(params["round"]), "rounds": len(server)})
