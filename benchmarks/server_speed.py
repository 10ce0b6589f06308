"""Server-side speed of the clustering strategies (script, not a test).

(a) OCFL's divergence matrix + temperature at N = 30 clients for the ocfl-cnn parameter count (25M,
    float32): one Gram matrix product (cflcore.clustering.divergence) vs the published approach
    (each delta converted to a float64 Python list, then scipy.spatial.distance.cosine in a pairwise
    double loop). The reference is far too slow and memory-hungry to run in full (30 lists of 25M Python
    floats ≈ 24 GB), so it converts ONE delta and computes a few pairs, and extrapolates linearly to
    N conversions + N(N−1)/2 pairs (upper triangle; a full N² loop would be 2× slower still).
(b) Clustering time per clusterer at N = 15, 30, 100, 1000 on planted three-centre deltas with the
    tinyvgg parameter count (~10k): Γ + clusterer, median of repeats, with the ARI as a sanity check.

Usage: OMP_NUM_THREADS=1 python benchmarks/server_speed.py [--quick]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import torch
from scipy.spatial.distance import cosine as scipy_cosine
from sklearn.metrics import adjusted_rand_score

from cflcore.clustering.clusterers import ClusteringInput, build_clusterer, run_clusterer
from cflcore.clustering.divergence import cosine_divergence_matrix, temperature

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the planted-partition test helper
from synthetic_clusters import planted_deltas, planted_labels  # noqa: E402

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


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench_divergence(n: int, n_params: int, repeats: int, ref_pairs: int) -> None:
    gen = torch.Generator().manual_seed(0)
    deltas = torch.randn(n, n_params, generator=gen)
    ours, temp = timed(lambda: temperature(cosine_divergence_matrix(deltas, "float32")), repeats)
    ours64, temp64 = timed(lambda: temperature(cosine_divergence_matrix(deltas, "float64")), max(1, repeats - 1))

    # published approach, measured on a subset and extrapolated
    t0 = time.perf_counter()
    row_a = deltas[0].double().tolist()
    convert_one = time.perf_counter() - t0
    row_b = deltas[1].double().tolist()
    pair_times = []
    for _ in range(ref_pairs):
        t0 = time.perf_counter()
        scipy_cosine(row_a, row_b)
        pair_times.append(time.perf_counter() - t0)
    pair = statistics.median(pair_times)
    n_pairs = n * (n - 1) // 2
    reference = n * convert_one + n_pairs * pair
    del row_a, row_b
    gc.collect()
    print(f"(a) divergence + temperature, N={n}, P={n_params:,} float32 (T = {temp:.6f}; float64 T = {temp64:.6f})")
    print(f"    ours float32 (one Gram matmul): {ours:8.3f} s   (median of {repeats})")
    print(f"    ours float64 (chunked Gram):    {ours64:8.3f} s")
    print(f"    published (lists + scipy loop): {reference:8.1f} s   EXTRAPOLATED from 1 list conversion "
          f"({convert_one:.2f} s) × {n} + median of {ref_pairs} scipy pairs ({pair:.2f} s) × {n_pairs} pairs")
    print(f"    speed-up float32: {reference / ours:,.0f}×   float64: {reference / ours64:,.0f}×   (target >= 50×)")


def bench_clusterers(sizes: list[int], n_params: int, repeats: int) -> None:
    print(f"(b) clustering time per clusterer, P={n_params:,}, three planted clusters (20/47/33 %), "
          f"seconds (median of {repeats}) [ARI]")
    header = f"    {'clusterer':<17}" + "".join(f"{'N=' + str(n):>18}" for n in sizes)
    print(header)
    inputs = {}
    gamma_times = {}
    for n in sizes:
        split = [max(1, round(0.2 * n)), max(1, round(0.47 * n))]
        split.append(n - sum(split))
        deltas = planted_deltas(split, n_params, seed=n, noise=0.5)
        t, gamma = timed(lambda: cosine_divergence_matrix(deltas).astype("float64"), repeats)
        gamma_times[n] = t
        inputs[n] = (deltas, gamma, planted_labels(split))
    print(f"    {'Γ only':<17}" + "".join(f"{gamma_times[n]:>18.4f}" for n in sizes))
    for name, params in CLUSTERERS.items():
        cells = []
        for n in sizes:
            deltas, gamma, truth = inputs[n]
            clusterer = build_clusterer(params)
            data = ClusteringInput(gamma, deltas, seed=0, n_true_clusters=3)
            t, labels = timed(lambda: run_clusterer(clusterer, data), repeats if n < 1000 else 1)
            cells.append(f"{t + gamma_times[n]:>10.4f} [{adjusted_rand_score(truth, labels):.2f}]")
        print(f"    {name:<17}" + "".join(f"{c:>18}" for c in cells), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2.5M parameters for (a), N up to 100 for (b)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    if args.quick:
        bench_divergence(30, 2_500_000, repeats=3, ref_pairs=3)
        bench_clusterers([15, 30, 100], 10_000, repeats=3)
    else:
        bench_divergence(30, 25_000_000, repeats=3, ref_pairs=3)
        bench_clusterers([15, 30, 100, 1000], 10_000, repeats=3)


if __name__ == "__main__":
    main()
