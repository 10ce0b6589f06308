"""The decision rules' power and error rates on this project's shape of data (issue 67): a level claim "ARI ≥ 0.9"
on a bounded, bimodal score (a seed at 1.00 with probability p, else at 0.45), read by the current rule as "in at
least 80 % of seeds" (the exact binomial test) and by the rule of 86306b5 as "mean ARI ≥ 0.9" (the t-test floored at
the printed digit). Writes docs/figures/verdict_power.png: the share of 20,000 tables read "holds" and
"contradicted" against the true share p of seeds at 1.00, for n = 3, 6, 10, 18, 30 seeds.

The vertical lines: p = 0.8, the share rule's boundary (left of it "holds" is wrong, right of it "contradicted" is);
p = 0.818, where the true mean (p + 0.45 (1 − p)) is 0.9, the mean rule's boundary. The dotted line is 2.5 %.

    PYTHONPATH=. python benchmarks/verdict_power.py [--out docs/figures/verdict_power.png]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cflcore.report.statistics import calibration as cal  # noqa: E402
from cflcore.report.statistics import rules  # noqa: E402

NS = (3, 6, 10, 18, 30)
SHARES = np.round(np.arange(0.5, 1.0001, 0.025), 3)
MISS = 0.45
REPS = 20_000


def curves(rule: str) -> dict[int, np.ndarray]:
    """n -> (len(SHARES), 2) rates of "holds" and "contradicted" under ``rule``."""
    return {n: np.array([cal.level_rates(rule, n, float(p), MISS, reps=REPS, seed=n) for p in SHARES]) for n in NS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures/verdict_power.png")
    args = parser.parse_args()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    boundary_mean = (0.9 - MISS) / (1 - MISS)
    for ax, rule, title in ((axes[0], rules.CURRENT, "share rule: ARI ≥ 0.9 in ≥ 80 % of seeds (exact binomial)"),
                            (axes[1], rules.DIGIT_FLOOR, "earlier rule: mean ARI ≥ 0.9 (t, se ≥ 0.001)")):
        colours = plt.cm.viridis(np.linspace(0, 0.9, len(NS)))
        for colour, (n, rates) in zip(colours, curves(rule).items()):
            ax.plot(SHARES, rates[:, 0], "-", color=colour, label=f"n = {n}: holds")
            ax.plot(SHARES, rates[:, 1], "--", color=colour, label=f"n = {n}: contradicted")
        ax.axvline(0.8, color="grey", lw=0.8)
        ax.axvline(boundary_mean, color="grey", lw=0.8, ls="-.")
        ax.axhline(0.025, color="black", lw=0.8, ls=":")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(f"true share of seeds at ARI 1.00 (misses at {MISS})")
    axes[0].set_ylabel(f"share of {REPS:,} tables")
    axes[1].legend(fontsize=7, ncol=2, loc="center left")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    for rule in (rules.CURRENT, rules.DIGIT_FLOOR):
        rates = curves(rule)
        for p in (0.7, 0.8, 0.9, 1.0):
            i = int(np.argmin(np.abs(SHARES - p)))
            print(f"{rule[:20]:20s} p {p:.2f}: " + "  ".join(f"n {n}: holds {r[i, 0]:.3f} contra {r[i, 1]:.3f}"
                                                              for n, r in rates.items()))


if __name__ == "__main__":
    main()
