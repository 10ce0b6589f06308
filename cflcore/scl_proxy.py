"""SCL's ε₁, ε₂ and cool-down from a centralised proxy (000 §4.2 and App. A.2, Fig. 9, Table 4).

Sattler et al. recommend ε₁ = maxₜ ‖Δθ_cᵗ‖ / 10 and ε₂ ∈ [ε₁, 10 ε₁], where Δθ_cᵗ is a cluster's mean update
in round t: numbers of the run itself. 000 replaces them with a proxy from a centralised training on the pooled
data, Δθ̂ᵗ = |SGD(θᵗ, D) − SGD(θᵗ⁻¹, D)|, i.e. the norm of the centralised model's update in round t, and takes
the cool-down round from the proxy's convergence ("the round of convergence is used to select the value for a
cool-down period"). This module:

* :func:`proxy_update_norms` trains the dataset's model centrally on the scenario's pooled client training data
  for the study's rounds, with the clients' own recipe (optimiser, learning rate, batch size, local epochs), and
  returns Δθ̂ᵗ per round (the norm over the shared parameters, the vector SCL's norms are taken of). A round is
  ``round_size``:

  - ``client`` (default): a client's round: each round draws, without replacement, as many pooled rows as a
    client holds on average and runs the local epochs on them, so that Δθ̂ᵗ has the step count, and so the
    scale, of the updates ε₁ and ε₂ are compared with (a client's update; FedAvg's mean update);
  - ``epoch``: the text's literal SGD(θ, D), the local epochs over the whole pooled set: N times the steps of a
    client's round, so Δθ̂ᵗ is several times a client's update early on (a reading kept selectable).

* :func:`epsilons_from_proxy` derives ε₁ = max Δθ̂ / 10, ε₂ = ``factor`` · ε₁ and the cool-down: the number of
  rounds before Δθ̂ settles, i.e. the first round from which it stays within ``tolerance`` of its total decrease
  above its final value (Δθ̂ˢ ≤ Δθ̂_final + tolerance · (max Δθ̂ − Δθ̂_final) for every later s). The factor 5 is
  what both Sattler et al. (ε₁ 6, ε₂ 30 on MNIST; 25 and 125) and 000's own proxy-derived values (Table 4:
  CIFAR-10 185 / 925, PathMNIST 12 / 60, BloodMNIST 38 / 188) use.

The proxy is written beside the split (``splits/<scenario>/scl_proxy-<round size>.parquet``, rule ``scl_proxy``)
and read by the train stage of every SCL variant with ``epsilon: proxy`` (:func:`resolve_scl_epsilons`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

ROUND_SIZES = ("client", "epoch")
_STREAM_PROXY = 0x5C  # the proxy's own random streams: initial model, rows per round, batch order


@dataclass(frozen=True)
class ProxyEpsilons:
    """What an SCL run with ``epsilon: proxy`` uses, and where it came from."""

    eps1: float
    eps2: float
    cooldown: int
    max_update_norm: float
    factor: float
    tolerance: float
    source: str = "proxy"

    def as_params(self) -> dict[str, Any]:
        return {"eps1": self.eps1, "eps2": self.eps2, "cooldown": self.cooldown}


def convergence_round(norms: np.ndarray, tolerance: float) -> int:
    """The first 0-based round from which ``norms`` stays within ``tolerance`` of its total decrease above its
    final value (0 for a trace that never rises above that band)."""
    norms = np.asarray(norms, dtype=np.float64)
    if norms.size == 0:
        return 0
    final, peak = float(norms[-1]), float(norms.max())
    above = np.flatnonzero(norms > final + tolerance * (peak - final))
    return int(above[-1] + 1) if above.size else 0


def epsilons_from_proxy(norms: np.ndarray, factor: float = 5.0, tolerance: float = 0.1) -> ProxyEpsilons:
    """Sattler et al.'s recommendation on the proxy (000 App. A.2): ε₁ = max Δθ̂ / 10, ε₂ = factor · ε₁ with
    factor ∈ [1, 10], cool-down = the rounds before Δθ̂ settles (:func:`convergence_round`)."""
    if not 1.0 <= factor <= 10.0:
        raise ValueError(f"factor {factor!r}: allowed 1 <= factor <= 10 (eps2 within [eps1, 10 eps1])")
    norms = np.asarray(norms, dtype=np.float64)
    if norms.size == 0 or not np.isfinite(norms).all():
        raise ValueError("the proxy's update norms are empty or not finite")
    peak = float(norms.max())
    eps1 = peak / 10.0
    return ProxyEpsilons(eps1, factor * eps1, convergence_round(norms, tolerance), peak, float(factor), float(tolerance))


def proxy_update_norms(fed: Any, training: Mapping[str, Any], engine: Mapping[str, Any], seed: int,
                       round_size: str = "client") -> np.ndarray:
    """Δθ̂ᵗ of a centralised training on ``fed``'s pooled client training data, one per round of
    ``training["rounds"]`` (see the module docstring for ``round_size``)."""
    import torch

    from .fl.flat_params import ModelLayout
    from .fl.optim import ClientOptimizer
    from .fl.trainers import LoopTrainer, TrainSpec, derive_seed
    from .models import build_model
    from .data.federated import ClientData

    if round_size not in ROUND_SIZES:
        raise ValueError(f"round_size {round_size!r}: allowed {', '.join(ROUND_SIZES)}")
    c, h, w = fed.shape
    kwargs = {"in_channels": c, "image_size": [h, w], "n_classes": fed.n_classes, **dict(training.get("model_kwargs") or {})}
    with torch.random.fork_rng(devices=[]):  # constructors draw from the default generator: fork it, seed it
        torch.manual_seed(derive_seed(seed, _STREAM_PROXY, 0))
        model = build_model(training["model"], **kwargs)
    layout = ModelLayout.of(model)
    shared = layout.partition(bool(engine.get("bn_buffers_in_delta", False)), engine.get("bn_stats") == "local").shared
    spec = TrainSpec(ClientOptimizer.from_training(dict(training)), int(training["batch_size"]), int(training["local_epochs"]))
    trainer = LoopTrainer(model, layout, spec, torch.device("cpu"))
    x = torch.cat([cl.x_train for cl in fed.clients])
    y = torch.cat([cl.y_train for cl in fed.clients])
    empty = np.zeros(0, dtype=np.int64)
    per_client = max(1, round(len(y) / len(fed.clients)))
    theta = layout.flatten(model).to(torch.float32)
    norms = []
    for rnd in range(int(training["rounds"])):
        if round_size == "client":
            rows = torch.randperm(len(y), generator=torch.Generator().manual_seed(derive_seed(seed, _STREAM_PROXY, 1, rnd)))[:per_client]
            data = ClientData(x[rows], y[rows], x[:0], y[:0], empty, empty)
        else:
            data = ClientData(x, y, x[:0], y[:0], empty, empty)
        new, _ = trainer.train_client(theta, data, derive_seed(seed, _STREAM_PROXY, 2, rnd))
        norms.append(float(torch.linalg.vector_norm((new[shared] - theta[shared]).to(torch.float64))))
        theta = new.clone()
    return np.asarray(norms, dtype=np.float64)


def write_proxy(norms: np.ndarray, out_path: Any, meta: Mapping[str, Any]) -> None:
    """``scl_proxy.parquet``: round (0-based), update_norm; ``meta`` (round size, rounds) in the schema metadata."""
    import pyarrow as pa

    from .io import write_parquet

    table = pa.table({"round": pa.array(np.arange(len(norms)), pa.int64()), "update_norm": pa.array(norms, pa.float64())})
    write_parquet(table, out_path, metadata={"scl_proxy": dict(meta)})


def read_proxy(path: Any) -> np.ndarray:
    import pyarrow.parquet as pq

    return pq.read_table(path).column("update_norm").to_numpy()


def proxy_file(round_size: str) -> str:
    """The proxy's file name in the split folder."""
    return f"scl_proxy-{round_size}.parquet"


def uses_proxy(algorithm: Mapping[str, Any]) -> bool:
    """Whether a run's algorithm settings ask for the proxy's ε (an SCL variant with ``epsilon: proxy``)."""
    return algorithm.get("method") == "scl" and algorithm.get("epsilon") == "proxy"


def resolve_scl_epsilons(algorithm: Mapping[str, Any], split_dir: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """An SCL variant's parameters with ``epsilon: proxy`` resolved from the proxy in ``split_dir``: (params with
    eps1, eps2 and cooldown set, the record of what was used), or (``algorithm`` unchanged, None) otherwise."""
    from pathlib import Path

    if not uses_proxy(algorithm):
        return dict(algorithm), None
    path = Path(split_dir) / proxy_file(str(algorithm["proxy_round"]))  # validated settings carry the defaults
    eps = epsilons_from_proxy(read_proxy(path), float(algorithm["proxy_factor"]), float(algorithm["proxy_tolerance"]))
    return {**algorithm, **eps.as_params()}, asdict(eps)
