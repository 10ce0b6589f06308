"""The re-clustering lag of a drift schedule's switch (issue 69; cflcore.data.drift): how many rounds after a switch
the partition needs to score again the ARI it had before it, each round scored against that round's ground truth.

A switch spans rounds ``first..last`` (a sudden switch: one round; a gradual one: its window). Its pre-switch ARI is
the ARI of the partition after round ``first - 1``. The lag is ``t - last`` for the first round ``t >= last`` (before
``stop``, the next switch's first round, or the run's end) whose ARI reaches it (within ``tolerance``): 0 when the
partition the switch's last round ends with already scores it; None ("never") when no round before ``stop`` does.
Rounds are 0-based, as in history.parquet.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .external import adjusted_rand


def _defined(v: float | None) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def reclustering_lag(ari_by_round: Sequence[float | None], first: int, last: int, stop: int | None = None,
                     tolerance: float = 0.0) -> int | None:
    """The lag (module doc) of a switch over rounds ``first..last`` from the ARI of every round (index = round;
    None or NaN where undefined, never a recovery). None: never, or no pre-switch ARI (``first`` 0 or undefined)."""
    if not 1 <= first <= last:
        raise ValueError(f"switch rounds {first}..{last}: need 1 <= first <= last")
    stop = len(ari_by_round) if stop is None else min(int(stop), len(ari_by_round))
    if first - 1 >= len(ari_by_round) or not _defined(ari_by_round[first - 1]):
        return None
    before = float(ari_by_round[first - 1])  # type: ignore[arg-type]
    for t in range(last, stop):
        value = ari_by_round[t]
        if _defined(value) and float(value) >= before - tolerance:  # type: ignore[arg-type]
            return t - last
    return None


def partition_lag(partitions: Sequence[Sequence[int]], truths: Sequence[Sequence[int]], first: int, last: int,
                  stop: int | None = None, tolerance: float = 0.0) -> int | None:
    """:func:`reclustering_lag` of a sequence of partitions (one label vector per round), each scored (ARI) against
    its round's ground truth."""
    if len(partitions) != len(truths):
        raise ValueError(f"{len(partitions)} partitions but {len(truths)} ground truths; need one per round")
    aris = [adjusted_rand(np.asarray(t), np.asarray(p)) for p, t in zip(partitions, truths)]
    return reclustering_lag(aris, first, last, stop, tolerance)
