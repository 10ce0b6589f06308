"""Building a split (docs/architecture.md §3, §7): the shared sampler that realises a generator's plan, the streams,
the assignments table and the manifest.

``make_split(dataset_path, settings, n_clients, seed, out_dir)`` writes ``assignments.parquet`` and
``manifest.json``. Every generator (cflcore.data.splits) decides, per client, a ground-truth cluster and a
class-probability vector (and, for some, a transform: cflcore.data.transforms); one shared sampler then realises the
clients' data the way the OCFL generator does (000 §3.1, §4.1): each client draws ``samples_per_client`` samples
*with replacement* from the dataset's train part according to its class vector (so samples are shared within and
across clusters), duplicates are dropped, and a seeded ``local_test_fraction`` of the distinct samples becomes the
local test set. The orchestrator set is the dataset's test part.

Randomness: ``np.random.SeedSequence([seed, hash(generator, params, n_clients, dataset)])`` spawns one stream for
cluster-level draws and one per client, so the same inputs give bit-identical files.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ... import filenames as fn
from ...errors import ConfigError, DataError
from ...io import read_json, read_parquet, stable_hash, write_json, write_parquet
from ..store import read_dataset_labels
from ..transforms import swapped_histogram
from .base import COMMON_KEY_NEUTRAL, SPLIT_GENERATORS, ClientPlan, SplitContext, apportion_counts
from ..drift import DRIFT_KEY, DRIFT_STREAM, check_schedule, drawn_pairs, drift_events, realise_schedule

if TYPE_CHECKING:  # pandas only for split_summary (the split job does not import it)
    import pandas as pd

ROLE_CODES = {"train": 0, "test": 1, "orchestrator": 2}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclass
class ClientSamples:
    train_idx: np.ndarray
    test_idx: np.ndarray


# ---------------------------------------------------------------------------------------------
# Sampling and writing
# ---------------------------------------------------------------------------------------------
def draw_client_samples(class_weights: np.ndarray, pools: list[np.ndarray], n_draws: int, local_test_fraction: float,
                        rng: np.random.Generator, client: int) -> ClientSamples:
    """Draw ``n_draws`` samples with replacement by class vector, drop duplicates, split train/test (000 §4.1)."""
    counts = rng.multinomial(n_draws, class_weights)
    drawn = []
    for c in np.flatnonzero(counts):
        if len(pools[c]) == 0:
            raise DataError(f"client {client} needs class {c}, but the dataset's train part has no sample of it")
        drawn.append(rng.choice(pools[c], size=int(counts[c]), replace=True))
    distinct = np.unique(np.concatenate(drawn)) if drawn else np.empty(0, dtype=np.int64)
    return local_split(distinct, local_test_fraction, rng, client)


class DisjointDraws:
    """``replace: false``: every client's draws without replacement from what the clients before it left, so no
    train image is in two clients (the partitions of Sattler's demo and of IFCA's code, and leahcimali's). A client's
    ``n_draws`` are split over classes by its class vector with largest-remainder rounding (cflcore.data.splits.base.apportion; with
    replacement, 000 §4.1 draws the counts from a multinomial instead), then drawn uniformly without replacement
    within each class. Clients draw in order, each with its own stream. A class with too few images left is a one-line
    DataError naming the split (a smaller ``samples_per_client`` or ``replace: true`` would fit)."""

    def __init__(self, pools: list[np.ndarray], field: str):
        self.left = [np.asarray(p, dtype=np.int64).copy() for p in pools]
        self.field = field

    def __call__(self, class_weights: np.ndarray, pools: list[np.ndarray], n_draws: int, local_test_fraction: float,
                 rng: np.random.Generator, client: int, drift_group: int | None = None) -> ClientSamples:
        """``drift_group``: the draws are the client's sample of that group under a drift schedule (cflcore.data.drift),
        named so in a shortage's error."""
        weights = np.asarray(class_weights, dtype=np.float64)
        counts = np.zeros(len(weights), dtype=np.int64)
        classes = np.flatnonzero(weights > 0)
        counts[classes] = apportion_counts(n_draws, weights[classes])
        drawn = []
        for c in np.flatnonzero(counts):
            if counts[c] > len(self.left[c]) and drift_group is not None:
                raise DataError(f"{self.field}.{DRIFT_KEY}: client {client}'s sample of group {drift_group} needs "
                                f"{int(counts[c])} images of class {c}, {len(self.left[c])} are left after the clients' "
                                "own and the earlier moves' (replace: false); allowed: fewer or smaller events, fewer "
                                "samples_per_client or clients, or replace: true")
            if counts[c] > len(self.left[c]):
                raise DataError(f"{self.field}.replace: false: client {client} needs {int(counts[c])} images of class "
                                f"{c}, {len(self.left[c])} are left; allowed: fewer samples_per_client or clients, or "
                                "replace: true")
            pick = rng.choice(len(self.left[c]), size=int(counts[c]), replace=False)
            drawn.append(self.left[c][pick])
            self.left[c] = np.delete(self.left[c], pick)
        distinct = np.unique(np.concatenate(drawn)) if drawn else np.empty(0, dtype=np.int64)
        return local_split(distinct, local_test_fraction, rng, client)


def local_train_bound(n_draws: int, local_test_fraction: float) -> int:
    """The most local train samples ``n_draws`` draws give a client: :func:`local_split` holds out
    ceil(local_test_fraction · n) of its n distinct samples (scikit-learn's rounding), and n <= ``n_draws``."""
    return n_draws - int(np.ceil(local_test_fraction * n_draws))


def local_split(distinct: np.ndarray, local_test_fraction: float, rng: np.random.Generator, client: int) -> ClientSamples:
    """A seeded ``local_test_fraction`` of a client's distinct samples becomes its local test set (000 §4.1)."""
    if len(distinct) < 2:
        raise DataError(f"client {client} drew {len(distinct)} distinct samples; need >= 2 for a local train/test split "
                        "(raise samples_per_client)")
    from sklearn.model_selection import train_test_split  # lazy: keeps job start-up short
    train, test = train_test_split(distinct, test_size=local_test_fraction, random_state=int(rng.integers(2**31 - 1)))
    return ClientSamples(np.sort(train).astype(np.int64), np.sort(test).astype(np.int64))


def assignments_table(samples: list[ClientSamples], clusters: Sequence[int], orchestrator_idx: np.ndarray) -> pa.Table:
    """docs/architecture.md §3 ``assignments.parquet``, sorted by (client, role train<test<orchestrator, idx)."""
    client, cluster, role, idx = [np.full(len(orchestrator_idx), -1)], [np.full(len(orchestrator_idx), -1)], \
        [np.full(len(orchestrator_idx), ROLE_CODES["orchestrator"])], [orchestrator_idx]
    for k, (s, c) in enumerate(zip(samples, clusters)):
        for code, ids in ((ROLE_CODES["train"], s.train_idx), (ROLE_CODES["test"], s.test_idx)):
            client.append(np.full(len(ids), k))
            cluster.append(np.full(len(ids), c))
            role.append(np.full(len(ids), code))
            idx.append(ids)
    cl, cu, ro, ix = (np.concatenate(a).astype(np.int64) for a in (client, cluster, role, idx))
    order = np.lexsort((ix, ro, cl))
    names = {v: k for k, v in ROLE_CODES.items()}
    return pa.table({
        "client": pa.array(cl[order].astype(np.int32)),
        "cluster": pa.array(cu[order].astype(np.int32)),
        "role": pa.array([names[int(r)] for r in ro[order]], type=pa.string()),
        "idx": pa.array(ix[order].astype(np.int64)),
    })


def label_histogram(idx: np.ndarray, labels_by_idx: np.ndarray, n_classes: int) -> list[int]:
    return np.bincount(labels_by_idx[idx], minlength=n_classes).astype(int).tolist()


def split_context(dataset_path: str | os.PathLike) -> SplitContext:
    labels, part, meta = read_dataset_labels(dataset_path)
    idx = np.arange(len(labels), dtype=np.int64)
    train = part == "train"
    return SplitContext(train_idx=idx[train], train_labels=labels[train], test_idx=idx[part == "test"],
                        n_classes=int(meta["n_classes"]), classes=[str(c) for c in meta["classes"]],
                        loader=str(meta.get("loader", "")), dataset=Path(dataset_path).stem)


def split_key(params: Mapping[str, Any], n_clients: int, ctx: SplitContext) -> int:
    """The split's key: ``hash(params, n_clients, dataset)`` (its streams' entropy beside the seed)."""
    return int(stable_hash({"params": dict(params), "n_clients": n_clients, "loader": ctx.loader,
                            "n_train": len(ctx.train_idx), "n_classes": ctx.n_classes}), 16)


def split_streams(seed: int, params: Mapping[str, Any], n_clients: int, ctx: SplitContext
                  ) -> tuple[np.random.Generator, list[np.random.Generator]]:
    """One cluster-level generator and one per client, all from ``[seed, hash(params, n_clients, dataset)]``."""
    children = np.random.SeedSequence([int(seed), split_key(params, n_clients, ctx)]).spawn(n_clients + 1)
    return np.random.default_rng(children[0]), [np.random.default_rng(c) for c in children[1:]]


def build_split(ctx: SplitContext, settings: Mapping[str, Any], n_clients: int, seed: int,
                field: str = "split") -> tuple[pa.Table, dict[str, Any]]:
    """The assignments table and the manifest of one scenario (nothing is written)."""
    if not isinstance(settings, Mapping) or "generator" not in settings:
        raise ConfigError(f"{field}.generator: missing; allowed: {', '.join(SPLIT_GENERATORS.names())}")
    cls = SPLIT_GENERATORS.get(settings["generator"], field=f"{field}.generator")
    cls.validate_params(settings, field)
    if not _is_int(n_clients) or n_clients < 3:
        raise ConfigError(f"clients: {n_clients!r} is not allowed; allowed: an integer >= 3")
    if not _is_int(seed) or seed < 0:
        raise ConfigError(f"seed: {seed!r} is not allowed; allowed: an integer >= 0")
    generator = cls(settings, field)
    params = generator.params
    # a parameter added after splits were published enters the streams' key and the manifest only when it departs
    # from its neutral value, so every split written before it keeps its draws and its files bit for bit
    neutral = {**COMMON_KEY_NEUTRAL, **cls.key_neutral}
    # a drift schedule (cflcore.data.drift) moves clients, it draws no sample: out of the streams' key
    key_params = {k: v for k, v in params.items() if k != DRIFT_KEY and (k not in neutral or v != neutral[k])}
    cluster_rng, client_rngs = split_streams(seed, key_params, n_clients, ctx)
    plan = generator.generate(ctx, int(n_clients), cluster_rng, client_rngs)
    n_draws = params["samples_per_client"] or max(2, len(ctx.train_idx) // n_clients)
    pools = ctx.class_pools()
    test_fraction = float(params["local_test_fraction"])
    draw = draw_client_samples if params["replace"] else DisjointDraws(pools, field)
    samples = [local_split(p.fixed_idx, test_fraction, client_rngs[k], k) if p.fixed_idx is not None
               else draw(p.class_weights, pools, client_draws(p, int(n_draws)), test_fraction, client_rngs[k], k)
               for k, p in enumerate(plan.clients)]
    clusters = [p.cluster for p in plan.clients]
    table = assignments_table(samples, clusters, ctx.test_idx)

    labels_by_idx = np.zeros(int(max(ctx.train_idx.max(initial=-1), ctx.test_idx.max(initial=-1))) + 1, dtype=np.int64)
    labels_by_idx[ctx.train_idx] = ctx.train_labels
    hist_train = [swapped_histogram(label_histogram(s.train_idx, labels_by_idx, ctx.n_classes), p.label_swaps)
                  for s, p in zip(samples, plan.clients)]
    hist_test = [swapped_histogram(label_histogram(s.test_idx, labels_by_idx, ctx.n_classes), p.label_swaps)
                 for s, p in zip(samples, plan.clients)]
    manifest: dict[str, Any] = {
        "generator": params["generator"],
        "params": key_params,
        "dataset": ctx.dataset,
        "loader": ctx.loader,
        "classes": ctx.classes,
        "n_classes": ctx.n_classes,
        "seed": int(seed),
        "n_clients": int(n_clients),
        "n_clusters": plan.n_clusters,
        "cluster_of_client": clusters,
        "clients_per_cluster": np.bincount(clusters, minlength=plan.n_clusters).astype(int).tolist(),
        "class_sets": plan.class_sets,
        "samples_per_client": int(n_draws),
        "class_weights": [np.round(p.class_weights, 12).tolist() for p in plan.clients],
        "label_histograms": [[a + b for a, b in zip(tr, te)] for tr, te in zip(hist_train, hist_test)],
        "label_histograms_train": hist_train,
        "label_histograms_test": hist_test,
        "n_train": [len(s.train_idx) for s in samples],
        "n_test": [len(s.test_idx) for s in samples],
        "orchestrator_size": int(len(ctx.test_idx)),
        **plan.cluster_info,
    }
    info_keys = sorted({k for p in plan.clients for k in p.info})
    for key in info_keys:
        manifest[f"{key}_of_client"] = [p.info.get(key) for p in plan.clients]
    if any(p.domain is not None for p in plan.clients):
        manifest["domains"] = [p.domain or {"domain": "clean"} for p in plan.clients]
    if any(p.label_swaps for p in plan.clients):
        manifest["label_swaps"] = [p.label_swaps or [] for p in plan.clients]
    if not plan.ground_truth:
        manifest["ground_truth"] = False
    if params.get(DRIFT_KEY):
        drift_rng = drift_stream(seed, key_params, n_clients, ctx)
        manifest[DRIFT_KEY] = drift_manifest(generator, params[DRIFT_KEY], plan, drift_rng, field)
        if generator.drift_draws:
            manifest[DRIFT_KEY]["samples"] = drift_samples(
                generator, plan, samples, manifest[DRIFT_KEY]["changes"], ctx, labels_by_idx, test_fraction,
                None if params["replace"] else draw, drift_rng, field)
    return table, manifest


def drift_stream(seed: int, key_params: Mapping[str, Any], n_clients: int, ctx: SplitContext) -> np.random.Generator:
    """The drift schedule's own stream (cflcore.data.drift): the split's key, so the clients' samples and
    their draws stay those of the split without a schedule."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), split_key(key_params, n_clients, ctx), DRIFT_STREAM]))


def drift_manifest(generator: Any, schedule: Sequence[Mapping[str, Any]], plan: Any, rng: np.random.Generator,
                   field: str) -> dict[str, Any]:
    """The manifest's ``drift``: the schedule (defaults filled), its ``changes`` (``[round, client, group]``) and, for
    a generator whose groups are transforms, each group's (``group_transforms``), which a client that drifts into the
    group carries (a class-distribution generator's draws: :func:`drift_samples`)."""
    check_schedule(schedule, plan.n_clusters, f"{field}.{DRIFT_KEY}")  # the groups a loader's defaults gave
    clusters = [p.cluster for p in plan.clients]
    out = {"schedule": drift_events(schedule),
           "changes": realise_schedule(schedule, clusters, plan.n_clusters, rng, f"{field}.{DRIFT_KEY}")}
    if not generator.drift_draws:
        out["group_transforms"] = generator.group_transforms()
    return out


def drift_samples(generator: Any, plan: Any, samples: Sequence[ClientSamples], changes: Sequence[Sequence[int]],
                  ctx: SplitContext, labels_by_idx: np.ndarray, test_fraction: float, disjoint: DisjointDraws | None,
                  rng: np.random.Generator, field: str) -> list[dict[str, Any]]:
    """The manifest's ``drift.samples`` of a class-distribution split (cflcore.data.drift, module doc): for every
    (client, group) pair of the ``changes``, the group not the client's own, in (client, group) order, as many
    distinct train images as the client holds, drawn by the class vector of the generator's ``drift_plan`` (the
    split's ``disjoint`` sampler with ``replace: false``, continuing from what the clients left; else
    :func:`draw_distinct`), split train / test as the split splits."""
    pools = ctx.class_pools()
    out = []
    for client, group in drawn_pairs(changes, [p.cluster for p in plan.clients]):
        own = samples[client]
        n = len(own.train_idx) + len(own.test_idx)
        mover = generator.drift_plan(group, plan, ctx, rng)
        drawn = (disjoint(mover.class_weights, pools, n, test_fraction, rng, client, drift_group=group)
                 if disjoint is not None else
                 draw_distinct(mover.class_weights, pools, n, test_fraction, rng, client, group, field))
        out.append({"client": client, "group": group, **mover.info,
                    "class_weights": np.round(mover.class_weights, 12).tolist(),
                    "label_histogram_train": label_histogram(drawn.train_idx, labels_by_idx, ctx.n_classes),
                    "label_histogram_test": label_histogram(drawn.test_idx, labels_by_idx, ctx.n_classes),
                    "train_idx": drawn.train_idx.tolist(), "test_idx": drawn.test_idx.tolist()})
    return out


def draw_distinct(class_weights: np.ndarray, pools: list[np.ndarray], n: int, local_test_fraction: float,
                  rng: np.random.Generator, client: int, group: int, field: str) -> ClientSamples:
    """``n`` distinct train images by class vector: class counts a multinomial (the split's sampler,
    :func:`draw_client_samples`, 000 §4.1), each class's images uniformly without repeat from the whole class (other
    clients may hold them), so the client holds exactly ``n``; split train / test by :func:`local_split`."""
    counts = rng.multinomial(n, np.asarray(class_weights, dtype=np.float64))
    drawn = []
    for c in np.flatnonzero(counts):
        if counts[c] > len(pools[c]):
            raise DataError(f"{field}.{DRIFT_KEY}: client {client}'s sample of group {group} needs {int(counts[c])} "
                            f"distinct images of class {c}, the train part has {len(pools[c])}; allowed: fewer "
                            "samples_per_client, or a larger train part")
        drawn.append(rng.choice(pools[c], size=int(counts[c]), replace=False))
    return local_split(np.unique(np.concatenate(drawn)), local_test_fraction, rng, client)


def client_draws(plan: ClientPlan, n_draws: int) -> int:
    """A client's draws: the split's, or its ``draw_fraction`` of them (rounded, at least 2)."""
    return n_draws if plan.draw_fraction is None else max(2, int(round(plan.draw_fraction * n_draws)))


def make_split(dataset_path: str | os.PathLike, settings: Mapping[str, Any], n_clients: int, seed: int,
               out_dir: str | os.PathLike, field: str = "split") -> dict[str, Any]:
    """Write ``{out_dir}/assignments.parquet`` and ``manifest.json`` atomically; return the manifest.

    ``field`` names the split in error messages (e.g. ``splits.overlap-balanced``). Bad input raises before
    anything is written."""
    ctx = split_context(dataset_path)
    table, manifest = build_split(ctx, settings, n_clients, seed, field)
    out_dir = Path(out_dir)
    write_parquet(table, out_dir / fn.ASSIGNMENTS)
    write_json(manifest, out_dir / fn.MANIFEST)
    return manifest


# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------
def split_summary(split_dir: str | os.PathLike) -> pd.DataFrame:
    """Per ground-truth cluster: clients, class set, classes present, distinct samples per client (mean/min/max),
    mean local train/test sizes (and the domain where there is one). ``attrs`` holds the orchestrator size."""
    import pandas as pd

    split_dir = Path(split_dir)
    manifest = read_json(split_dir / fn.MANIFEST)
    table = read_parquet(split_dir / fn.ASSIGNMENTS, columns=["client", "role"])
    clients = table.column("client").to_numpy()
    per_client = np.bincount(clients[clients >= 0], minlength=int(manifest["n_clients"]))
    cluster_of = np.asarray(manifest["cluster_of_client"])
    hist = np.asarray(manifest["label_histograms"])
    rows = []
    for c in range(int(manifest["n_clusters"])):
        mine = cluster_of == c
        sizes = per_client[mine]
        row = {
            "cluster": c,
            "clients": int(mine.sum()),
            "class_set": list(manifest["class_sets"][c]),
            "classes_present": np.flatnonzero(hist[mine].sum(axis=0)).tolist() if mine.any() else [],
            "samples_mean": float(sizes.mean()) if len(sizes) else 0.0,
            "samples_min": int(sizes.min()) if len(sizes) else 0,
            "samples_max": int(sizes.max()) if len(sizes) else 0,
            "train_mean": float(np.mean(np.asarray(manifest["n_train"])[mine])) if mine.any() else 0.0,
            "test_mean": float(np.mean(np.asarray(manifest["n_test"])[mine])) if mine.any() else 0.0,
        }
        if "cluster_domains" in manifest:
            row["domain"] = manifest["cluster_domains"][c]
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["orchestrator_size"] = int(manifest["orchestrator_size"])
    df.attrs["generator"] = manifest["generator"]
    return df
