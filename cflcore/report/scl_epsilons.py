"""Which ε₁, ε₂ and cool-down each SCL run used, and where they came from (000 App. A.2): the table
``scl_epsilons`` beside 000's Table 4 (``cflcore/reference/paper_table4_scl.csv``).

A run's values are the ones its SCL strategy recorded in ``server.parquet`` (``eps1``, ``eps2``, ``cooldown``,
``epsilon_source``: how the strategy set them, as cflcore/strategies/scl.py records it).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

COLUMNS = ["dataset", "split", "clients", "seed", "algorithm", "source", "eps1", "eps2", "cooldown",
           "paper_dataset", "paper_eps1", "paper_eps2", "paper_cooldown", "paper_how"]


def scl_epsilon_table(loaded: Sequence[Any]) -> pd.DataFrame:
    """One row per run whose server log records SCL's ε (every seed), with 000 Table 4's row for its dataset."""
    from .papers.base import published_tables_paper

    published = published_tables_paper()
    paper = published.read_reference("paper_table4_scl.csv").set_index("dataset")
    rows = []
    for run in loaded:
        server = run.server
        if server is None or "eps1" not in server.columns or "epsilon_source" not in server.columns or server.empty:
            continue
        first = server.sort_values("round").iloc[0]
        s = run.spec
        name = published.dataset(s.dataset)
        ref = paper.loc[name] if name in paper.index else None
        rows.append({"dataset": s.dataset, "split": s.split, "clients": s.clients, "seed": s.seed,
                     "algorithm": s.algorithm, "source": str(first["epsilon_source"]),
                     "eps1": float(first["eps1"]), "eps2": float(first["eps2"]),
                     "cooldown": int(first["cooldown"]) if "cooldown" in server.columns else None,
                     "paper_dataset": name,
                     "paper_eps1": np.nan if ref is None else float(ref["eps1"]),
                     "paper_eps2": np.nan if ref is None else float(ref["eps2"]),
                     "paper_cooldown": None if ref is None else int(ref["cooldown"]),
                     "paper_how": None if ref is None else str(ref["how"])})
    return pd.DataFrame(rows, columns=COLUMNS)
