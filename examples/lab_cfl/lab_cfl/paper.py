"""The lab's paper check, ``lab``: its one claim, that its method finds the groups of its class-block split (final
ARI at least 0.9 in every seed) where FedAvg, one cluster, cannot."""
from __future__ import annotations

from cflcore.report.papers.base import ClaimData, ClaimResult, Paper, claim, fmt, register_paper, result, select

PAPER = "lab"
FOUND = 0.9


@claim(PAPER, "lab-finds-blocks")
def lab_finds_blocks(data: ClaimData) -> ClaimResult:
    runs = select(data.runs, "lab-kmeans")
    if runs.empty or "ari" not in runs:
        return result("lab-finds-blocks", PAPER, "Lab §1", "lab-kmeans finds the class blocks", "no lab-kmeans run", None)
    found = int((runs["ari"] >= FOUND).sum())
    return result("lab-finds-blocks", PAPER, "Lab §1", f"lab-kmeans finds the class blocks (ARI ≥ {FOUND}) in every seed",
                  f"ARI ≥ {FOUND} in {found} of {len(runs)} runs (mean {fmt(float(runs['ari'].mean()))})",
                  found == len(runs))


@register_paper("lab")
class LabPaper(Paper):
    """The lab's own check: one claim, no tables of its own."""

    title = "The lab's one-shot k-means (example package lab-cfl)"
