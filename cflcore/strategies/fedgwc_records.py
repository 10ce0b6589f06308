"""FedGWC's run records read after the run (cflcore.strategies.run_records): whether its Alg. 2 ever ran."""
from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Mapping

from .run_records import MethodRecords, NoAction, register_records

if TYPE_CHECKING:
    import pandas as pd


def _json_list(value: Any) -> list:
    """A server.parquet list cell: a list, or its JSON text (the engine writes nested diagnostics as JSON)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return list(json.loads(value)) if isinstance(value, str) else list(value)


@register_records("fedgwc")
class FedGWCRecords(MethodRecords):
    thresholds = ("epsilon", "participation")  # Alg. 2's MSE threshold and the per-round sample (004 App. F)

    @classmethod
    def did_not_act(cls, server: "pd.DataFrame", params: Mapping[str, Any]) -> NoAction | None:
        """Alg. 2 never ran (``db_considered`` empty every round; cflcore/strategies/fedgwc.py's diagnostics): the running
        MSE never fell under ε (its smallest, and the round), or it did but never for the patience on a cluster that can
        split. Alg. 2 deciding not to split is acting."""
        if "db_considered" not in server or "min_mse" not in server:
            return None
        if any(len(_json_list(v)) for v in server["db_considered"]):
            return None
        eps = float(server["epsilon"].iloc[-1])
        mse = server["min_mse"].astype(float)
        if not mse.notna().any():
            return None
        if not (mse < eps).any():
            at = mse.idxmin()
            return NoAction("Alg. 2 never ran: smallest running MSE {mse} (round {round}) against ε {eps}",
                            {"mse": float(mse[at]), "round": int(server.at[at, "round"]), "eps": eps})
        return NoAction("Alg. 2 never ran: the running MSE under ε {eps} in {under} rounds, never for the patience on a "
                        "cluster that can split", {"eps": eps, "under": int((mse < eps).sum())})
