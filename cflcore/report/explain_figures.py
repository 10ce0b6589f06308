"""Report figures of the explain stage (000 §5.2–5.4): saliency grids (Figs. 5, 15–16), per-cluster
insertion/deletion box plots (Figs. 6–7) and critical-difference diagrams (Figs. 8, 17).

Every insertion/deletion figure shows the random-order baseline (the same images scored with a seeded
random pixel ranking): grey boxes beside each algorithm's box, and a ``random order`` entry in the CD
diagrams (per scenario, the mean over its algorithms of the random-order AUC). The model-randomisation
sanity check (Adebayo et al. 2018) is drawn as ``explain_sanity`` (per-cluster Spearman ρ against the
threshold) and tabulated in ``explain_sanity.csv``, both beside the box plots.

The report stage calls :func:`explain_figures` with the runs the config expects: each an
:class:`ExplainRunRef` or a mapping with ``dataset``, ``split``, ``clients``, ``seed``, ``algorithm``
and ``explain_dir`` (the folder holding ``insdel.parquet`` and ``saliency.npz``; ``insdel`` = the
path of insdel.parquet is accepted too). Only ``insdel.parquet`` and ``saliency.npz`` are read. A run
whose files are missing, or whose explain job recorded a failure, is listed in the returned
``missing`` table and left out: never an exception.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .. import filenames as fn  # noqa: E402
from .. import layout  # noqa: E402
from ..errors import CflError  # noqa: E402
from ..explain.tables import METRICS, MODES, display_map, run_summary  # noqa: E402
from ..io import atomic_path, parquet_metadata, read_parquet  # noqa: E402
from .statistics.cd import cd_analysis, draw_cd_diagram, save_figure  # noqa: E402

MODE_TITLES = {"in_cluster": "in-cluster", "out_cluster": "out-of-cluster", "orchestrator": "orchestrator"}
RANDOM_ENTRY = "random order"  # the baseline's name in CD diagrams and tables
RANDOM_COLOR, METHOD_COLOR = "0.6", "tab:blue"


@dataclass(frozen=True)
class ExplainRunRef:
    """One run's explain outputs and the run it belongs to."""

    dataset: str
    split: str
    clients: int
    seed: int
    algorithm: str
    explain_dir: Path

    @property
    def scenario(self) -> str:
        return layout.scenario_id(self.dataset, self.split, self.clients, self.seed)

    @property
    def name(self) -> str:
        return layout.run_id(self.dataset, self.split, self.clients, self.seed, self.algorithm)


def as_run_ref(run: ExplainRunRef | Mapping[str, Any]) -> ExplainRunRef:
    """Accept a ref or a mapping (``explain_dir``, or ``insdel`` = path of insdel.parquet)."""
    if isinstance(run, ExplainRunRef):
        return run
    folder = run.get("explain_dir") or (Path(run["insdel"]).parent if run.get("insdel") else None)
    if folder is None:
        raise CflError(f"run {run.get('algorithm')!r}: needs explain_dir or insdel (path of insdel.parquet)")
    return ExplainRunRef(str(run["dataset"]), str(run["split"]), int(run["clients"]), int(run["seed"]),
                         str(run["algorithm"]), Path(folder))


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def run_problem(ref: ExplainRunRef) -> str | None:
    """Why a run's explain outputs cannot be used, or None."""
    path = ref.explain_dir / fn.INSDEL
    if not path.exists():
        return "no explain files"
    try:
        meta = parquet_metadata(path)
    except CflError as e:
        return str(e)
    if meta.get("status", "ok") != "ok":
        return str(meta.get("reason") or meta.get("status"))
    return None


def load_insdel(runs: Sequence[ExplainRunRef | Mapping[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-cluster rows of every usable run with its run columns, missing runs with their reason)."""
    frames, missing = [], []
    for ref in map(as_run_ref, runs):
        reason = run_problem(ref)
        if reason is None:
            try:
                df = read_parquet(ref.explain_dir / fn.INSDEL).to_pandas()
            except CflError as e:
                reason = str(e)
        if reason is not None:
            missing.append({"run": ref.name, "reason": reason})
            continue
        frames.append(df.assign(dataset=ref.dataset, split=ref.split, clients=ref.clients, seed=ref.seed,
                                algorithm=ref.algorithm, scenario=ref.scenario))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return table, pd.DataFrame(missing, columns=["run", "reason"])


def run_summaries(insdel: pd.DataFrame) -> pd.DataFrame:
    """Per run × mode: mean over clusters of the per-cluster mean AUC (000 footnote 12)."""
    if insdel.empty:
        return pd.DataFrame(columns=["scenario", "dataset", "algorithm", "mode", "insertion_auc", "deletion_auc"])
    parts = []
    for (scenario, dataset, algorithm), df in insdel.groupby(["scenario", "dataset", "algorithm"], sort=False):
        parts.append(run_summary(df).assign(scenario=scenario, dataset=dataset, algorithm=algorithm))
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# Saliency grids (Figs. 5, 15, 16)
# ---------------------------------------------------------------------------------------------
def load_saliency(ref: ExplainRunRef) -> dict[str, np.ndarray] | None:
    path = ref.explain_dir / fn.SALIENCY
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError):
        return None


def _show_cell(ax: plt.Axes, image: np.ndarray, attribution: np.ndarray, greyscale: bool) -> None:
    """The image (C, H, W) with the attribution (clipped at 0, scaled to [0, 1]) overlaid."""
    if image.shape[0] == 1 or greyscale:
        ax.imshow(image.mean(axis=0), cmap="gray", vmin=0, vmax=1)
    else:
        ax.imshow(np.clip(image.transpose(1, 2, 0), 0, 1))
    overlay = display_map(attribution[None])[0]
    ax.imshow(overlay, cmap="jet", alpha=0.45, vmin=0, vmax=1)


def saliency_grid(refs: Sequence[ExplainRunRef], stem: Path, grid_clients: Sequence[int] | None = None,
                  greyscale: bool = False) -> list[Path]:
    """One scenario: rows = algorithms, columns = grid clients (default: those the explain stage stored, i.e.
    the config's ``explain.grid_clients`` that exist); titles give the true and predicted class."""
    data = {ref.algorithm: load_saliency(ref) for ref in refs}
    stored = sorted({int(c) for d in data.values() if d is not None for c in d["clients"]})
    wanted = [c for c in grid_clients if c < refs[0].clients] if grid_clients is not None else stored
    algos = _unique(ref.algorithm for ref in refs)
    fig, axes = plt.subplots(len(algos), max(1, len(wanted)), squeeze=False,
                             figsize=(2.1 * max(1, len(wanted)), 2.2 * len(algos)))
    for i, algo in enumerate(algos):
        entry = data.get(algo)
        for j in range(axes.shape[1]):
            ax = axes[i, j]
            ax.set_xticks([]), ax.set_yticks([])
            hit = np.flatnonzero(entry["clients"] == wanted[j]) if entry is not None and wanted else []
            if len(hit) == 0:
                ax.text(0.5, 0.5, "n/a", ha="center", va="center", transform=ax.transAxes, color="gray")
            else:
                k = int(hit[0])
                _show_cell(ax, entry["images"][k], entry["maps"][k], greyscale)
                ax.set_title(f"client {wanted[j]}: true {entry['labels'][k]}, pred {entry['preds'][k]}", fontsize=7)
            if j == 0:
                ax.set_ylabel(algo, fontsize=8)
    fig.suptitle(f"Saliency maps, {refs[0].scenario}", fontsize=9)
    return save_figure(fig, stem)


def saliency_grid_figures(runs: Sequence[ExplainRunRef | Mapping[str, Any]], out_dir: str | Path,
                          grid_clients: Sequence[int] | None = None, greyscale: bool = False,
                          include_greyscale_datasets: bool = True) -> list[Path]:
    """000 Fig. 5 per scenario. The paper drew colour datasets only (greyscale maps read poorly):
    ``include_greyscale_datasets=False`` does the same; ``greyscale=True`` draws colour images in grey."""
    refs = [r for r in map(as_run_ref, runs) if run_problem(r) is None]
    paths: list[Path] = []
    for scenario in _unique(r.scenario for r in refs):
        group = [r for r in refs if r.scenario == scenario]
        sample = next((d for d in map(load_saliency, group) if d is not None and len(d["clients"])), None)
        if sample is None or (sample["images"].shape[1] == 1 and not include_greyscale_datasets):
            continue
        stem = Path(out_dir) / f"explain_saliency_{scenario.replace('/', '_')}"
        paths += saliency_grid(group, stem, grid_clients, greyscale)
    return paths


# ---------------------------------------------------------------------------------------------
# Box plots (Figs. 6, 7)
# ---------------------------------------------------------------------------------------------
def _column_values(part: pd.DataFrame, dataset: str, algos: Sequence[str], column: str) -> list[np.ndarray]:
    """Per algorithm, the non-null values of ``column`` for ``dataset`` (empty arrays where absent)."""
    if column not in part:
        return [np.zeros(0) for _ in algos]
    return [part[(part["dataset"] == dataset) & (part["algorithm"] == a)][column].dropna().to_numpy(dtype=float)
            for a in algos]


def _boxes(ax: plt.Axes, values: list[np.ndarray], offset: float, width: float, color: str) -> None:
    """Box + jittered points at positions 1..n shifted by ``offset``; empty groups are skipped."""
    kept = [(p + offset, v) for p, v in enumerate(values, start=1) if v.size]
    if not kept:
        return
    positions, data = zip(*kept)
    ax.boxplot(list(data), positions=list(positions), widths=width, showfliers=False,
               boxprops={"color": color}, whiskerprops={"color": color}, capprops={"color": color},
               medianprops={"color": "black" if color == RANDOM_COLOR else "tab:orange"})
    for p, v in kept:
        ax.scatter(p + np.linspace(-width / 4, width / 4, v.size), v, s=8, alpha=0.6, color=color, zorder=3)


def insdel_boxplot(insdel: pd.DataFrame, mode: str, stem: Path) -> list[Path]:
    """Rows = insertion / deletion, columns = datasets; per algorithm a box over its clusters' mean AUC and,
    in grey beside it, the box of the same clusters' random-order baseline."""
    part = insdel[insdel["mode"] == mode]
    datasets = _unique(part["dataset"])
    algos = _unique(insdel["algorithm"])
    fig, axes = plt.subplots(2, max(1, len(datasets)), squeeze=False,
                             figsize=(max(4.0, 0.7 * len(algos) + 1.5) * max(1, len(datasets)), 6.0))
    for j, dataset in enumerate(datasets):
        for i, metric in enumerate(METRICS):
            ax = axes[i, j]
            _boxes(ax, _column_values(part, dataset, algos, f"{metric}_mean"), -0.18, 0.32, METHOD_COLOR)
            _boxes(ax, _column_values(part, dataset, algos, f"{metric}_random_mean"), 0.18, 0.32, RANDOM_COLOR)
            ax.set_xticks(range(1, len(algos) + 1), algos, rotation=45, ha="right", fontsize=7)
            ax.set_xlim(0.4, len(algos) + 0.6)
            ax.set_title(f"{dataset}: {metric}", fontsize=9)
            if j == 0:
                ax.set_ylabel(f"mean {metric} AUC per cluster", fontsize=8)
    if datasets:
        handles = [plt.Line2D([], [], color=METHOD_COLOR, marker="s", ls="", label="attribution order"),
                   plt.Line2D([], [], color=RANDOM_COLOR, marker="s", ls="", label="random order (baseline)")]
        axes[0, 0].legend(handles=handles, fontsize=7, loc="best")
    else:
        axes[0, 0].text(0.5, 0.5, "no evaluated clusters", ha="center", transform=axes[0, 0].transAxes)
    fig.suptitle(f"Insertion / deletion AUC per cluster, {MODE_TITLES[mode]} samples", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, stem)


# ---------------------------------------------------------------------------------------------
# Model-randomisation sanity check (Adebayo et al. 2018)
# ---------------------------------------------------------------------------------------------
SANITY_COLUMNS = ["scenario", "dataset", "algorithm", "cluster", "mode", "n_samples", "sanity_spearman_mean",
                  "sanity_spearman_median", "sanity_threshold", "sanity_passed"]


def sanity_table(insdel: pd.DataFrame) -> pd.DataFrame:
    """One row per run × cluster × mode with a defined check: the mean / median Spearman ρ of the absolute
    trained vs re-initialised maps, the threshold and the verdict (ρ below the threshold = pass)."""
    if insdel.empty or "sanity_spearman_mean" not in insdel:
        return pd.DataFrame(columns=SANITY_COLUMNS)
    return insdel[insdel["sanity_spearman_mean"].notna()][SANITY_COLUMNS].reset_index(drop=True)


def sanity_figure(table: pd.DataFrame, stem: Path) -> list[Path]:
    """Per mode, the per-cluster Spearman ρ of every algorithm (crosses = failed) and the threshold line."""
    algos = _unique(table["algorithm"])
    fig, axes = plt.subplots(1, len(MODES), squeeze=False, sharey=True,
                             figsize=(max(4.0, 0.5 * len(algos) + 1.5) * len(MODES), 3.4))
    for ax, mode in zip(axes[0], MODES):
        part = table[table["mode"] == mode]
        for p, algo in enumerate(algos, start=1):
            rows = part[part["algorithm"] == algo]
            rho, ok = rows["sanity_spearman_mean"].to_numpy(float), rows["sanity_passed"].to_numpy(bool)
            jitter = p + np.linspace(-0.15, 0.15, max(1, rho.size))[: rho.size]
            ax.scatter(jitter[ok], rho[ok], s=12, color=METHOD_COLOR, zorder=3)
            ax.scatter(jitter[~ok], rho[~ok], s=24, marker="x", color="tab:red", zorder=3)
        for threshold in _unique(str(t) for t in part["sanity_threshold"].dropna()):
            ax.axhline(float(threshold), color="tab:red", ls="--", lw=0.8)
        ax.axhline(0.0, color="0.7", lw=0.6)
        ax.set_xticks(range(1, len(algos) + 1), algos, rotation=45, ha="right", fontsize=7)
        ax.set_xlim(0.4, len(algos) + 0.6)
        ax.set_title(MODE_TITLES[mode], fontsize=9)
    axes[0, 0].set_ylabel("Spearman ρ, trained vs\nre-initialised |map|", fontsize=8)
    fig.suptitle("Model-randomisation sanity check (pass: below the dashed threshold)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, stem)


def insdel_boxplot_figures(runs: Sequence[ExplainRunRef | Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """000 Figs. 6–7: one figure per evaluation mode, with the random baseline; then the sanity-check
    figure and table (``explain_sanity.png``/``.pdf``/``.csv``) when any run recorded the check."""
    insdel, _ = load_insdel(runs)
    if insdel.empty:
        return []
    out_dir = Path(out_dir)
    paths = [p for mode in MODES for p in insdel_boxplot(insdel, mode, out_dir / f"explain_box_{mode}")]
    sanity = sanity_table(insdel)
    if not sanity.empty:
        paths += sanity_figure(sanity, out_dir / "explain_sanity")
        paths.append(_write_csv(sanity, out_dir / "explain_sanity.csv"))
    return paths


# ---------------------------------------------------------------------------------------------
# Critical-difference diagrams (Figs. 8, 17)
# ---------------------------------------------------------------------------------------------
def score_table(summaries: pd.DataFrame, mode: str, metric: str, with_random: bool = True) -> pd.DataFrame:
    """Rows = scenarios (blocks), columns = algorithms, values = the run's mean AUC over clusters; with
    ``with_random`` one more column, ``random order``: per scenario the mean over its algorithms of the
    random-order baseline AUC (a reference the algorithms should beat)."""
    part = summaries[summaries["mode"] == mode]
    algos = _unique(summaries["algorithm"])
    table = part.pivot_table(index="scenario", columns="algorithm", values=f"{metric}_auc", aggfunc="first")
    table = table.reindex(columns=algos)
    random_col = f"{metric}_random_auc"
    if with_random and random_col in part and part[random_col].notna().any():
        table[RANDOM_ENTRY] = part.groupby("scenario")[random_col].mean().reindex(table.index)
    return table


def _write_csv(df: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return path


def cd_figures(runs: Sequence[ExplainRunRef | Mapping[str, Any]], out_dir: str | Path,
               alpha: float = 0.05) -> list[Path]:
    """000 Figs. 8 and 17: per mode × {insertion (higher better), deletion (lower better)} a diagram,
    plus ``..._ranks.csv`` and ``..._pairwise.csv``."""
    insdel, _ = load_insdel(runs)
    summaries = run_summaries(insdel)
    out_dir = Path(out_dir)
    paths: list[Path] = []
    if summaries.empty:
        return paths
    for mode in MODES:
        for metric in METRICS:
            scores = score_table(summaries, mode, metric)
            result = cd_analysis(scores, higher_is_better=(metric == "insertion"), alpha=alpha)
            stem = out_dir / f"explain_cd_{mode}_{metric}"
            paths += draw_cd_diagram(result, stem, title=f"{metric.capitalize()} AUC, {MODE_TITLES[mode]} samples")
            paths.append(_write_csv(result.table().assign(friedman_p=result.friedman_p, note=result.note),
                                    stem.with_name(stem.name + "_ranks.csv")))
            paths.append(_write_csv(result.pairwise, stem.with_name(stem.name + "_pairwise.csv")))
    return paths


def explain_figures(runs: Sequence[ExplainRunRef | Mapping[str, Any]], out_dir: str | Path,
                    grid_clients: Sequence[int] | None = None, greyscale: bool = False,
                    include_greyscale_datasets: bool = True, alpha: float = 0.05) -> dict[str, Any]:
    """All explain figures into ``out_dir``; returns the paths per kind and the ``missing`` runs table."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _, missing = load_insdel(runs)
    return {
        "saliency": saliency_grid_figures(runs, out_dir, grid_clients, greyscale, include_greyscale_datasets),
        "boxplots": insdel_boxplot_figures(runs, out_dir),
        "cd": cd_figures(runs, out_dir, alpha),
        "missing": missing,
    }
