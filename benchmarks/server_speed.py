"""Server-side speed: the divergence matrix Γ of OCFL, and clustering time per clusterer (script, not a test).

(a) Γ (pairwise cosine distances of the clients' update vectors, 000 Def. 6) at N = 30 clients and the
    ``ocfl-cnn`` parameter count (25.4M, float32 updates drawn around three planted directions). Variants:

    engine-f32       cflcore.clustering.divergence.cosine_divergence_matrix(X, "float32"): one float32 Gram
                     product Δ Δᵀ, normalised on the n × n matrix (the strategies' float32 Γ before the engine shared one product).
    engine-f64       the same at "float64": the Gram product accumulated over cache-sized float64 blocks
                     (cflcore.clustering.divergence.update_gram: the round's ONE product, which
                     the engine records and every strategy reads). It is the reference every other variant
                     is checked against.
    torch-normalise  the strongest torch baseline a user would write: F.normalize rows (an n × P copy),
                     1 − Xn Xnᵀ (float32).
    scipy-pdist      the strongest numpy baseline: squareform(pdist(X64, "cosine")) on a float64 array
                     (the float32 → float64 conversion is timed as a component).
    published-ocfl   the OCFL authors' code (MKZuziak/Clustered-Federated-Learning, FedCL/simulation.py +
                     aggregators/distances.py): per client, every state-dict tensor ``.flatten().numpy()
                     .tolist()`` extended into one Python list, ``np.array`` of it into a float64 (N, P)
                     matrix; then an upper-triangle double loop of scipy.spatial.distance.cosine on rows.
    sattler          Sattler et al.'s code (felisat/clustered-federated-learning, fl_devices.pairwise_angles):
                     a full N × N double loop that flattens both clients' parameter dicts (torch.cat) in
                     every iteration and computes sum(s1·s2) / (‖s1‖‖s2‖ + 1e-12) in float32.

    published-ocfl and sattler at full size would take minutes and (published-ocfl) a 6 GB float64
    matrix: their unit of work (one client's conversion, one pair, one loop iteration) is timed side by
    side with the others and extrapolated linearly to N conversions + N(N−1)/2 pairs (published-ocfl)
    and N² iterations (sattler); those rows are marked EXTRAPOLATED and the CSV has ``extrapolated = 1``.
    In ``--quick`` mode (P = 200k) they run in full.

    Equivalence (asserted, raises on failure): every variant's Γ and temperature T against engine-f64's.
    float64 variants: atol = 2·P·2⁻⁵³ (the worst-case relative error bound P·u of a recursively summed
    dot product of P terms, doubled; observed ~1e-12). float32 variants: atol = 2⁻²⁴·√P (a float32 dot
    product's random-walk rounding estimate √P·u; BLAS blocking and torch's cascade sums do better,
    observed ~1e-5 at P = 25M). Extrapolated variants are checked on the pairs they computed.

    Ablation (the engine's switchable parts of the Γ computation): ``precision`` float32 vs float64 (the
    table rows engine-f32 / engine-f64); float64 *without* column blocking (``divergence.BLOCK_BYTES`` = n·P·8:
    one full float64 copy of the updates); and *without* the Gram trick (normalising the rows first: that
    is torch-normalise, an n × P copy). The Gram trick and the blocking save memory (n·P·4 and n·P·8
    bytes: 3 and 6 GB here), not time.

(b) Clustering time per clusterer at N = 15, 30, 100, 1000 on planted three-centre updates with the
    tinyvgg parameter count (~10k): Γ + clusterer, with the ARI as a sanity check.

Usage: OMP_NUM_THREADS=1 python benchmarks/server_speed.py [--quick] [--repeats 3] [--threads 1] [--csv PATH]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial.distance import cosine as scipy_cosine
from scipy.spatial.distance import pdist, squareform
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the planted-partition test helper
import harness  # noqa: E402
from harness import Result, assert_close, fmt  # noqa: E402
from synthetic_clusters import planted_deltas, planted_labels  # noqa: E402

import cflcore.clustering.divergence as divergence  # noqa: E402
from cflcore.clustering.clusterers import ClusteringInput, build_clusterer, run_clusterer  # noqa: E402
from cflcore.clustering.divergence import cosine_divergence_from_gram, cosine_divergence_matrix, gram_matrix, temperature  # noqa: E402
from cflcore.models import build_model  # noqa: E402

CLUSTERERS = {
    "kmeans": {"clusterer": "kmeans", "k": "oracle"},
    "affinity": {"clusterer": "affinity"},
    "affinity-d0.9": {"clusterer": "affinity", "damping": 0.9},
    "meanshift": {"clusterer": "meanshift"},
    "hdbscan-sklearn": {"clusterer": "hdbscan"},
    "hdbscan-package": {"clusterer": "hdbscan", "backend": "hdbscan"},
    "louvain": {"clusterer": "louvain"},
    "agglomerative": {"clusterer": "sklearn", "estimator": "AgglomerativeClustering",
                      "clusterer_params": {"n_clusters": None, "distance_threshold": 0.5, "metric": "precomputed",
                                           "linkage": "average"}},
}


def tol64(p: int) -> float:
    return max(1e-12, 2.0 * p * 2.0 ** -53)


def tol32(p: int) -> float:
    return max(1e-6, 2.0 ** -24 * p ** 0.5)


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------
def ocfl_cnn_shapes() -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every ocfl-cnn parameter on 28 × 28 MNIST (its state dict: no buffers)."""
    with torch.device("meta"):
        model = build_model("ocfl-cnn", 1, (28, 28), 10)
    return [(n, tuple(p.shape)) for n, p in model.state_dict().items()]


def scaled_shapes(p_target: int) -> list[tuple[str, tuple[int, ...]]]:
    """ocfl-cnn's layer list, the big FC layer shrunk so the total is about ``p_target`` (quick mode)."""
    shapes = ocfl_cnn_shapes()
    total = sum(int(np.prod(s)) for _, s in shapes)
    if p_target >= total:
        return shapes
    big = max(range(len(shapes)), key=lambda i: int(np.prod(shapes[i][1])))
    rest = total - int(np.prod(shapes[big][1]))
    out_features = shapes[big][1][0]
    in_features = max(1, (p_target - rest) // out_features)
    shapes[big] = (shapes[big][0], (out_features, in_features))
    return shapes


def planted_updates(n: int, p: int, seed: int, noise: float = 0.5) -> torch.Tensor:
    """(n, p) float32 updates around three random unit directions (client i in cluster i mod 3), built in place."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, p, generator=gen)
    x.mul_(noise / p ** 0.5)
    for c in range(3):
        centre = torch.randn(p, generator=gen)
        centre /= torch.linalg.vector_norm(centre)
        x[c::3].add_(centre)
    return x


def as_state_dicts(x: torch.Tensor, shapes: list[tuple[str, tuple[int, ...]]]) -> list[dict[str, torch.Tensor]]:
    """Each row of ``x`` as an ordered name -> tensor dict (views, no copy), like a client's update dict."""
    out = []
    for row in x:
        d, off = {}, 0
        for name, shape in shapes:
            k = int(np.prod(shape))
            d[name] = row[off:off + k].view(shape)
            off += k
        out.append(d)
    return out


# ---------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------
def torch_normalise(x: torch.Tensor) -> np.ndarray:
    xn = F.normalize(x, dim=1)
    gamma = (1.0 - xn @ xn.T).clamp_(0.0, 2.0)
    gamma.fill_diagonal_(0.0)
    return gamma.numpy()


def scipy_pdist(x64: np.ndarray) -> np.ndarray:
    return squareform(pdist(x64, "cosine"))


def published_ocfl_convert(update: dict[str, torch.Tensor]) -> np.ndarray:
    """One client's row of the published code's float64 matrix (FedCL simulation.py, energy_oneshot)."""
    flattened_model: list[float] = []
    for value in update.values():
        flattened_model.extend(value.flatten().detach().numpy().tolist())
    return np.array(flattened_model)


def published_ocfl_pair(a: np.ndarray, b: np.ndarray) -> float:
    return float(scipy_cosine(a, b))


def published_ocfl_full(updates: list[dict[str, torch.Tensor]], p: int) -> np.ndarray:
    """FedCL: the (N, P) float64 matrix row by row, then calculate_cosine_dist (upper triangle, mirrored)."""
    n = len(updates)
    matrix = np.zeros(shape=(n, p))
    for pos, update in enumerate(updates):
        matrix[pos, :] = published_ocfl_convert(update)
    cosmat = np.zeros(shape=(n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                cosmat[i, j] = 0
            elif i > j:
                cosmat[i, j] = cosmat[j, i]
            else:
                cosmat[i, j] = published_ocfl_pair(matrix[i, :], matrix[j, :])
    return cosmat


def _flatten(source: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([value.flatten() for value in source.values()])


def sattler_iteration(source1: dict[str, torch.Tensor], source2: dict[str, torch.Tensor]) -> torch.Tensor:
    """One iteration of pairwise_angles' double loop (felisat/clustered-federated-learning fl_devices.py)."""
    s1 = _flatten(source1)
    s2 = _flatten(source2)
    return torch.sum(s1 * s2) / (torch.norm(s1) * torch.norm(s2) + 1e-12)


def sattler_full(updates: list[dict[str, torch.Tensor]]) -> np.ndarray:
    n = len(updates)
    angles = torch.zeros([n, n])
    for i, source1 in enumerate(updates):
        for j, source2 in enumerate(updates):
            angles[i, j] = sattler_iteration(source1, source2)
    return 1.0 - angles.numpy().astype(np.float64)  # Γ = 1 − cosine similarity


def engine_f64_unchunked(x: torch.Tensor) -> np.ndarray:
    """Ablation: engine-f64 with column blocking switched off (divergence.BLOCK_BYTES = n·P·8: one float64 copy)."""
    saved = divergence.BLOCK_BYTES
    divergence.BLOCK_BYTES = max(1, 8 * x.shape[0] * x.shape[1])
    try:
        return cosine_divergence_matrix(x, "float64")
    finally:
        divergence.BLOCK_BYTES = saved


# ---------------------------------------------------------------------------------------------
# (a)
# ---------------------------------------------------------------------------------------------
def norm_error(x: torch.Tensor) -> float:
    """Largest relative error of torch's float32 row norms (torch.linalg.vector_norm) against float64 ones."""
    n32 = torch.stack([torch.linalg.vector_norm(r) for r in x]).double()
    n64 = torch.stack([torch.linalg.vector_norm(r.double()) for r in x])
    return float(((n32 - n64).abs() / n64).max())


def bench_divergence(rec: harness.Recorder, n: int, shapes: list[tuple[str, tuple[int, ...]]], repeats: int,
                     seed: int, extrapolate: bool) -> None:
    p = sum(int(np.prod(s)) for _, s in shapes)
    case = f"divergence N={n} P={p}"
    need = n * p * (4 + 8 + 4) / 2 ** 30 + 1.5
    print(f"\n(a) divergence matrix Γ, N={n}, P={p:,} (ocfl-cnn layer shapes), float32 updates, three planted "
          f"clusters; peak memory about {need:.1f} GiB (updates + their float64 copy + one normalised copy)")
    x = planted_updates(n, p, seed)
    updates = as_state_dicts(x, shapes)
    w = min(p, 1 << 20)  # warm-up stand-ins on a 1M-column slice: code paths and BLAS, not 25M columns again
    xs = x[:, :w].contiguous()
    xs64, upd_s = xs.double().numpy(), as_state_dicts(xs, [("w", (w,))])
    r_norm = norm_error(x)
    t32, t64 = tol32(p), tol64(p)
    t32n = t32 + 4 * r_norm
    print(f"  tolerances vs engine-f64: float64 variants atol {t64:.1e} (2·P·2^-53); engine-f32 atol {t32:.1e} "
          f"(2^-24·√P); float32 variants normalising with torch's float32 norms atol {t32n:.1e} (2^-24·√P + 4·{r_norm:.1e}, "
          f"the measured relative error of torch.linalg.vector_norm in float32 on these rows)")

    # ablation first, alone: one full float64 copy (n·P·8 bytes) must not meet the pdist baseline's copy
    ablation = harness.time_side_by_side({"engine-f64 without blocking": lambda: engine_f64_unchunked(x)}, 1,
                                         warmup={"engine-f64 without blocking": lambda: engine_f64_unchunked(xs)})

    # the float64 array the pdist baseline works on (timed once: a component, not a variant)
    conv_s, x64 = harness.time_call(lambda: x.double().numpy())
    conversion = Result("component: float32 torch -> float64 numpy", [conv_s])

    rng = np.random.default_rng(seed)
    pairs = [tuple(sorted(rng.choice(n, size=2, replace=False).tolist())) for _ in range(repeats)]
    sample: dict[str, list] = {"ocfl-conv": [], "ocfl-pair": [], "sattler": []}

    def ocfl_conv_one() -> None:
        i = pairs[len(sample["ocfl-conv"]) % len(pairs)][0]
        row = published_ocfl_convert(updates[i])
        sample["ocfl-conv"] = [(i, row)] + [(k, None) for k, _ in sample["ocfl-conv"]]  # keep one 8P-byte row

    def ocfl_pair_one() -> None:  # rows of the float64 matrix: the published conversion's values (checked)
        i, j = pairs[len(sample["ocfl-pair"]) % len(pairs)]
        sample["ocfl-pair"].append(((i, j), published_ocfl_pair(x64[i], x64[j])))

    def sattler_one() -> None:
        i, j = pairs[len(sample["sattler"]) % len(pairs)]
        sample["sattler"].append(((i, j), float(sattler_iteration(updates[i], updates[j]))))

    variants: dict[str, Callable[[], object]] = {
        "engine-f32": lambda: cosine_divergence_matrix(x, "float32"),
        "engine-f64": lambda: cosine_divergence_matrix(x, "float64"),
        "torch-normalise": lambda: torch_normalise(x),
        "scipy-pdist": lambda: scipy_pdist(x64),
    }
    if extrapolate:
        variants.update({"published-ocfl: 1 conversion": ocfl_conv_one, "published-ocfl: 1 pair": ocfl_pair_one,
                         "sattler: 1 iteration": sattler_one})
    else:
        variants.update({"published-ocfl": lambda: published_ocfl_full(updates, p),
                         "sattler": lambda: sattler_full(updates)})
    warm = {"engine-f32": lambda: cosine_divergence_matrix(xs, "float32"),
            "engine-f64": lambda: cosine_divergence_matrix(xs, "float64"),
            "torch-normalise": lambda: torch_normalise(xs), "scipy-pdist": lambda: scipy_pdist(xs64),
            "published-ocfl: 1 conversion": lambda: published_ocfl_convert(upd_s[0]),
            "published-ocfl: 1 pair": lambda: published_ocfl_pair(xs64[0], xs64[1]),
            "sattler: 1 iteration": lambda: sattler_iteration(upd_s[0], upd_s[1]),
            "published-ocfl": lambda: published_ocfl_full(upd_s[:3], w), "sattler": lambda: sattler_full(upd_s[:3])}
    res = harness.time_side_by_side(variants, repeats, warmup={k: warm[k] for k in variants})

    # components of the engine (one call each after the loop; the n × n steps take microseconds)
    g32_s, g32 = harness.time_call(lambda: gram_matrix(x, "float32"))
    norm_s, gamma32 = harness.time_call(lambda: cosine_divergence_from_gram(g32))
    temp_s, _ = harness.time_call(lambda: temperature(gamma32))
    diag_bias = float((g32.diagonal().double() / torch.from_numpy(np.einsum("ij,ij->i", x64, x64)) - 1).abs().max())

    # ---- equivalence ------------------------------------------------------------------------
    ref = res["engine-f64"].output
    t_ref = temperature(ref)
    checks = {"engine-f32": (res["engine-f32"].output, t32), "torch-normalise": (res["torch-normalise"].output, t32n),
              "scipy-pdist": (res["scipy-pdist"].output, t64),
              "engine-f64 without blocking": (ablation["engine-f64 without blocking"].output, t64)}
    if not extrapolate:
        checks["published-ocfl"] = (res["published-ocfl"].output, t64)
        checks["sattler"] = (res["sattler"].output, t32n)
    worst = {}
    for name, (gamma, tol) in checks.items():
        worst[name] = assert_close(name, gamma, ref, atol=tol, what="Γ")
        assert_close(name, temperature(gamma), t_ref, atol=tol, what="temperature T")
    if extrapolate:
        i, row = sample["ocfl-conv"][0]
        assert_close("published-ocfl", row, x64[i], atol=0.0, what=f"client {i}'s float64 row")
        for name, key, tol in (("published-ocfl", "ocfl-pair", t64), ("sattler", "sattler", t32n)):
            vals = sample[key]
            got = [v if key == "ocfl-pair" else 1.0 - v for _, v in vals]
            worst[name] = assert_close(name, got, [ref[i, j] for (i, j), _ in vals], atol=tol,
                                       what=f"Γ at the {len(vals)} sampled pairs")
    print("  equivalence vs engine-f64, max |ΔΓ| (all within tolerance): " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    print(f"  note: the float32 Gram diagonal is off by up to {diag_bias:.1e} (relative) from the float64 one (sgemm "
          f"accumulates {p:,} products in float32); engine-f32's Γ is accurate because G_ij/√(G_ii·G_jj) divides out "
          f"the shared bias")

    # ---- extrapolated totals ------------------------------------------------------------------
    n_pairs = n * (n - 1) // 2
    if extrapolate:
        conv, pair, it1 = (res[k].seconds for k in ("published-ocfl: 1 conversion", "published-ocfl: 1 pair", "sattler: 1 iteration"))
        res["published-ocfl"] = Result("published-ocfl", [n * c + n_pairs * q for c, q in zip(conv, pair)], extrapolated=True)
        res["sattler"] = Result("sattler", [n * n * s for s in it1], extrapolated=True)

    # ---- print: components first, then the full Γ -----------------------------------------------
    print(f"  components: engine Gram product f32 {fmt(g32_s)}, Γ from the n×n Gram {fmt(norm_s, 'ms')}, "
          f"T {fmt(temp_s, 'ms')};  float32 torch -> float64 numpy {fmt(conv_s)} (once, before scipy-pdist)")
    if extrapolate:
        print(f"              published-ocfl: 1 client's list conversion {fmt(res['published-ocfl: 1 conversion'].median)} "
              f"(x{n}), 1 scipy pair {fmt(res['published-ocfl: 1 pair'].median)} (x{n_pairs});  "
              f"sattler: 1 loop iteration {fmt(res['sattler: 1 iteration'].median)} (x{n * n})  [medians]")
        rec.record(case + " units", [res[k] for k in ("published-ocfl: 1 conversion", "published-ocfl: 1 pair", "sattler: 1 iteration")])
        products = n_pairs * res["published-ocfl: 1 pair"].median
        print(f"  component ratios: pairwise products: published-ocfl's {n_pairs} scipy pairs {fmt(products)} = "
              f"{products / g32_s:,.1f}x the engine's Gram product, scipy-pdist {res['scipy-pdist'].median / g32_s:,.1f}x;  "
              f"float64 conversion: published-ocfl's {n} list conversions {fmt(n * res['published-ocfl: 1 conversion'].median)}"
              f" = {n * res['published-ocfl: 1 conversion'].median / conv_s:,.1f}x one numpy up-cast (the engine needs none)")
    rec.record(case, [conversion])
    rec.record(case + " components", [Result("engine: Gram product f32", [g32_s]), Result("engine: Γ from Gram", [norm_s]),
                                      Result("engine: temperature", [temp_s])])
    order = ["engine-f32", "engine-f64", "torch-normalise", "scipy-pdist", "published-ocfl", "sattler"]
    notes = {"engine-f64": "(the reference of the equivalence checks)",
             "scipy-pdist": f"(float64 array given; from float32 torch updates add {fmt(conv_s)}: "
                            f"{(res['scipy-pdist'].median + conv_s) / res['engine-f32'].median:,.1f}x)"}
    rec.table("  full Γ, seconds", {k: res[k] for k in order}, baseline="engine-f32", case=case, notes=notes,
              baseline_faster=True)
    abl = {"engine-f64 (blocked, default)": res["engine-f64"],
           "engine-f64 without blocking": ablation["engine-f64 without blocking"],
           "engine-f32 (precision: float32)": res["engine-f32"],
           "engine-f32 without the Gram trick": res["torch-normalise"]}
    rec.record(case + " ablation", [ablation["engine-f64 without blocking"]])
    rec.table("  ablation: each optimisation of the engine's Γ switched off (speed-up vs the float64 path the engine records)",
              abl, baseline="engine-f64 (blocked, default)",
              notes={"engine-f64 without blocking": f"(+{n * p * 8 / 2 ** 30:.1f} GiB: one float64 copy; 1 run)",
                     "engine-f32 without the Gram trick": f"(= torch-normalise; +{n * p * 4 / 2 ** 30:.1f} GiB: a normalised copy)"})


# ---------------------------------------------------------------------------------------------
# (b)
# ---------------------------------------------------------------------------------------------
def bench_clusterers(rec: harness.Recorder, sizes: list[int], n_params: int, repeats: int) -> None:
    print(f"\n(b) clustering time per clusterer, P={n_params:,}, three planted clusters (20/47/33 %): Γ + clusterer, "
          f"min / median / max of {repeats} (+1 warm-up) [ARI vs the planted partition]")
    header = f"    {'clusterer':<17}" + "".join(f"{'N=' + str(n):>30}" for n in sizes)
    print(header)
    cells: dict[str, list[str]] = {name: [] for name in ["Γ only", *CLUSTERERS]}
    for n in sizes:
        split = [max(1, round(0.2 * n)), max(1, round(0.47 * n))]
        split.append(n - sum(split))
        deltas = planted_deltas(split, n_params, seed=n, noise=0.5)
        truth = planted_labels(split)
        gamma = cosine_divergence_matrix(deltas).astype("float64")
        variants: dict[str, Callable[[], object]] = {
            "Γ only": lambda deltas=deltas: cosine_divergence_matrix(deltas).astype("float64")}
        for name, params in CLUSTERERS.items():
            # defaults bind this size's clusterer and matrices (the timed calls run before the loop moves on)
            variants[name] = (lambda c=build_clusterer(params), gamma=gamma, deltas=deltas:  # noqa: B008
                              run_clusterer(c, ClusteringInput(gamma, deltas, seed=0, n_true_clusters=3)))
        res = harness.time_side_by_side(variants, repeats if n < 1000 else 1)
        rec.record(f"clusterers N={n} P={n_params}", res)
        g = res["Γ only"]
        cells["Γ only"].append(f"{g.min:.4f}/{g.median:.4f}/{g.max:.4f}       ")
        for name in CLUSTERERS:
            r = res[name]
            ari = adjusted_rand_score(truth, r.output)
            cells[name].append(f"{r.min + g.median:.4f}/{r.median + g.median:.4f}/{r.max + g.median:.4f} [{ari:.2f}]")
    for name, row in cells.items():
        print(f"    {name:<17}" + "".join(f"{c:>30}" for c in row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_common_args(ap, default_repeats=3, quick_repeats=1)
    ap.add_argument("--clients", type=int, default=30, help="N for (a)")
    ap.add_argument("--params", type=int, default=None, help="P for (a) (default: ocfl-cnn's 25.4M; quick 200k)")
    ap.add_argument("--full-reference", action="store_true",
                    help="run published-ocfl and sattler in full instead of extrapolating (minutes at 25M)")
    args = ap.parse_args()
    rec = harness.setup(args, "server_speed")
    shapes = scaled_shapes(args.params or (200_000 if args.quick else 10 ** 12))
    p = sum(int(np.prod(s)) for _, s in shapes)
    extrapolate = not (args.full_reference or args.quick or p <= 1_000_000)
    bench_divergence(rec, args.clients, shapes, args.repeats, args.seed, extrapolate)
    bench_clusterers(rec, [15, 30] if args.quick else [15, 30, 100, 1000], 10_000, args.repeats)


if __name__ == "__main__":
    main()
