"""SCL's run records read after the run (cflcore.strategies.run_records): whether it ever split."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from .run_records import MethodRecords, NoAction, register_records
from .scl import split_allowed

if TYPE_CHECKING:
    import pandas as pd


@register_records("scl")
class SCLRecords(MethodRecords):
    thresholds = ("epsilon", "eps1", "eps2", "cooldown", "proxy_factor", "proxy_tolerance")
    """The split criterion (000 App. A.2): ε₁, ε₂ and the cool-down as given (``epsilon: explicit``), or the factor and
    tolerance that derive them from the centralised proxy (``epsilon: proxy``); ``epsilon`` picks which."""
    _BY_MODE = {"explicit": ("eps1", "eps2", "cooldown"), "proxy": ("proxy_factor", "proxy_tolerance")}

    @classmethod
    def check_grid(cls, params: Mapping[str, Any], grid: Mapping[str, list[Any]], field: str) -> None:
        """A threshold of one ``epsilon`` mode is tuned only where every combination runs in that mode (cflcore/
        strategies/scl.py ignores ε₁, ε₂ and the cool-down under ``proxy``, the factor and tolerance under ``explicit``)."""
        modes = set(grid.get("epsilon", [params["epsilon"]]))
        for mode, keys in cls._BY_MODE.items():
            for key in (k for k in keys if k in grid):
                if modes != {mode}:
                    raise ConfigError(f"{field}.{key}: used only with epsilon: {mode}, but the grid's combinations run "
                                      f"with epsilon {sorted(modes)}; set epsilon: {mode} in the variant or the grid")

    @classmethod
    def did_not_act(cls, server: "pd.DataFrame", params: Mapping[str, Any]) -> NoAction | None:
        """No split in the whole run (``n_splits`` 0 every round; cflcore/strategies/scl.py's diagnostics), with the part
        of the criterion that failed, from the recorded ε₁, ε₂, cool-down and the federation's (one cluster's) update
        norms: no round past the cool-down; or the mean update norm never under ε₁ (its smallest, and the round); or,
        in the rounds where it was, the largest update norm never above ε₂. Rounds as the engine counts them (0-based)."""
        if "n_splits" not in server or "eps1" not in server:
            return None
        if (server["n_splits"].fillna(0) > 0).any():
            return None
        cooldown = int(server["cooldown"].iloc[-1])
        allowed = server[[split_allowed(int(r), cooldown) for r in server["round"]]]
        if not len(allowed):
            return NoAction("no round past the cool-down of {cooldown} rounds in {rounds}",
                            {"cooldown": cooldown, "rounds": len(server)})
        eps1, eps2 = float(allowed["eps1"].iloc[-1]), float(allowed["eps2"].iloc[-1])
        mean = allowed["largest_mean_update_norm"].astype(float)
        under = allowed[mean < eps1]
        if not len(under):
            at = mean.idxmin()
            return NoAction("smallest mean update norm {norm} (round {round}) against ε₁ {eps1}",
                            {"norm": float(mean[at]), "round": int(allowed.at[at, "round"]), "eps1": eps1})
        largest = under["largest_max_update_norm"].astype(float)
        if largest.max() <= eps2:
            return NoAction("mean update norm under ε₁ in {under} rounds, where the largest update norm {norm} is under "
                            "ε₂ {eps2}", {"under": len(under), "norm": float(largest.max()), "eps2": eps2})
        return NoAction("split criterion met in {met} rounds but no bipartition made (≤ 2 sampled members, a one-sided "
                        "split or max_clusters)", {"met": int((largest > eps2).sum())})
