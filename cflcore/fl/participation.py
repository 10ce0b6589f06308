"""Who takes part in a round and how much local work each sampled client does (docs/architecture.md §5, "Federations
that move"): the engine's round sample, its clients' availability (``engine.availability``) and its stragglers
(``engine.stragglers``).

Every draw comes from a numpy generator seeded by (root seed, stream, round) and is read at the client's index, so a
client's fate in a round is a function of (seed, round, client) alone: it does not depend on execution order or on
resumption. The Markov chain's state in round r is recomputed from round 0 after a restart (:class:`ClientAvailability`
caches it forward), so no checkpoint holds it.

Availability (after FLGo's simulator, WwZzz/easyFL ``flgo/simulator/default_simulator.py``, whose modes draw each
client's presence per round from a probability):

* ``uniform``: everyone is available every round; the round sample is the one of earlier versions
  (:func:`sample_clients`, the same bytes);
* ``group``: a client of ground-truth group g is available with probability ``group_rates[g]`` (1 where the list is
  empty), and not at all in the rounds of a ``quiet`` window of its group (a whole group goes quiet for a stretch);
* ``label``: a client is available with probability 1 − ``beta`` · s, s the share of its training samples whose label
  is in ``classes`` (clients holding those classes appear less; FLGo's ``YMaxFirst`` is the same idea with
  p = β · min(labels held) / (L − 1) + 1 − β);
* ``markov``: each client is a two-state on/off chain, off → on with ``p_on``, on → off with ``p_off``, started
  from its stationary law; its long-run presence is p_on / (p_on + p_off) (:func:`stationary_share`).

A round whose draw leaves nobody available takes the one client nearest to showing up (the smallest draw over its
probability; a Markov round: the smallest draw): the server waits until someone comes, here for no time. A round in
which no client can come at all (every rate 0 or every group quiet) is refused by validation
(cflcore.config.validate) where the config decides it, and here, in one line, where the data does.

The available clients are then sampled as before: round(participation × clients) of them, at most all.

Stragglers: each sampled client is a straggler with probability ``share``; a straggler does only the first
``min_steps`` + ⌊v · (τ − min_steps)⌋ of its τ local steps (v uniform in [0, 1)), so between ``min_steps`` and τ − 1;
a client with no more than ``min_steps`` steps does them all. Its first steps are the steps it would have made (the
same batches and dropout masks, cflcore.fl.streams), it stops early.

The strategies see what a real server sees: the clients that trained, their updates and their step losses (as many
as the steps they made); never who was available or why.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..settings import AvailabilitySettings, StragglerSettings

_STREAM_SAMPLE = 0x5A  # the round sample (its value of earlier versions)
_STREAM_AVAILABLE, _STREAM_STRAGGLE = 0xA7, 0x57
MODES = ("uniform", "group", "label", "markov")


def sample_clients(seed: int, rnd: int, n_clients: int, participation: float) -> np.ndarray:
    """Sorted ids of the clients taking part in round ``rnd`` when everyone is available: depends only on (seed,
    round)."""
    if participation >= 1.0:
        return np.arange(n_clients)
    m = max(1, int(round(participation * n_clients)))
    rng = np.random.default_rng([seed, _STREAM_SAMPLE, rnd])
    return np.sort(rng.choice(n_clients, size=m, replace=False))


def sample_available(seed: int, rnd: int, present: np.ndarray, participation: float) -> np.ndarray:
    """Sorted ids of the clients taking part in round ``rnd`` among the ``present`` ones (a boolean mask): the
    number :func:`sample_clients` takes, at most all of them, drawn by (seed, round)."""
    available = np.flatnonzero(present)
    n = len(present)
    m = n if participation >= 1.0 else max(1, int(round(participation * n)))
    if m >= len(available):
        return available
    rng = np.random.default_rng([seed, _STREAM_SAMPLE, rnd])
    return np.sort(rng.choice(available, size=m, replace=False))


def round_draws(seed: int, stream: int, rnd: int, n_clients: int, width: int = 1) -> np.ndarray:
    """(n_clients, width) uniform [0, 1) numbers of one round; row i is client i's."""
    return np.random.default_rng([seed, stream, rnd]).random((n_clients, width))


def stationary_share(p_on: float, p_off: float) -> float:
    """The long-run share of rounds a two-state on/off chain is on: p_on / (p_on + p_off)."""
    return p_on / (p_on + p_off)


def quiet_rounds(quiet: Sequence) -> list[tuple[int, int, int]]:
    """``quiet`` windows as (group, first round, last round), inclusive."""
    return [(int(w["group"]), int(w["rounds"][0]), int(w["rounds"][1])) for w in quiet]


class ClientAvailability:
    """Which clients are available in a round (``engine.availability``): :meth:`present`. ``groups``: each client's
    ground-truth group (the split's clusters); ``label_share``: each client's share of training samples whose label is
    in ``classes`` (mode ``label``); the simulation's facts, never a strategy's."""

    def __init__(self, settings: AvailabilitySettings, seed: int, groups: np.ndarray, label_share: np.ndarray | None = None):
        self.settings, self.seed = settings, int(seed)
        self.groups = np.asarray(groups, dtype=np.int64)
        self.n = len(self.groups)
        mode = settings.mode
        self.quiet = quiet_rounds(settings.quiet) if mode == "group" else []  # the group mode's windows only
        if mode not in MODES:
            raise ConfigError(f"engine.availability.mode: {mode!r} is not allowed; allowed: {', '.join(MODES)}")
        if mode == "group":
            n_groups = int(self.groups.max(initial=0)) + 1
            rates = tuple(settings.group_rates) or (1.0,) * n_groups
            check_groups(len(rates), [g for g, _, _ in self.quiet], n_groups, "of this split")
            self.rates = np.asarray([rates[g] for g in self.groups], dtype=np.float64)
        elif mode == "label":
            self.rates = 1.0 - float(settings.beta) * np.asarray(label_share, dtype=np.float64)
        else:
            self.rates = np.ones(self.n)
        self._chain: tuple[int, np.ndarray] | None = None  # markov: (round, states), cached forward

    @property
    def uniform(self) -> bool:
        return self.settings.mode == "uniform"

    def quiet_in(self, rnd: int) -> np.ndarray:
        """The clients whose group is quiet in round ``rnd``."""
        out = np.zeros(self.n, dtype=bool)
        for g, first, last in self.quiet:
            if first <= rnd <= last:
                out |= self.groups == g
        return out

    def chain(self, rnd: int) -> np.ndarray:
        """The Markov chains' on/off states in round ``rnd`` (round 0: from the stationary law)."""
        s = self.settings
        if self._chain is None or self._chain[0] > rnd:
            self._chain = (0, round_draws(self.seed, _STREAM_AVAILABLE, 0, self.n)[:, 0]
                           < stationary_share(s.p_on, s.p_off))
        t, on = self._chain
        while t < rnd:
            t += 1
            u = round_draws(self.seed, _STREAM_AVAILABLE, t, self.n)[:, 0]
            on = np.where(on, u >= s.p_off, u < s.p_on)
        self._chain = (t, on)
        return on

    def present(self, rnd: int) -> np.ndarray:
        """The boolean mask of the clients available in round ``rnd`` (at least one: the module's docstring)."""
        if self.uniform:
            return np.ones(self.n, dtype=bool)
        u = round_draws(self.seed, _STREAM_AVAILABLE, rnd, self.n)[:, 0]
        if self.settings.mode == "markov":
            on, rates = self.chain(rnd), np.ones(self.n)
        else:
            rates = np.where(self.quiet_in(rnd), 0.0, self.rates)
            on = u < rates
        if not on.any():
            can = rates > 0
            if not can.any():
                raise ConfigError(f"engine.availability: round {rnd} leaves no client available (mode "
                                  f"{self.settings.mode}); allowed: rates, classes and quiet windows that leave a "
                                  f"client a chance in every round")
            on[np.argmin(np.where(can, u / np.where(can, rates, 1.0), np.inf))] = True
        return on


def straggler_steps(settings: StragglerSettings, seed: int, rnd: int, n_clients: int, sampled: np.ndarray,
                    full: Sequence[int]) -> list[int] | None:
    """The local steps each sampled client makes in round ``rnd`` (``full``: its τ), or None without stragglers."""
    if settings.share is None:
        return None
    draws = round_draws(seed, _STREAM_STRAGGLE, rnd, n_clients, 2)
    m = int(settings.min_steps)
    steps = []
    for c, tau in zip(sampled, full):
        u, v = draws[int(c)]
        steps.append(int(tau) if u >= settings.share or tau <= m else m + int(v * (int(tau) - m)))
    return steps


def check_groups(n_rates: int, quiet_groups: Sequence[int], n_groups: int, where: str) -> None:
    """``group_rates`` gives one rate per group (or none) and ``quiet`` names only groups there are (one-line error)."""
    if n_rates not in (0, n_groups):
        raise ConfigError(f"engine.availability.group_rates: {n_rates} rates for the {n_groups} groups {where}; "
                          f"allowed: [] or {n_groups} rates in [0, 1]")
    bad = [g for g in quiet_groups if g >= n_groups]
    if bad:
        raise ConfigError(f"engine.availability.quiet: group {bad[0]} is not a group {where}; allowed: 0..{n_groups - 1}")


def local_steps(n_train: int, batch_size: int, local_epochs: int) -> int:
    """τ, a client's local steps in a round: E · ⌈n / B⌉."""
    return int(local_epochs) * -(-int(n_train) // int(batch_size))
