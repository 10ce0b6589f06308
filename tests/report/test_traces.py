"""Split-criterion trace figures (cflcore.report.traces) from real SCL / FedGWC diagnostics, encoded as the
engine writes them into server.parquet."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from synthetic_clusters import round_updates
from cflcore.fl.artifacts import server_table
from cflcore.strategies.base import StrategyContext, build_strategy
from cflcore.io import canonical_json
from cflcore.report import figures as fg
from cflcore.report.runs import LoadedRun, RunSpec
from cflcore.report.traces import cluster_series, min_finite, run_panels, split_trace_figures
from test_fedgwc import GROUPS, VARIANT, traces
from test_strategies import SCL, scl_deltas


def server_frame(strategy, updates_of_round, rounds: int) -> pd.DataFrame:
    """Run a strategy and encode its diagnostics exactly like Engine.run_round + server_table."""
    rows = []
    for r in range(rounds):
        res = strategy.aggregate(updates_of_round(r))
        diag = {k: v if np.isscalar(v) or v is None else canonical_json(v) for k, v in res.diagnostics.items()}
        rows.append({"round": r, "n_clusters": res.assignment.n_clusters, "clustered_now": False, "temperature": None,
                     "mean_train_loss": 1.0, "mean_local_f1": None, "seconds": 0.0, "diagnostics": diag})
    return server_table(rows).to_pandas()


def loaded(server: pd.DataFrame, algorithm: str, split: str = "nonoverlap-balanced") -> LoadedRun:
    spec = RunSpec("mnist5k", split, 15, 0, algorithm, Path("e"), Path("r"), Path("m"))
    return LoadedRun(spec, pd.DataFrame(), pd.DataFrame(), server, {})


def scl_server() -> pd.DataFrame:
    strategy = build_strategy(SCL)
    strategy.setup(StrategyContext(n_clients=15, n_params=300, seed=3, device=torch.device("cpu")))
    return server_frame(strategy, lambda r: round_updates(r, scl_deltas(r)), 5)


def fedgwc_server() -> pd.DataFrame:
    strategy = build_strategy(VARIANT)  # 004's text readings (see test_fedgwc.VARIANT): a split within 25 rounds
    strategy.setup(StrategyContext(n_clients=18, n_params=4, seed=3, device=torch.device("cpu")))

    def updates(r):
        sampled = strategy.select_clients(r, np.arange(18))
        return round_updates(r, torch.zeros(len(sampled), 4), clients=sampled, step_losses=traces(GROUPS, sampled, r),
                             n_clients=18)
    return server_frame(strategy, updates, 25)


def test_cluster_series_reads_json_columns_with_gaps():
    frame = pd.DataFrame({"x": ['{"0":1.0}', '{"1":2.0,"2":[3.0,null,1.5]}', None]})
    series = cluster_series(frame, "x", reduce=lambda v: min_finite(v) if isinstance(v, list) else v)
    np.testing.assert_array_equal(series["0"], [1.0, np.nan, np.nan])
    np.testing.assert_array_equal(series["2"], [np.nan, 1.5, np.nan])


def test_scl_and_fedgwc_runs_get_trace_figures_with_thresholds(tmp_path):
    scl, gwc = scl_server(), fedgwc_server()
    runs = [loaded(scl, "scl"), loaded(gwc, "fedgwc"), loaded(gwc, "fedgwc", "overlap-balanced"),
            loaded(pd.DataFrame({"round": [0], "temperature": [1.0]}), "ocfl-km")]
    scl_panel, = run_panels(runs[0])
    assert [t[1] for t in scl_panel.thresholds] == [SCL["eps1"], SCL["eps2"]]
    assert scl_panel.split_rounds and len(scl_panel.curves) >= 4  # mean + max for ≥ 2 clusters after a split
    mse_panel, db_panel = run_panels(runs[1])
    assert mse_panel.log_y and mse_panel.thresholds == [("ε", 1e-3)] and db_panel.thresholds == [("DB", 1.0)]
    assert mse_panel.split_rounds and all(np.isfinite(c.values).any() for c in mse_panel.curves)
    assert run_panels(runs[3]) == []
    figures = list(split_trace_figures(runs))
    assert [(name, d, c) for name, _, d, c in figures] == [("mnist5k_n15_scl", "mnist5k", 15), ("mnist5k_n15_fedgwc", "mnist5k", 15)]
    axes = figures[1][1].axes
    assert sum(ax.has_data() for ax in axes) == 4  # 2 FedGWC runs × (MSE, DB)
    assert any(np.allclose(line.get_ydata(), SCL["eps1"]) for line in figures[0][1].axes[0].lines)
    for name, fig, _, _ in figures:
        png, pdf = fg.save_figure(fig, tmp_path / name)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.stat().st_size > 0
