"""Concept and feature shifts: ground-truth groups that see their images, or their labels, transformed
(docs/architecture.md §7). The transform is decided here, recorded per client in the manifest (``domains``,
``label_swaps``) and applied where the data is loaded (cflcore.data.transforms), so every stage sees the same data.

* ``domains`` (004 §7.3, Table 4/7): near-uniform classes (Dir(``alpha``), default 100) but groups of clients see
  clean, noised (``noise_std``, pixels in [0, 1]) or blurred (``blur_sigma``) images.
* ``rotation`` (concept shift on features), ``label-swap`` (concept shift on labels) and ``feature-skew`` (images
  as they are, eroded or dilated): three of the five heterogeneities of
  leahcimali/Comparative-Evaluation-of-Clustered-Federated-Learning-Methods (``src/utils_data.py``); Sattler's demo
  (felisat/clustered-federated-learning) rotates half the clients by 180°.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...errors import ConfigError
from .base import (SPLIT_GENERATORS, ClientPlan, SplitContext, SplitGenerator, SplitPlan, apportion,
                   check_enough_clients, check_group_shares, clusters_of, dirichlet_weights, shares_param)
from ..drift import DRIFT_KEY, DRIFT_PARAM
from .grouped import GROUP_PARAMS, GroupedShiftSplit

DOMAINS = ("clean", "noise", "blur")
"""004's visual domains (``domains``)."""

ROTATION_ANGLES = (0, 90, 180, 270)
"""leahcimali/Comparative-Evaluation-of-Clustered-Federated-Learning-Methods (src/utils_data.py,
``concept-shift-on-features``): four groups rotated by 0°, 90°, 180°, 270° (``np.rot90``, counter-clockwise)."""

LABEL_SWAPS = ([1, 7], [2, 7], [4, 7], [3, 8], [5, 6], [7, 9])
"""The same code's ``concept-shift-on-labels``: six groups, each swapping one label pair."""

FEATURE_KINDS = ("none", "erode", "dilate")
"""The same code's ``features-distribution-skew``: three groups, images as they are, eroded or dilated."""


@SPLIT_GENERATORS.register("domains")
class DomainsSplit(SplitGenerator):
    """004 §7.3 (Tables 4, 7): groups of clients with clean, noisy or blurred images, near-uniform classes.

    004 does not give its noise σ or blur radius. The authors' code (davedleo/FedGWC, datasets/CIFAR100/utils.py)
    blurs with PIL's GaussianBlur(radius) before normalising and adds N(0, σ²) *after* normalising (units of
    the channel std, about 0.27 of the pixel range on CIFAR), unclipped and redrawn at every access. Ours
    (cflcore.data.transforms): noise in pixel units [0, 1], clipped back to [0, 1] and drawn once per client (a
    fixed corruption, so every run is deterministic); on MNIST's black background clipping keeps only the
    positive half of the noise. The defaults (noise_std 0.2, blur_sigma 1.0) barely move MNIST's training
    losses (AUC of the per-client mean loss clean vs noise 0.55, clean vs blur 0.60);
    noise_std 0.6 and blur_sigma 2.0 separate them (AUC 1.00 and 0.86)."""

    params_schema = {
        "domains": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(DOMAINS)},
                    "default": list(DOMAINS), "description": "the visual domain of each group (004 §7.3)"},
        "cluster_shares": shares_param([0.4, 0.3, 0.3]),
        "alpha": {"type": "number", "exclusiveMinimum": 0, "default": 100.0,
                  "description": "Dirichlet concentration of each client's class vector (near-uniform classes)"},
        "noise_std": {"type": "number", "minimum": 0, "default": 0.2,
                      "description": "std of the Gaussian noise of the noise domain (pixels in [0, 1])"},
        "blur_sigma": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                       "description": "σ of the Gaussian blur of the blur domain, in pixels"},
    }
    group_key = "domains"

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        check_group_shares(p, field, "domains")

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        return tuple(apportion(n_clients, self.params["cluster_shares"]))

    def domain_record(self, kind: str, rng: np.random.Generator) -> dict[str, Any]:
        if kind == "noise":
            return {"domain": "noise", "noise_std": float(self.params["noise_std"]),
                    "noise_seed": int(rng.integers(2**31 - 1))}
        if kind == "blur":
            return {"domain": "blur", "blur_sigma": float(self.params["blur_sigma"])}
        return {"domain": "clean"}

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        kinds = list(self.params["domains"])
        check_enough_clients(n_clients, len(kinds), self.field)
        all_classes = list(range(ctx.n_classes))
        clusters = clusters_of(self.group_sizes(n_clients))
        clients = []
        for k, c in enumerate(clusters):
            w = dirichlet_weights(float(self.params["alpha"]), all_classes, ctx.n_classes, client_rngs[k])
            clients.append(ClientPlan(cluster=c, class_weights=w, domain=self.domain_record(kinds[c], client_rngs[k])))
        return SplitPlan(len(kinds), [all_classes for _ in kinds], clients, {"cluster_domains": kinds})


DIRICHLET_OVER = ("classes", "clients")
"""A rotation split's ``dirichlet_over``: classes (each client's class vector ~ Dir(α) over the classes, its draws by
the shared sampler) or clients (each class's train images divided among the clients by shares ~ Dir(α) over the
clients: a partition of the whole train part, Sattler et al.'s ``split_noniid``, :func:`partition_by_class_shares`)."""


def partition_by_class_shares(ctx: SplitContext, n_clients: int, alpha: float, rng: np.random.Generator
                              ) -> list[np.ndarray]:
    """Every train image to one client: class c's images, in a random order, cut at the cumulative shares of
    Dir(α·1) over the clients, one draw per class (felisat/clustered-federated-learning data_utils.py:4-23,
    ``split_noniid``). The images of each client, sorted; a client may get few or none."""
    shares = rng.dirichlet(np.full(n_clients, float(alpha)), ctx.n_classes)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for c, pool in enumerate(ctx.class_pools()):
        pool = rng.permutation(pool)
        cuts = (np.cumsum(shares[c])[:-1] * len(pool)).astype(int)
        for k, chunk in enumerate(np.split(pool, cuts)):
            parts[k].append(chunk)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


@SPLIT_GENERATORS.register("rotation")
class RotationSplit(GroupedShiftSplit):
    """Concept shift on features, P(x | y) differs: group g sees every image (train and local test) rotated by
    ``angles[g]`` degrees counter-clockwise. Sources: leahcimali's ``concept-shift-on-features`` (0/90/180/270°,
    ``np.rot90``); felisat/clustered-federated-learning's demo (half the clients rotated by 180°, Dirichlet α 1.0:
    ``angles: [180, 0]``, ``cluster_shares: [0.5, 0.5]``, ``alpha: 1.0``); IFCA (Ghosh et al. 2020) on rotated
    MNIST. The rotation is recorded per client in the manifest (``domains``) and applied where the data is loaded
    (cflcore.data.transforms.apply_domain): multiples of 90° exactly (``torch.rot90``), others by
    ``scipy.ndimage.rotate`` (bilinear, zero fill). The orchestrator set stays unrotated."""

    params_schema = {
        "angles": {"type": "array", "minItems": 1, "uniqueItems": True,
                   "items": {"type": "integer", "minimum": 0, "maximum": 359}, "default": list(ROTATION_ANGLES),
                   "description": "one angle per group, degrees counter-clockwise (default 0/90/180/270, leahcimali)"},
        **GROUP_PARAMS,
        "dirichlet_over": {"enum": list(DIRICHLET_OVER), "default": "classes",
                           "description": "with a number alpha: classes = each client's class vector ~ Dir(alpha) over "
                                          "the classes, its samples_per_client drawn by it; clients = each class's train "
                                          "images divided among the clients by shares ~ Dir(alpha) over the clients, a "
                                          "partition of the whole train part (Sattler et al.'s split_noniid, "
                                          "felisat/clustered-federated-learning data_utils.py:4-23; needs "
                                          "samples_per_client null and replace false)"},
        DRIFT_KEY: DRIFT_PARAM,
    }
    key_neutral = {"dirichlet_over": "classes"}  # added after the first rotation studies: classes draws as before it
    group_key = "angles"

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        super().check_params(p, field)
        if p["dirichlet_over"] == "clients" and (p["alpha"] is None or p["samples_per_client"] is not None
                                                 or p["replace"]):
            raise ConfigError(f"{field}.dirichlet_over: clients partitions the train part by Dir(alpha) over the "
                              f"clients; allowed with a number alpha, samples_per_client null and replace false only "
                              f"(got alpha {p['alpha']!r}, samples_per_client {p['samples_per_client']!r}, replace "
                              f"{p['replace']!r})")

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        plan = super().generate(ctx, n_clients, cluster_rng, client_rngs)
        if self.params["dirichlet_over"] == "clients":
            parts = partition_by_class_shares(ctx, n_clients, float(self.params["alpha"]), cluster_rng)
            for client, idx in zip(plan.clients, parts):
                client.fixed_idx = idx
                client.class_weights = np.bincount(ctx.train_labels[np.searchsorted(ctx.train_idx, idx)],
                                                   minlength=ctx.n_classes) / max(1, len(idx))
        return plan

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        angle = int(self.params["angles"][group])
        return {"domain": {"domain": "rotate", "angle": angle}, "info": {"angle": angle}}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_domains": [f"rotate {a}" for a in self.params["angles"]]}


@SPLIT_GENERATORS.register("label-swap")
class LabelSwapSplit(GroupedShiftSplit):
    """Concept shift on labels, P(y | x) differs: group g exchanges the labels of ``swaps[g]`` = [a, b] in its
    clients' train and local test labels (images unchanged). Source: leahcimali's ``concept-shift-on-labels`` (six
    groups: (1,7), (2,7), (4,7), (3,8), (5,6), (7,9)). Recorded per client in the manifest (``label_swaps``) and
    applied where the data is loaded (cflcore.data.transforms.swap_labels); the orchestrator keeps the true labels."""

    params_schema = {
        "swaps": {"type": "array", "minItems": 1,
                  "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer", "minimum": 0}},
                  "default": [list(p) for p in LABEL_SWAPS],
                  "description": "one label pair per group, exchanged in the group's train and test labels (default "
                                 "(1,7), (2,7), (4,7), (3,8), (5,6), (7,9), leahcimali); a label must be one of the "
                                 "dataset's classes"},
        **GROUP_PARAMS,
        DRIFT_KEY: DRIFT_PARAM,
    }
    group_key = "swaps"
    class_keys = ("swaps",)

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        for i, pair in enumerate(p["swaps"]):
            if pair[0] == pair[1]:
                raise ConfigError(f"{field}.swaps[{i}]: {pair!r} swaps label {pair[0]} with itself; allowed: two "
                                  "different labels")
        super().check_params(p, field)

    def check_in_dataset(self, ctx: SplitContext) -> None:
        for i, pair in enumerate(self.params["swaps"]):
            for c in pair:
                if c >= ctx.n_classes:
                    raise ConfigError(f"{self.field}.swaps[{i}]: label {c} is not in dataset {ctx.dataset}; its classes "
                                      f"are 0..{ctx.n_classes - 1} ({', '.join(ctx.classes)})")

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        pair = [int(c) for c in self.params["swaps"][group]]
        return {"label_swaps": [pair], "info": {"swap": pair}}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_shifts": [f"swap {a}<->{b}" for a, b in self.params["swaps"]]}


@SPLIT_GENERATORS.register("feature-skew")
class FeatureSkewSplit(GroupedShiftSplit):
    """Feature distribution skew: group g's images as they are (``none``), eroded or dilated (greyscale
    morphology, a ``morphology_size`` × ``morphology_size`` square, ``scipy.ndimage.grey_erosion`` /
    ``grey_dilation``). Source: leahcimali's ``features-distribution-skew`` (three groups: as they are, eroded,
    dilated; its code uses OpenCV's erode / dilate, the same operators on uint8 images). Recorded per client in the
    manifest (``domains``) and applied where the data is loaded; the orchestrator set stays as it is."""

    params_schema = {
        "features": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(FEATURE_KINDS)},
                     "default": list(FEATURE_KINDS),
                     "description": "one kind per group (default none / erode / dilate, leahcimali)"},
        "morphology_size": {"type": "integer", "minimum": 2, "maximum": 7, "default": 3,
                            "description": "side of the square of the greyscale erosion / dilation (scipy.ndimage)"},
        **GROUP_PARAMS,
        DRIFT_KEY: DRIFT_PARAM,
    }
    group_key = "features"

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        kind = self.params["features"][group]
        domain = ({"domain": "clean"} if kind == "none"
                  else {"domain": kind, "morphology_size": int(self.params["morphology_size"])})
        return {"domain": domain}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_domains": list(self.params["features"])}
