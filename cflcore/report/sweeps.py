"""Factor sweeps and seed envelopes in the report: the numbers and figures of every swept factor, over seeds.

* :func:`sweep_summary` — one row per run: its base variant and split, the factor values it was run with
  (cflcore.sweep_expansion's ``sweep_index``) and its final-round scores.
* :func:`sweep_table` — per sweep (dataset × clients × base variant × base split with at least one factor
  that takes several values), mean, sample std (ddof 1) and number of seeds of every metric at every
  combination of factor values: the numbers behind the sweep figures.
* :func:`sweep_figure` — the metric against the swept value: one factor, a line of the seed mean with a
  shaded ± std band (002 Fig. 5's envelope); two factors, a heatmap per metric annotated "mean ± std" (002
  Figs. 3 and 4); more factors, one heatmap row per combination of the others. Kinds are generic: any swept
  method parameter, split parameter or engine option.
* :func:`round_envelope_figure` — per-round curves, mean over seeds with a ± std band (002 Fig. 5): one
  panel per metric, one line per variant of a base method.

The envelope is ± one sample standard deviation over seeds (not a confidence interval), as in 002.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .. import filenames as fn  # noqa: E402
from .runs import LoadedRun  # noqa: E402
from .statistics.rules import accuracy_step, ari_step  # noqa: E402
from .statistics.seed_stats import K_OF_N_METRICS, from_columns, summary_columns  # noqa: E402

SWEEP_GROUP = ["dataset", "clients", "algorithm_base", "split_base"]
# final-round scores shown against a swept value: (column in the eval tables, label)
SWEEP_METRICS = {
    "orch_acc": "accuracy (validation set)",
    "local_acc": "accuracy (local test)",
    "global_acc": "accuracy (global model W_t)",
    "ari": "ARI",
    "silhouette_method": "silhouette (method's own distance)",
    "silhouette": "silhouette (updates)",
    "n_clusters": "clusters",
}
"""Final-round scores shown against a swept value. Accuracy on the validation set is each client's own model on
the orchestrator test set, the balanced held-out set 002 scores on; the silhouette on the updates is drawn only
where the method records no distance of its own."""
SUMMARY_METRICS = [*SWEEP_METRICS, "rand", "was", "wadb", "pf1", "gf1", "local_bacc", "local_bacc_weighted",
                   "global_orch_acc", "silhouette_authors"]
"""Every final-round score :func:`sweep_summary` records (the claims of the paper checks read them too)."""
ROUND_METRICS = {"ari": "ARI", "silhouette_method": "silhouette (own distance)",
                 "silhouette_authors": "silhouette (authors', own distance)", "silhouette": "silhouette (updates)",
                 "local_acc": "accuracy (own model)", "global_acc": "accuracy (global model W_t)"}


def _record(index: Mapping[str, Any], section: str, name: str) -> Mapping[str, Any]:
    return ((index or {}).get(section) or {}).get(name) or {"base": name, "factors": {}, "labels": {}}


def factor_columns(index: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(section, key) -> column name: an algorithm factor by its key (``resolution``, ``engine.participation``),
    a split factor by its key too unless an algorithm factor has the same key (then ``split.<key>``)."""
    algo = list(dict.fromkeys(k for r in ((index or {}).get("algorithms") or {}).values() for k in r["factors"]))
    split = list(dict.fromkeys(k for r in ((index or {}).get("splits") or {}).values() for k in r["factors"]))
    out = {("algorithms", k): k for k in algo}
    out.update({("splits", k): (f"split.{k}" if k in algo else k) for k in split})
    return out


def _final(frame: pd.DataFrame | None) -> dict[str, Any]:
    if frame is None or not len(frame):
        return {}
    rows = frame[frame["kind"] == "final"]
    if not len(rows):
        rows = frame[frame["kind"] == "round"].tail(1)
    return rows.iloc[0].to_dict() if len(rows) else {}


def setting_steps(manifest: Mapping[str, Any], clients: int) -> dict[str, float]:
    """The run's step columns (cflcore.report.statistics.rules.STEP_COLUMNS) from its split manifest (its true groups, its clients' and the orchestrator's
    test sets); NaN where the manifest lacks them (the report then floors at the printed digit)."""
    groups = manifest.get("cluster_of_client") or [] if manifest.get("ground_truth", True) else []
    n_test = manifest.get("n_test") or []
    orchestrator = manifest.get("orchestrator_size") or 0
    return {"ari_step": ari_step(groups[:clients]) if len(groups) else float("nan"),
            "local_acc_step": accuracy_step(n_test[:clients], clients) if len(n_test) else float("nan"),
            "orch_acc_step": accuracy_step(int(orchestrator), clients) if orchestrator else float("nan")}


def sweep_summary(loaded: Sequence[LoadedRun], index: Mapping[str, Any]) -> pd.DataFrame:
    """One row per run: identity, base names, factor values and the final-round :data:`SUMMARY_METRICS`."""
    columns = factor_columns(index)
    records = []
    for run in loaded:
        s = run.spec
        arec, srec = _record(index, "algorithms", s.algorithm), _record(index, "splits", s.split)
        record: dict[str, Any] = {"dataset": s.dataset, "clients": s.clients, "split": s.split, "seed": s.seed,
                                  "algorithm": s.algorithm, "algorithm_base": arec["base"], "split_base": srec["base"]}
        for (section, key), column in columns.items():
            rec = arec if section == "algorithms" else srec
            if key in rec["factors"]:
                record[column] = rec["factors"][key]
        params = (run.manifest or {}).get("params") or {}
        alphas = params.get("alphas") or ([params["alpha"]] if params.get("alpha") is not None else [])
        record["split_alpha"] = float(min(alphas)) if alphas else np.nan  # the split's most heterogeneous Dirichlet α
        # majority splits' s: the manifest leaves out the neutral 0 (cflcore/data/splits/label_skew.py key_neutral)
        spread = params.get("group_spread", 0.0 if params.get("generator") == "majority" else None)
        record["split_group_spread"] = float(spread) if spread is not None else np.nan
        finals = {**_final(run.clustering), **_final(run.personalisation)}
        for metric in SUMMARY_METRICS:
            record[metric] = finals.get(metric)
        record.update(setting_steps(run.manifest or {}, s.clients))
        records.append(record)
    frame = pd.DataFrame(records)
    for metric in SUMMARY_METRICS:
        if metric in frame:
            frame[metric] = pd.to_numeric(frame[metric], errors="coerce").astype("float64")
    return frame


def sweeps(summary: pd.DataFrame, index: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], list[str], pd.DataFrame]]:
    """(group key, the factor columns that vary in it, its runs) for every sweep of the study."""
    if not len(summary):
        return
    factor_cols = [c for c in factor_columns(index).values() if c in summary]
    for key, runs in summary.groupby(SWEEP_GROUP, sort=False):
        varying = [c for c in factor_cols if runs[c].notna().any() and runs[c].map(repr).nunique() > 1]
        if varying:
            yield dict(zip(SWEEP_GROUP, key)), varying, runs


def _sort_key(values: pd.Series) -> list:
    """Factor values in the order to draw them: numeric ascending when all are numbers, else first seen."""
    distinct = list(dict.fromkeys(values.dropna().tolist()))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in distinct):
        return sorted(distinct)
    return distinct


def sweep_table(runs: pd.DataFrame, factors: Sequence[str]) -> pd.DataFrame:
    """Mean, std (ddof 1; NaN for one seed) and n over seeds of every metric at each factor combination."""
    metrics = [m for m in SWEEP_METRICS if m in runs and runs[m].notna().any()]
    rows = []
    keyed = runs.assign(**{f"_{f}": runs[f].map(repr) for f in factors})
    for _, combo in keyed.groupby([f"_{f}" for f in factors], sort=False):
        row = {f: combo[f].iloc[0] for f in factors}
        row["n_seeds"] = int(combo["seed"].nunique())
        for metric in metrics:
            row.update(summary_columns(combo[metric].to_numpy(dtype=np.float64), metric, metric in K_OF_N_METRICS))
        rows.append(row)
    table = pd.DataFrame(rows)
    order = [_sort_key(runs[f]) for f in factors]
    table["_order"] = [tuple(order[i].index(r[f]) if r[f] in order[i] else len(order[i]) for i, f in enumerate(factors))
                       for _, r in table.iterrows()]
    return table.sort_values("_order").drop(columns="_order").reset_index(drop=True)


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _metrics_of(table: pd.DataFrame) -> list[str]:
    present = [m for m in SWEEP_METRICS if f"{m}_mean" in table and table[f"{m}_mean"].notna().any()]
    return [m for m in present if not (m == "silhouette" and "silhouette_method" in present)]


def sweep_figure(table: pd.DataFrame, factors: Sequence[str], title: str) -> plt.Figure:
    """Metric against the swept value(s) (module docstring)."""
    metrics = _metrics_of(table)
    if len(factors) == 1:
        return _line_figure(table, factors[0], metrics, title)
    return _heatmap_figure(table, list(factors), metrics, title)


FACTOR_LABELS = {"majority_share": "m_k (effective majority share: m_k·(1 − s))", "group_spread": "group_spread s"}
"""Axis labels of swept factors: with ``group_spread`` s a client's majority class keeps m_k·(1 − s) of its draws
(cflcore/data/splits/label_skew.py MajoritySplit), so m_k is not the majority share the clients see."""

GRID_COLUMNS = 3
"""Panels per row of a sweep figure: at 120 dpi three panels make a ~1,300 px wide image, which the HTML report
shows at page width with its numbers legible (six heatmaps in one row were 3,635 px wide)."""


def _panel_grid(n_panels: int, width: float, height: float) -> tuple[plt.Figure, list[plt.Axes]]:
    """A figure of ``n_panels`` axes wrapped into rows of at most :data:`GRID_COLUMNS`, each ``width`` × ``height``
    inches; unused cells of the last row are hidden."""
    n_cols = max(1, min(GRID_COLUMNS, n_panels))
    n_rows = max(1, int(np.ceil(n_panels / n_cols)))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def _line_figure(table: pd.DataFrame, factor: str, metrics: Sequence[str], title: str) -> plt.Figure:
    fig, axes = _panel_grid(len(metrics), 3.6, 3.0)
    values = table[factor].tolist()
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    x = np.asarray(values, dtype=np.float64) if numeric else np.arange(len(values), dtype=np.float64)
    for ax, metric in zip(axes, metrics):
        mean = table[f"{metric}_mean"].to_numpy(dtype=np.float64)
        std = np.nan_to_num(table[f"{metric}_std"].to_numpy(dtype=np.float64))
        ax.plot(x, mean, marker="o", color="#1f77b4")
        ax.fill_between(x, mean - std, mean + std, color="#1f77b4", alpha=0.2, linewidth=0)
        ax.set_xlabel(FACTOR_LABELS.get(factor, factor), fontsize=10)
        ax.set_title(SWEEP_METRICS[metric], fontsize=11)
        ax.tick_params(labelsize=9)
        if not numeric:
            ax.set_xticks(x, [_fmt(v) for v in values])
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title} (mean ± std over seeds)", fontsize=11)
    fig.tight_layout()
    return fig


def _heatmap_figure(table: pd.DataFrame, factors: list[str], metrics: Sequence[str], title: str) -> plt.Figure:
    """One heatmap per metric (× facet of the further factors), wrapped into a grid of :data:`GRID_COLUMNS`
    columns, each cell annotated "mean ± std" in a size legible at page width."""
    row_f, col_f, rest = factors[0], factors[1], factors[2:]
    facets = [()] if not rest else list(dict.fromkeys(tuple(r[f] for f in rest) for _, r in table.iterrows()))
    rows_v = list(dict.fromkeys(table[row_f].tolist()))
    cols_v = list(dict.fromkeys(table[col_f].tolist()))
    panels = [(facet, metric) for facet in facets for metric in metrics]
    fig, axes = _panel_grid(len(panels), 0.8 * len(cols_v) + 1.6, 0.6 * len(rows_v) + 1.5)
    for ax, (facet, metric) in zip(axes, panels):
        sub = table if not rest else table[np.logical_and.reduce([table[f] == v for f, v in zip(rest, facet)])]
        grid = np.full((len(rows_v), len(cols_v)), np.nan)
        text = [["" for _ in cols_v] for _ in rows_v]
        for _, r in sub.iterrows():
            a, b = rows_v.index(r[row_f]), cols_v.index(r[col_f])
            grid[a, b] = r[f"{metric}_mean"]
            text[a][b] = from_columns(r, metric).text().replace(" ± ", "\n±")
            if metric in K_OF_N_METRICS:  # "k of n ≥ 0.9" under the mean ± std, bimodal cells marked
                text[a][b] += "\n" + from_columns(r, metric).k_of_n().replace("; ", "\n")
        finite = grid[np.isfinite(grid)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if vmax <= vmin:  # one value everywhere: a plain colour bar around it, not an offset of 1e-9
            vmin, vmax = vmin - 0.5, vmax + 0.5
        image = ax.imshow(grid, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
        for a in range(len(rows_v)):
            for b in range(len(cols_v)):
                if text[a][b]:
                    value = grid[a, b]
                    light = np.isfinite(value) and (value - vmin) / max(vmax - vmin, 1e-12) < 0.6
                    ax.text(b, a, text[a][b], ha="center", va="center", fontsize=9, color="white" if light else "black")
        ax.set_xticks(range(len(cols_v)), [_fmt(v) for v in cols_v], fontsize=9)
        ax.set_yticks(range(len(rows_v)), [_fmt(v) for v in rows_v], fontsize=9)
        ax.set_xlabel(FACTOR_LABELS.get(col_f, col_f), fontsize=10)
        ax.set_ylabel(FACTOR_LABELS.get(row_f, row_f), fontsize=10)
        facet_title = ", ".join(f"{f}={_fmt(v)}" for f, v in zip(rest, facet))
        ax.set_title(SWEEP_METRICS[metric] + (f"\n{facet_title}" if facet_title else ""), fontsize=11)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle(f"{title} (mean ± std over seeds)", fontsize=11)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Per-round seed envelopes (002 Fig. 5)
# ---------------------------------------------------------------------------------------------
def round_frame(loaded: Sequence[LoadedRun]) -> pd.DataFrame:
    """One row per (run, round) with the :data:`ROUND_METRICS` of the eval tables' ``round`` rows."""
    frames = []
    for run in loaded:
        parts = []
        for table in (run.clustering, run.personalisation):
            if table is None or not len(table):
                continue
            rows = table[table["kind"] == "round"]
            keep = [c for c in ROUND_METRICS if c in rows]
            parts.append(rows[["round", *keep]].set_index("round"))
        if not parts:
            continue
        merged = parts[0] if len(parts) == 1 else parts[0].join(parts[1], how="outer", rsuffix="_p")
        s = run.spec
        frames.append(merged.reset_index().assign(dataset=s.dataset, clients=s.clients, split=s.split, seed=s.seed,
                                                  algorithm=s.algorithm))
    if not frames:
        return pd.DataFrame(columns=["dataset", "clients", "split", "seed", "algorithm", "round"])
    out = pd.concat(frames, ignore_index=True)
    for metric in ROUND_METRICS:
        if metric in out:
            out[metric] = pd.to_numeric(out[metric], errors="coerce").astype("float64")
    return out


def series_styles(n: int) -> list[dict[str, Any]]:
    """``n`` distinguishable (colour, line style) pairs: tab10 colours, then the same colours dashed, dotted."""
    colours = plt.get_cmap("tab10").colors
    styles = ["-", "--", ":", "-."]
    return [{"color": colours[i % 10], "linestyle": styles[(i // 10) % len(styles)]} for i in range(n)]


def round_envelope_figure(rounds: pd.DataFrame, algorithms: Sequence[str], title: str) -> plt.Figure:
    """Per metric, the seed mean of every algorithm per round with a shaded ± std band."""
    metrics = [m for m in ROUND_METRICS if m in rounds and rounds[m].notna().any()]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.2), squeeze=False)
    styles = series_styles(len(algorithms))
    for ax, metric in zip(axes[0], metrics):
        for algorithm, style in zip(algorithms, styles):
            sub = rounds[rounds["algorithm"] == algorithm]
            stats = sub.groupby("round")[metric].agg(["mean", "std", "count"]).dropna(subset=["mean"])
            if not len(stats):
                continue
            x = stats.index.to_numpy(dtype=np.float64)
            mean, std = stats["mean"].to_numpy(), np.nan_to_num(stats["std"].to_numpy())
            ax.plot(x, mean, label=algorithm, linewidth=1.3, **style)
            ax.fill_between(x, mean - std, mean + std, color=style["color"], alpha=0.15, linewidth=0)
        ax.set_title(ROUND_METRICS[metric], fontsize=9)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=7, frameon=False,
                   bbox_to_anchor=(0.5, -0.02 - 0.045 * ((len(labels) - 1) // 4)))
    n_seeds = int(rounds.groupby("algorithm")["seed"].nunique().max()) if len(rounds) else 0
    fig.suptitle(f"{title} (mean ± std over {n_seeds} seeds)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.045 * ((len(labels) - 1) // 4) if handles else 0, 1, 1))
    return fig


def envelope_groups(rounds: pd.DataFrame, index: Mapping[str, Any]) -> Iterator[tuple[str, list[str], pd.DataFrame]]:
    """(name, algorithms, rows) of each per-round envelope figure: per dataset × clients × split, the variants
    of one swept base method together, and the unswept methods together."""
    if not len(rounds):
        return
    bases = {a: _record(index, "algorithms", a)["base"] for a in rounds["algorithm"].unique()}
    swept = {a for a in bases if a in ((index or {}).get("algorithms") or {})}
    for (dataset, clients, split), rows in rounds.groupby(["dataset", "clients", "split"], sort=False):
        algorithms = list(dict.fromkeys(rows["algorithm"]))
        families: dict[str, list[str]] = {}
        for a in algorithms:
            families.setdefault(bases[a] if a in swept else "", []).append(a)
        for base, members in families.items():
            label = base or "methods"
            yield f"{dataset}_n{clients}_{split}_{label}", members, rows[rows["algorithm"].isin(members)]


def sweep_name(key: Mapping[str, Any]) -> str:
    return f"{key['dataset']}_n{key['clients']}_{key['algorithm_base']}_{key['split_base']}"


def superclass_runs(loaded: Sequence[LoadedRun]) -> dict[tuple[str, int, str], list[LoadedRun]]:
    """(dataset, clients, split) -> its runs, for the splits whose class groups hold two or more classes and whose
    clients have a majority class (002's superclass-like communities: a community's clients hold different classes)."""
    out: dict[tuple[str, int, str], list[LoadedRun]] = {}
    for run in loaded:
        manifest = run.manifest or {}
        sets = manifest.get("class_sets") or []
        if manifest.get("majority_class_of_client") and sets and min(len(c) for c in sets) >= 2:
            out.setdefault((run.spec.dataset, int(run.spec.clients), run.spec.split), []).append(run)
    return out


def group_distance_figure(runs: Sequence[LoadedRun], title: str) -> plt.Figure | None:
    """Each run's last recorded client-distance matrix (divergence.parquet: the method's own distance, 002 eq. 2),
    clients ordered by ground-truth group and then by majority class, group boundaries as white lines and each
    client labelled with its majority class: shows whether the method's distances see the groups or the classes."""
    from pathlib import Path

    panels = []
    for run in sorted(runs, key=lambda r: (r.spec.algorithm, r.spec.seed)):
        path = Path(run.spec.run_dir) / fn.DIVERGENCE
        if not path.exists():
            continue
        frame = pd.read_parquet(path)
        if not len(frame):
            continue
        last = frame[frame["round"] == frame["round"].max()]
        n = int(max(last["i"].max(), last["j"].max())) + 1
        d = np.full((n, n), np.nan)
        d[last["i"].to_numpy(), last["j"].to_numpy()] = last["value"].to_numpy()
        groups = np.asarray(run.manifest["cluster_of_client"])[:n]
        classes = np.asarray(run.manifest["majority_class_of_client"])[:n]
        order = np.lexsort((np.arange(n), classes, groups))
        panels.append((run, d[np.ix_(order, order)], groups[order], classes[order]))
    if not panels:
        return None
    fig, axes = _panel_grid(len(panels), 3.8, 3.6)
    for ax, (run, d, groups, classes) in zip(axes, panels):
        image = ax.imshow(d, cmap="viridis_r", aspect="equal")
        for edge in np.flatnonzero(np.diff(groups)) + 0.5:
            ax.axhline(edge, color="white", linewidth=2)
            ax.axvline(edge, color="white", linewidth=2)
        labels = [f"{c}" for c in classes]
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("majority class (grouped)", fontsize=9)
        ax.set_title(f"{run.spec.algorithm}\nseed {run.spec.seed}", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle(f"{title}: client distances, last round, ordered by group (white lines) and majority class", fontsize=10)
    fig.tight_layout()
    return fig


def write_sweep_outputs(loaded: Sequence[LoadedRun], index: Mapping[str, Any], out_dir, entry) -> list[dict[str, Any]]:
    """``tables/sweep_scores.csv`` (every sweep's :func:`sweep_table`, tidy, with its group key and factor names),
    ``figures/sweeps/<sweep>.png|pdf``, ``figures/round_envelopes/<dataset>_n<clients>_<split>_<family>`` and, for
    superclass-like splits, ``figures/louvain_groups/<dataset>_n<clients>_<split>`` (:func:`group_distance_figure`);
    returns the report index entries (``entry(kind, path)`` makes one)."""
    from pathlib import Path

    from .figures import save_figure
    from .tables import write_text

    out_dir = Path(out_dir)
    entries: list[dict[str, Any]] = []
    for kind in ("sweeps", "round_envelopes", "louvain_groups"):  # declared as directory() outputs: always created
        (out_dir / "figures" / kind).mkdir(parents=True, exist_ok=True)
    for (dataset, clients, split), runs in superclass_runs(loaded).items():
        fig = group_distance_figure(runs, f"{dataset} · n{clients} · {split}")
        if fig is not None:
            for path in save_figure(fig, out_dir / "figures" / "louvain_groups" / f"{dataset}_n{clients}_{split}"):
                entries.append(entry("louvain_groups", path, dataset, clients))
    summary = sweep_summary(loaded, index)
    tables = []
    for key, factors, runs in sweeps(summary, index):
        table = sweep_table(runs, factors)
        name = sweep_name(key)
        title = f"{key['algorithm_base']} on {key['split_base']}: {key['dataset']}, {key['clients']} clients"
        for path in save_figure(sweep_figure(table, factors, title), out_dir / "figures" / "sweeps" / name):
            entries.append(entry("sweeps", path, key["dataset"], key["clients"]))
        tables.append(table.assign(sweep=name, factors=" × ".join(factors), **key))
    tidy = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=["sweep", "factors", *SWEEP_GROUP])
    front = ["sweep", "factors", *SWEEP_GROUP]
    tidy = tidy[front + [c for c in tidy.columns if c not in front]]
    entries.append(entry("sweep_scores", write_text(tidy.to_csv(index=False), out_dir / "tables" / "sweep_scores.csv"), None, None))
    rounds = round_frame(loaded)
    multi_seed = len(rounds) and rounds.groupby(["dataset", "clients", "split", "algorithm"])["seed"].nunique().max() > 1
    if multi_seed:
        for name, algorithms, rows in envelope_groups(rounds, index):
            title = name.replace("_", " · ")
            for path in save_figure(round_envelope_figure(rows, algorithms, title),
                                    out_dir / "figures" / "round_envelopes" / name):
                entries.append(entry("round_envelopes", path, str(rows["dataset"].iloc[0]), int(rows["clients"].iloc[0])))
    return entries
