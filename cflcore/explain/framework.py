"""Algorithm 2 of 000 (§5.1, "Insertion-Deletion Framework for OCFL") over one run's cluster models.

For every cluster model ĥ_i at the evaluation round (line 7; the engine's ``models.pt`` holds the
last round) and every evaluation mode (line 4):

* ``in_cluster``  — the concatenated local test sets of the clients the *algorithm* put in C_i (line 9);
* ``out_cluster`` — those of all other clients (line 11);
* ``orchestrator`` — the orchestrator test set (line 13);

a seeded sample of ζ images is drawn without replacement (line 14; 350, or 180 for BloodMNIST), each
is explained and scored by insertion and deletion AUC (line 15), and the per-cluster distribution is
summarised by the statistics the authors reported (mean, median, variance, std, p05…p95).

Target class (``explain.target``): ``predicted`` (default) explains and scores the class the model
predicts, as RISE (Petsiuk et al. 2018) does; ``label`` explains the sample's true label, as Algorithm 2
line 15 writes ĥ_i(x_i, y_i). Under ``label`` an out-of-cluster sample whose class the cluster model never
predicts has a target probability near 0 on every curve, so its deletion AUC is near 0 whatever the
map: a "good" score that says nothing about the explanation.

Random baseline: every image is also scored with a random pixel order (a seeded generator per seed ×
mode × cluster, shared across algorithms like the samples), reported as ``insertion_random_*`` /
``deletion_random_*`` beside the attribution's scores. A faithful map has insertion above and deletion
below its random baseline.

Sanity check (model randomisation, Adebayo et al. 2018): each cluster model is re-initialised with its
architecture's own initialisation (seeded per seed × cluster) and the same images are explained again.
Per image, the Spearman rank correlation of the absolute trained and randomised maps is recorded
(``sanity_spearman``); a cluster × mode passes when the mean is below ``explain.sanity_threshold``
(default 0.5): an explanation that barely changes when the learned weights are destroyed does not
explain the model.

Sampling: the orchestrator pool is the same for every cluster, so its sample is drawn once per run
seed (common random numbers: every cluster model, and every algorithm of a scenario, is scored on
the same orchestrator images); in/out-of-cluster samples are drawn per (seed, mode, cluster).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import torch
from torch import nn

from .. import filenames as fn
from ..data.federated import FederatedData
from ..errors import ConfigError, DataError
from ..io import atomic_path, write_parquet
from .attribution import CAM_ATTRIBUTIONS, check_attribution_name, default_layer_name, make_attributor
from .insdel import DEFAULT_FORWARD_BATCH, check_substrate_name, insertion_deletion, to_channels_last
from .tables import BASELINES, METRICS, MODES, PERCENTILES, SCORED, STATISTICS, TARGETS, run_summary  # noqa: F401

GRID_SPAWN = 3  # spawn-key slot of the saliency-grid draw (0-2 are the modes)
RANDOM_SPAWN = 4  # spawn-key slot of the random-order baseline
SANITY_SPAWN = 5  # spawn-key slot of the re-initialised (sanity-check) models
DEFAULT_SANITY_THRESHOLD = 0.5
IGNORED_KEYS = frozenset({"enabled", "model"})  # config keys that do not change this stage's computation


class RunModelsLike(Protocol):
    """What :func:`explain_run` needs of ``cflcore.fl.artifacts.RunModels``."""

    models: dict[int, nn.Module]
    labels: np.ndarray
    round: int


@dataclass(frozen=True)
class ExplainSettings:
    """The config's ``explain:`` block (schema defaults) plus ``target`` and ``forward_batch``."""

    attribution: str = "hirescam"
    layer: str | None = None
    substrate: str = "zeros"
    step: int = 28
    round: int | str = "last"
    samples: int = 350
    batch_size: int = 128
    grid_clients: tuple[int, ...] = (1, 7, 12)
    target: str = "predicted"
    sanity_threshold: float = DEFAULT_SANITY_THRESHOLD
    forward_batch: int = DEFAULT_FORWARD_BATCH

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any]) -> "ExplainSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - known - IGNORED_KEYS)
        if unknown:
            raise ConfigError(f"explain.{unknown[0]}: unknown setting; allowed: {', '.join(sorted(known | IGNORED_KEYS))}")
        values = {k: v for k, v in settings.items() if k in known and v is not None}
        if "grid_clients" in values:
            values["grid_clients"] = tuple(int(c) for c in values["grid_clients"])
        out = cls(**values)
        check_attribution_name(out.attribution)
        check_substrate_name(out.substrate)
        if out.target not in TARGETS:
            raise ConfigError(f"explain.target: unknown target {out.target!r}; allowed: {', '.join(TARGETS)}")
        for name in ("step", "samples", "batch_size", "forward_batch"):
            if int(getattr(out, name)) < 1:
                raise ConfigError(f"explain.{name}: {getattr(out, name)} must be a positive integer")
        if not 0.0 <= float(out.sanity_threshold) <= 1.0:
            raise ConfigError(f"explain.sanity_threshold: {out.sanity_threshold} must be in [0, 1]")
        return out


@dataclass(frozen=True)
class EvaluationPool:
    """Candidates of one cluster × mode: (client, row in that client's test set); client −1 = orchestrator."""

    clients: np.ndarray
    rows: np.ndarray
    n_clients: int
    reason: str | None = None

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])


@dataclass(frozen=True)
class ScoredSamples:
    """Per-sample results of one cluster × mode."""

    clients: np.ndarray
    rows: np.ndarray
    labels: np.ndarray
    preds: np.ndarray
    target_probability: np.ndarray
    insertion_auc: np.ndarray
    deletion_auc: np.ndarray
    insertion_random_auc: np.ndarray
    deletion_random_auc: np.ndarray
    sanity_spearman: np.ndarray


# ---------------------------------------------------------------------------------------------
# Pools and seeded samples (Algorithm 2, lines 8-14)
# ---------------------------------------------------------------------------------------------
def evaluation_pool(fed: FederatedData, labels: np.ndarray, cluster: int, mode: str) -> EvaluationPool:
    """The concatenated test sets of Algorithm 2 lines 8–13 as (client, row) pairs, with a reason when empty."""
    if mode not in MODES:
        raise ConfigError(f"mode: unknown evaluation mode {mode!r}; allowed: {', '.join(MODES)}")
    if mode == "orchestrator":
        n = int(fed.y_orch.shape[0])
        reason = None if n else "orchestrator test set is empty"
        return EvaluationPool(np.full(n, -1, np.int64), np.arange(n, dtype=np.int64), 0, reason)
    labels = np.asarray(labels)
    members = labels == cluster if mode == "in_cluster" else labels != cluster
    chosen = np.flatnonzero(members)
    clients = np.concatenate([np.full(fed.clients[c].n_test, c, np.int64) for c in chosen] or [np.zeros(0, np.int64)])
    rows = np.concatenate([np.arange(fed.clients[c].n_test, dtype=np.int64) for c in chosen] or [np.zeros(0, np.int64)])
    reason = None
    if chosen.size == 0:
        reason = "no clients assigned to this cluster" if mode == "in_cluster" else "no out-of-cluster clients"
    elif rows.size == 0:
        reason = f"the {chosen.size} {'in' if mode == 'in_cluster' else 'out-of'}-cluster clients have no test samples"
    return EvaluationPool(clients, rows, int(chosen.size), reason)


def _mode_key(mode: str, cluster: int) -> tuple[int, ...]:
    """Spawn key of one (mode, cluster); the orchestrator's ignores the cluster (module doc)."""
    return (MODES.index(mode),) if mode == "orchestrator" else (MODES.index(mode), int(cluster) + 2**31)


def sample_generator(seed: int, mode: str, cluster: int) -> np.random.Generator:
    """Generator of one (seed, mode, cluster) draw; the orchestrator draw ignores the cluster (module doc)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=_mode_key(mode, cluster)))


def draw_sample(pool_size: int, sample_size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted positions of min(ζ, pool) pool members drawn without replacement (Algorithm 2, line 14)."""
    n = min(int(sample_size), int(pool_size))
    return np.sort(rng.choice(int(pool_size), size=n, replace=False)).astype(np.int64)


def gather_images(fed: FederatedData, clients: np.ndarray, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Images and labels of (client, row) pairs, in order; client −1 reads the orchestrator set."""
    xs, ys = [], []
    for client, row in zip(clients.tolist(), rows.tolist()):
        if client < 0:
            xs.append(fed.x_orch[row]), ys.append(fed.y_orch[row])
        else:
            xs.append(fed.clients[client].x_test[row]), ys.append(fed.clients[client].y_test[row])
    return torch.stack(xs), torch.stack(ys).long()


# ---------------------------------------------------------------------------------------------
# Scoring (Algorithm 2, line 15)
# ---------------------------------------------------------------------------------------------
def model_device(model: nn.Module) -> torch.device:
    param = next(iter(model.parameters()), None)
    return param.device if param is not None else torch.device("cpu")


def model_dtype(model: nn.Module) -> torch.dtype:
    """The floating dtype of the model's parameters (the engine may store fp64 or bf16 models)."""
    param = next((p for p in model.parameters() if p.is_floating_point()), None)
    return param.dtype if param is not None else torch.float32


def target_classes(pred: torch.Tensor, label: torch.Tensor, target: str) -> torch.Tensor:
    """The class each image is explained and scored for: the prediction (RISE) or the true label (Algorithm 2)."""
    if target not in TARGETS:
        raise ConfigError(f"explain.target: unknown target {target!r}; allowed: {', '.join(TARGETS)}")
    return (pred if target == "predicted" else label).clone()


def baseline_generator(seed: int, mode: str, cluster: int) -> np.random.Generator:
    """Generator of the random-order baseline of one (seed, mode, cluster), keyed like :func:`sample_generator`."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(RANDOM_SPAWN, *_mode_key(mode, cluster))))


def random_orders(n: int, shape: tuple[int, int], rng: np.random.Generator) -> torch.Tensor:
    """(n, H, W) i.i.d. uniform scores: ranking pixels by them is a uniformly random order per image."""
    return torch.from_numpy(rng.random((n, *shape)))


def randomised_model(model: nn.Module, seed: int, cluster: int) -> nn.Module:
    """A copy of ``model`` with every parameter re-initialised by its module's own ``reset_parameters``
    (Adebayo et al. 2018, full model randomisation). torch's initialisers draw from the default generator,
    so it is forked and seeded from SeedSequence(seed, (SANITY_SPAWN, cluster)) for the draw: no global
    state leaks and the copy is bit-reproducible."""
    clone = copy.deepcopy(model)
    state = np.random.SeedSequence(int(seed), spawn_key=(SANITY_SPAWN, int(cluster))).generate_state(1)[0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(state))
        for module in clone.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
    return clone.eval()


def average_ranks(maps: torch.Tensor) -> np.ndarray:
    """(B, H·W) float64 ranks 1..H·W of each image's flattened map, ties given their average rank: pandas'
    ``DataFrame.rank(axis=1, method="average")``, which equals ``scipy.stats.rankdata(axis=1)`` (test_explain)
    without the ~0.9 s import of scipy.stats in every explain job (pandas is imported here anyway)."""
    frame = pd.DataFrame(maps.flatten(1).double().cpu().numpy())
    return frame.rank(axis=1, method="average").to_numpy(dtype=np.float64, copy=True)


def spearman_rows(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Spearman rank correlation of each image's flattened maps ``a[i]`` and ``b[i]`` (ties get average ranks);
    NaN where a map is constant."""
    ra, rb = average_ranks(a), average_ranks(b)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    denom = np.sqrt((ra ** 2).sum(axis=1) * (rb ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (ra * rb).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)


def score_images(model: nn.Module, x: torch.Tensor, y: torch.Tensor, settings: ExplainSettings,
                 random_scores: torch.Tensor, random_model: nn.Module | None = None) -> dict[str, np.ndarray]:
    """Per-image results of a batch on the model's device: pred, target probability, insertion/deletion AUC
    of the attribution and of the random order ``random_scores`` (B, H, W), and the sanity-check Spearman ρ
    between the absolute maps of ``model`` and ``random_model`` (NaN without one)."""
    device = model_device(model)
    x, y = x.to(device=device, dtype=model_dtype(model)), y.to(device)
    with torch.inference_mode():
        pred = model(x).argmax(dim=1)
    target = target_classes(pred, y, settings.target)
    maps = make_attributor(model, settings.attribution, settings.layer)(x, target).detach()
    curves = insertion_deletion(model, x, maps, target, settings.step, settings.substrate, settings.forward_batch)
    rnd = insertion_deletion(model, x, random_scores.to(device), target, settings.step, settings.substrate,
                             settings.forward_batch)
    if random_model is None:
        rho = np.full(x.shape[0], np.nan)
    else:
        random_maps = make_attributor(random_model, settings.attribution, settings.layer)(x, target).detach()
        rho = spearman_rows(maps.abs(), random_maps.abs())
    return {"preds": pred.cpu().numpy(), "target_probability": curves.deletion[:, 0].cpu().numpy(),
            "insertion_auc": curves.insertion_auc.cpu().numpy(), "deletion_auc": curves.deletion_auc.cpu().numpy(),
            "insertion_random_auc": rnd.insertion_auc.cpu().numpy(),
            "deletion_random_auc": rnd.deletion_auc.cpu().numpy(), "sanity_spearman": rho}


def score_sample(model: nn.Module, fed: FederatedData, clients: np.ndarray, rows: np.ndarray,
                 settings: ExplainSettings, baseline_rng: np.random.Generator,
                 random_model: nn.Module | None = None) -> ScoredSamples:
    """Explain and score the sampled images in batches of ``settings.batch_size``. The random orders of the
    whole sample are drawn first, so they do not depend on the batch size."""
    random_scores = random_orders(rows.size, tuple(fed.shape[1:]), baseline_rng)
    parts: list[dict[str, np.ndarray]] = []
    labels = []
    for start in range(0, rows.size, settings.batch_size):
        sl = slice(start, start + settings.batch_size)
        x, y = gather_images(fed, clients[sl], rows[sl])
        parts.append(score_images(model, x, y, settings, random_scores[sl], random_model))
        labels.append(y.numpy())
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return ScoredSamples(clients, rows, np.concatenate(labels), **cols)


# ---------------------------------------------------------------------------------------------
# Statistics (000 §5.1 / §5.3 / footnote 12)
# ---------------------------------------------------------------------------------------------
def auc_statistics(values: np.ndarray) -> dict[str, float | None]:
    """mean, median, variance and std (ddof = 0, defined for one sample) and p05…p95 (linear interpolation)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {name: None for name in STATISTICS}
    out = {"mean": values.mean(), "median": np.median(values), "var": values.var(), "std": values.std()}
    out.update({name: np.percentile(values, q) for name, q in PERCENTILES.items()})
    return {name: float(out[name]) for name in STATISTICS}


def sanity_verdict(rho: np.ndarray, threshold: float) -> dict[str, Any]:
    """Mean / median Spearman ρ (NaN images skipped) and pass = mean < threshold (None when no ρ is defined)."""
    finite = np.asarray(rho, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return {"sanity_spearman_mean": None, "sanity_spearman_median": None, "sanity_passed": None}
    mean = float(finite.mean())
    return {"sanity_spearman_mean": mean, "sanity_spearman_median": float(np.median(finite)),
            "sanity_passed": bool(mean < threshold)}


def statistics_row(cluster: int, mode: str, pool: EvaluationPool, scored: ScoredSamples | None,
                   reason: str | None, sanity_threshold: float = DEFAULT_SANITY_THRESHOLD) -> dict[str, Any]:
    """One insdel.parquet row; ``scored`` None gives the row of nulls with its ``reason``."""
    row: dict[str, Any] = {"cluster": int(cluster), "mode": mode, "n_clients": pool.n_clients,
                           "pool_size": pool.size, "n_samples": 0 if scored is None else int(scored.rows.size)}
    row["accuracy"] = None if scored is None else float(np.mean(scored.preds == scored.labels))
    for metric in SCORED:
        values = np.zeros(0) if scored is None else getattr(scored, f"{metric}_auc")
        row.update({f"{metric}_{k}": v for k, v in auc_statistics(values).items()})
    row.update(sanity_verdict(np.zeros(0) if scored is None else scored.sanity_spearman, sanity_threshold))
    row["sanity_threshold"] = float(sanity_threshold)
    row["reason"] = reason
    return row


# ---------------------------------------------------------------------------------------------
# Saliency grid data (000 §5.2, Fig. 5)
# ---------------------------------------------------------------------------------------------
def majority_class(labels: torch.Tensor, n_classes: int) -> int | None:
    """Most frequent label (smallest on a tie); None for an empty set."""
    if labels.numel() == 0:
        return None
    return int(torch.bincount(labels.long().cpu(), minlength=n_classes).argmax())


def grid_entries(run_models: RunModelsLike, fed: FederatedData, settings: ExplainSettings, seed: int
                 ) -> dict[str, np.ndarray]:
    """For each grid client that exists: one seeded test image of its majority class, explained by its cluster model."""
    keys = ("clients", "clusters", "rows", "labels", "preds")
    out: dict[str, list] = {k: [] for k in keys + ("images", "maps")}
    labels = np.asarray(run_models.labels)
    for client in settings.grid_clients:
        if client >= fed.n_clients or int(labels[client]) not in run_models.models:
            continue
        y = fed.clients[client].y_test
        cls = majority_class(y, fed.n_classes)
        if cls is None:
            continue
        candidates = torch.nonzero(y.cpu() == cls).flatten().numpy()
        rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(GRID_SPAWN, int(client))))
        row = int(rng.choice(candidates))
        model = run_models.models[int(labels[client])]
        device = model_device(model)
        x = fed.clients[client].x_test[row:row + 1].to(device=device, dtype=model_dtype(model))
        with torch.inference_mode():
            pred = model(x).argmax(dim=1)
        target = target_classes(pred, torch.tensor([cls], device=device), settings.target)
        maps = make_attributor(model, settings.attribution, settings.layer)(x, target).detach()
        for k, v in zip(keys, (client, int(labels[client]), row, cls, int(pred[0]))):
            out[k].append(v)
        out["images"].append(x[0].float().cpu().numpy())
        out["maps"].append(maps[0].float().cpu().numpy())
    c, h, w = fed.shape
    arrays = {k: np.asarray(out[k], dtype=np.int64) for k in keys}
    arrays["images"] = np.asarray(out["images"], np.float32).reshape(-1, c, h, w)
    arrays["maps"] = np.asarray(out["maps"], np.float32).reshape(-1, h, w)
    return arrays


def write_npz(arrays: Mapping[str, np.ndarray], path: Path) -> None:
    """np.savez_compressed through cflcore.io.atomic_path (a file object, so no '.npz' is appended)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


# ---------------------------------------------------------------------------------------------
# Output tables
# ---------------------------------------------------------------------------------------------
def insdel_schema() -> pa.Schema:
    stat_fields = [pa.field(f"{m}_{s}", pa.float64()) for m in SCORED for s in STATISTICS]
    return pa.schema([pa.field("cluster", pa.int64()), pa.field("mode", pa.string()),
                      pa.field("n_clients", pa.int64()), pa.field("pool_size", pa.int64()),
                      pa.field("n_samples", pa.int64()), pa.field("accuracy", pa.float64()),
                      *stat_fields, pa.field("sanity_spearman_mean", pa.float64()),
                      pa.field("sanity_spearman_median", pa.float64()), pa.field("sanity_passed", pa.bool_()),
                      pa.field("sanity_threshold", pa.float64()), pa.field("reason", pa.string())])


def samples_schema() -> pa.Schema:
    return pa.schema([pa.field("cluster", pa.int64()), pa.field("mode", pa.string()),
                      pa.field("client", pa.int32()), pa.field("sample_idx", pa.int64()),
                      pa.field("data_idx", pa.int64()), pa.field("label", pa.int16()),
                      pa.field("pred", pa.int16()), pa.field("target_probability", pa.float64()),
                      pa.field("insertion_auc", pa.float64()), pa.field("deletion_auc", pa.float64()),
                      pa.field("insertion_random_auc", pa.float64()), pa.field("deletion_random_auc", pa.float64()),
                      pa.field("sanity_spearman", pa.float64())])


def summary_schema() -> pa.Schema:
    return pa.schema([pa.field("mode", pa.string()), pa.field("n_clusters", pa.int64()),
                      pa.field("n_clusters_evaluated", pa.int64()),
                      *[pa.field(f"{m}_auc", pa.float64()) for m in SCORED]])


def sample_rows(fed: FederatedData, cluster: int, mode: str, scored: ScoredSamples) -> dict[str, np.ndarray]:
    """Columns of samples.parquet for one cluster × mode; ``data_idx`` is the dataset Parquet ``idx`` (null for the orchestrator)."""
    data_idx = [None if c < 0 else int(fed.clients[c].idx_test[r]) for c, r in zip(scored.clients, scored.rows)]
    n = scored.rows.size
    return {"cluster": np.full(n, cluster, np.int64), "mode": np.full(n, mode, object),
            "client": scored.clients.astype(np.int32), "sample_idx": scored.rows, "data_idx": data_idx,
            "label": scored.labels.astype(np.int16), "pred": scored.preds.astype(np.int16),
            "target_probability": scored.target_probability.astype(np.float64),
            **{f"{m}_auc": getattr(scored, f"{m}_auc").astype(np.float64) for m in SCORED},
            "sanity_spearman": scored.sanity_spearman.astype(np.float64)}


def _table(columns: Mapping[str, Any] | list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    if isinstance(columns, list):
        return pa.Table.from_pylist(columns, schema=schema)
    return pa.table({f.name: pa.array(list(columns[f.name]) if f.name == "data_idx" else columns[f.name], f.type)
                     for f in schema}, schema=schema)


def _concat_columns(parts: list[dict[str, np.ndarray]], schema: pa.Schema) -> pa.Table:
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([_table(p, schema) for p in parts])


def write_outputs(out_dir: Path, insdel_rows: list[dict[str, Any]], sample_parts: list[dict[str, np.ndarray]],
                  grid: Mapping[str, np.ndarray], metadata: dict[str, Any]) -> None:
    """insdel.parquet, samples.parquet, summary.parquet and saliency.npz, each written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    insdel = _table(insdel_rows, insdel_schema())
    write_parquet(insdel, out_dir / fn.INSDEL, metadata=metadata)
    write_parquet(_concat_columns(sample_parts, samples_schema()), out_dir / fn.SAMPLES, metadata=metadata)
    summary = run_summary(insdel.to_pandas()) if insdel.num_rows else pd.DataFrame(columns=summary_schema().names)
    write_parquet(pa.Table.from_pandas(summary, schema=summary_schema(), preserve_index=False),
                  out_dir / fn.EXPLAIN_SUMMARY, metadata=metadata)
    write_npz({**grid, "attribution": np.asarray(metadata.get("attribution", "")),
               "reason": np.asarray(metadata.get("reason") or "")}, out_dir / fn.SALIENCY)


def empty_grid(shape: tuple[int, int, int] = (1, 1, 1)) -> dict[str, np.ndarray]:
    c, h, w = shape
    arrays = {k: np.zeros(0, np.int64) for k in ("clients", "clusters", "rows", "labels", "preds")}
    arrays["images"] = np.zeros((0, c, h, w), np.float32)
    arrays["maps"] = np.zeros((0, h, w), np.float32)
    return arrays


def write_empty_explain(out_dir: str | Path, reason: str) -> None:
    """Zero-row outputs whose metadata says why (a failed or missing run): the report lists it as missing."""
    write_outputs(Path(out_dir), [], [], empty_grid(), {"status": "failed", "reason": reason})


# ---------------------------------------------------------------------------------------------
# The stage
# ---------------------------------------------------------------------------------------------
def check_round(requested: int | str, available: int) -> None:
    """Algorithm 2 line 2 (evaluation round T): only the round stored in models.pt can be evaluated."""
    if requested == "last" or (isinstance(requested, int) and requested == available):
        return
    raise ConfigError(f"explain.round: {requested!r} is not available; models.pt holds round {available}; "
                      f"allowed: last, {available}")


def explain_run(run_models: RunModelsLike, fed: FederatedData, settings: Mapping[str, Any], seed: int,
                out_dir: str | Path) -> None:
    """Algorithm 2 of 000 for every cluster model × mode; writes insdel/samples/summary Parquet and saliency.npz.

    ``run_models`` is ``cflcore.fl.artifacts.load_run_models(...)``; its networks are put in eval mode
    and converted to channels-last layout in place (values unchanged)."""
    cfg = ExplainSettings.from_dict(settings)
    check_round(cfg.round, int(run_models.round))
    if not run_models.models:
        write_empty_explain(out_dir, "models.pt holds no cluster model")
        return
    first = next(iter(run_models.models.values()))
    make_attributor(first, cfg.attribution, cfg.layer)  # bad attribution / layer: fail before any work
    for model in run_models.models.values():
        to_channels_last(model.eval())  # faster batched convolution; values unchanged
    labels = np.asarray(run_models.labels)
    if labels.shape != (fed.n_clients,):
        raise DataError(f"models.pt labels: {labels.size} clients, but the split has {fed.n_clients}; "
                        f"the run and the split do not match")
    insdel_rows, sample_parts = [], []
    for cluster in sorted(run_models.models):
        model = run_models.models[cluster]
        random_model = randomised_model(model, seed, cluster)
        for mode in MODES:
            pool = evaluation_pool(fed, labels, cluster, mode)
            if pool.reason is not None:
                insdel_rows.append(statistics_row(cluster, mode, pool, None, pool.reason, cfg.sanity_threshold))
                continue
            picked = draw_sample(pool.size, cfg.samples, sample_generator(seed, mode, cluster))
            scored = score_sample(model, fed, pool.clients[picked], pool.rows[picked], cfg,
                                  baseline_generator(seed, mode, cluster), random_model)
            insdel_rows.append(statistics_row(cluster, mode, pool, scored, None, cfg.sanity_threshold))
            sample_parts.append(sample_rows(fed, cluster, mode, scored))
    layer = cfg.layer if cfg.layer or cfg.attribution not in CAM_ATTRIBUTIONS else default_layer_name(first)
    metadata = {"status": "ok", "attribution": cfg.attribution, "layer": layer, "substrate": cfg.substrate,
                "step": cfg.step, "round": int(run_models.round), "samples": cfg.samples, "seed": int(seed),
                "target": cfg.target, "model": str(getattr(run_models, "model_name", "")),
                "n_steps": math.ceil(fed.shape[1] * fed.shape[2] / cfg.step),
                "baseline": "random pixel order (seeded)", "sanity_check": "full model randomisation (Adebayo 2018)",
                "sanity_statistic": "mean Spearman rho of |trained map| vs |re-initialised map|",
                "sanity_threshold": float(cfg.sanity_threshold)}
    write_outputs(Path(out_dir), insdel_rows, sample_parts, grid_entries(run_models, fed, cfg, seed), metadata)
