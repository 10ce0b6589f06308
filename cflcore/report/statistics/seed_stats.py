"""The report's one summary of a score over seeds: mean, sample std (ddof 1), number of seeds, and for ARI how many
seeds found the groups and how many missed them ("k of n seeds").

Every table, figure and claim cell of the report reads a score over seeds through :func:`summarise` (one statistics
convention: the sample standard deviation, NaN for one seed) and prints it through :meth:`SeedSummary.text`. A mean
± std hides an all-or-nothing score (OCFL on rotation: ARI 1.00 in some seeds, ≤ 0.13 in the others reads 0.49 ±
0.51), so ARI cells add the count of seeds at or above :data:`FOUND_ARI` ("3 of 6 ≥ 0.9"), and a cell with seeds on
both sides (some ≥ :data:`FOUND_ARI`, some ≤ :data:`MISSED_ARI`) is marked :data:`BIMODAL`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

FOUND_ARI = 0.9
"""A seed "finds the groups": its final ARI at or above this (the heterogeneity claims' reading)."""
MISSED_ARI = 0.2
"""A seed "misses the groups": its final ARI at or below this."""
BIMODAL = "bimodal"
"""The mark of a cell whose seeds both find (≥ :data:`FOUND_ARI`) and miss (≤ :data:`MISSED_ARI`) the groups."""
K_OF_N_METRICS = ("ari", "ari_final")
"""The scores shown with "k of n seeds" (final-round ARI and its run summary's name)."""


@dataclass(frozen=True)
class SeedSummary:
    """A score over seeds: mean, sample std (ddof 1; NaN for one seed), seeds, and the seeds at or above
    :data:`FOUND_ARI` (``found``) and at or below :data:`MISSED_ARI` (``missed``)."""

    mean: float
    std: float
    n: int
    found: int = 0
    missed: int = 0

    @property
    def bimodal(self) -> bool:
        """Some seeds find the groups and some miss them: the mean ± std describes neither."""
        return self.found > 0 and self.missed > 0

    def k_of_n(self) -> str:
        """"3 of 6 ≥ 0.9", with the bimodal mark where it applies; "" without seeds."""
        if not self.n:
            return ""
        return f"{self.found} of {self.n} ≥ {FOUND_ARI:g}" + (f"; {BIMODAL}" if self.bimodal else "")

    def text(self, digits: int = 2, k_of_n: bool = False) -> str:
        """"0.96", "0.96 ± 0.01" (the std where defined, i.e. more than one seed), "–" without a finite mean; with
        ``k_of_n`` the count of seeds finding the groups beside it: "0.49 ± 0.51 (3 of 6 ≥ 0.9; bimodal)"."""
        if self.mean is None or not np.isfinite(self.mean):
            return "–"
        out = f"{self.mean:.{digits}f}"
        if self.std is not None and np.isfinite(self.std):
            out += f" ± {self.std:.{digits}f}"
        return out + (f" ({self.k_of_n()})" if k_of_n and self.n else "")


def summarise(values: Iterable[float]) -> SeedSummary:
    """The summary of ``values`` (one per seed; NaNs dropped)."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return SeedSummary(float("nan"), float("nan"), 0)
    return SeedSummary(float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan"), int(v.size),
                       int(np.sum(v >= FOUND_ARI)), int(np.sum(v <= MISSED_ARI)))


def summary_columns(values: Iterable[float], prefix: str, counts: bool = False) -> dict[str, float | int]:
    """The tidy tables' columns of one score: ``<prefix>_mean``, ``_std``, ``_n`` and, with ``counts`` (ARI),
    ``_found`` and ``_missed`` (seeds ≥ :data:`FOUND_ARI`, ≤ :data:`MISSED_ARI`)."""
    s = summarise(values)
    out: dict[str, float | int] = {f"{prefix}_mean": s.mean, f"{prefix}_std": s.std, f"{prefix}_n": s.n}
    if counts:
        out.update({f"{prefix}_found": s.found, f"{prefix}_missed": s.missed})
    return out


def from_columns(row: Mapping[str, Any], prefix: str) -> SeedSummary:
    """The summary stored in a tidy row by :func:`summary_columns` (counts 0 where the row has none)."""
    def number(key: str, default: float) -> float:
        value = row.get(f"{prefix}_{key}", default)
        return default if value is None or pd.isna(value) else float(value)
    return SeedSummary(number("mean", np.nan), number("std", np.nan), int(number("n", 0)), int(number("found", 0)),
                       int(number("missed", 0)))
