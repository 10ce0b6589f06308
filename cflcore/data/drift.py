"""Drift over rounds (docs/architecture.md §7, "Drift"): a grouped split's ``drift`` schedule moves clients between
its ground-truth groups at given rounds, after ANDA / Flux (arXiv 2511.22305), Fielding (arXiv 2411.01580) and
microsoft/FedDrift, which study groups that drift over rounds.

Each event of the schedule moves a ``share`` of the clients (of ``from_group``, or of all groups) to ``to_group`` (or
to another group drawn for each client):

* ``sudden``: they all switch at ``round``;
* ``gradual``: they switch one after another over ``window`` rounds from ``round`` (client i of m at
  ``round + floor(i · window / m)``, in the order they were drawn);
* ``recurrent``: they switch at ``round`` and return to their group at ``until``.

The split realises the schedule once, from its own stream (``[seed, the split's key, DRIFT_STREAM]``: the clients'
samples are drawn as without a schedule), into ``changes``: rows ``[round, client, group]``, the round from which the
client belongs to the group. With ``cluster_of_client`` (the groups at round 0) they are the per-round ground truth
(:func:`groups_at_round`). A client's data at round t is its own samples under the transform of its group at t
(cflcore.data.federated.FederatedData.at_round). Rounds are 0-based, as in history.parquet; an event starts at
round 1 or later, so every switch has a pre-switch partition to be scored against (the re-clustering lag,
cflcore.metrics.drift).

Two kinds of group take a schedule (the generator's ``drift_draws``, cflcore.data.splits.base.SplitGenerator):

* a *transform* of a client's own samples (``rotation``, ``label-swap``, ``feature-skew``): the manifest records each
  group's transform (``group_transforms``), and a client in group g holds its own train and test samples under g's;
* a *class distribution* (label skew: ``majority``, ``ocfl``, ``dirichlet-mix``): a client in another group than its
  own holds a sample of that group's class distribution, drawn at split time. For every pair (client, group) that
  the ``changes`` bring together, the group not the client's own, in (client, group) order, after the schedule from
  the same stream: the generator gives the class vector of a client of the group (``drift_plan``: ``ocfl`` the
  group's vector, ``majority`` a majority class drawn uniformly among the group's classes, ``dirichlet-mix`` a
  vector ~ Dir(α_g)), and as many distinct train images as the client held (train and test part together) are drawn
  by it, then split by ``local_test_fraction`` as the split splits (so its train and test sizes are the client's, and
  its test set follows its group, as a transform's does). With ``replace: true`` the class counts are the split's
  sampler's (a multinomial by the class vector, 000 §4.1) and the images may be held by other clients (distinct
  within the client, so the size is the client's exactly: the split's with-replacement draws would lose its
  duplicates); with ``replace: false`` they are the split's disjoint sampler's (largest remainder), taken from the
  images the clients' own draws and the earlier pairs' left (cflcore.data.splits.build.DisjointDraws), so no image is
  in two samples, and no client shares one with another at any round. Too few images is refused in one line naming
  the field: before any job where the train part cannot hold the clients' draws and the first event's movers'
  (:func:`fewest_drawn_pairs`, cflcore.config_checks), and exactly, per class, by the split job. The
  manifest's ``drift.samples`` holds each pair's images (``train_idx``, ``test_idx``), class vector and label
  histograms; a client keeps one sample per group (a recurrent event brings it back to its own samples, a second
  visit to a group to the same draw). The clients' own samples and the ``changes`` are those of the split without
  the drawing, so a static split, and every client that does not move, keeps its bytes.

No torch here: the split job realises the schedule.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError

DRIFT_KEY = "drift"
"""The split parameter that holds the schedule; left out of the split streams' key (the samples do not depend on it)
and out of the manifest's ``params`` (the manifest's ``drift`` holds it)."""
DRIFT_KINDS = ("sudden", "gradual", "recurrent")
DRIFT_STREAM = 0xD1F7
"""The schedule's stream: ``SeedSequence([seed, key, DRIFT_STREAM])`` (cflcore.data.splits.build)."""

EVENT_DEFAULTS: dict[str, Any] = {"from_group": None, "to_group": None, "window": 1, "until": None}

DRIFT_PARAM: dict[str, Any] = {
    "type": ["array", "null"], "minItems": 1, "default": None,
    "description": "clients that move between groups at given rounds (null: none, a static split): a list of "
                   "events {kind: sudden | gradual | recurrent, round (>= 1, 0-based), share in (0, 1] of the "
                   "clients of from_group (null: of all groups), to_group (null: another group drawn per client), "
                   "window (gradual: the rounds they switch over), until (recurrent: the round they return)}",
    "items": {
        "type": "object", "additionalProperties": False, "required": ["kind", "round", "share"],
        "properties": {
            "kind": {"enum": list(DRIFT_KINDS)},
            "round": {"type": "integer", "minimum": 1},
            "share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "from_group": {"type": ["integer", "null"], "minimum": 0},
            "to_group": {"type": ["integer", "null"], "minimum": 0},
            "window": {"type": "integer", "minimum": 1},
            "until": {"type": ["integer", "null"], "minimum": 2},
        },
    },
}
"""The schema of a ``drift`` parameter (its events' fields, bounds and kinds)."""


def drift_events(schedule: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The schedule's events with their defaults filled (key order: kind, round, share, then the defaults')."""
    return [{"kind": e["kind"], "round": int(e["round"]), "share": float(e["share"]),
             **{k: e.get(k, v) for k, v in EVENT_DEFAULTS.items()}} for e in schedule or ()]


def event_last_round(event: Mapping[str, Any]) -> int:
    """The last round in which the event changes a client's group."""
    if event["kind"] == "gradual":
        return int(event["round"]) + int(event.get("window") or 1) - 1
    if event["kind"] == "recurrent":
        return int(event["until"])
    return int(event["round"])


def switch_spans(schedule: Sequence[Mapping[str, Any]] | None) -> list[tuple[int, int]]:
    """``(first, last)`` rounds of every switch of the schedule, in round order: a sudden event's round, a gradual
    event's window, a recurrent event's way out and its way back (two switches)."""
    spans = []
    for e in drift_events(schedule):
        if e["kind"] == "recurrent":
            spans += [(e["round"], e["round"]), (int(e["until"]), int(e["until"]))]
        else:
            spans.append((e["round"], event_last_round(e)))
    return spans


def check_schedule(schedule: Sequence[Mapping[str, Any]] | None, n_groups: int, field: str) -> None:
    """What the schema cannot say: groups the split has, fields that belong to the event's kind, events in round order
    that do not overlap (one line naming the field and what is allowed)."""
    events = drift_events(schedule)
    if events and n_groups < 2:
        raise ConfigError(f"{field}: a split with {n_groups} group has no group to move to; allowed: null, or a split "
                          "with 2 or more groups")
    previous_end = 0
    for i, (given, e) in enumerate(zip(schedule or (), events)):
        where = f"{field}[{i}]"
        for key in ("from_group", "to_group"):
            if e[key] is not None and not 0 <= int(e[key]) < n_groups:
                raise ConfigError(f"{where}.{key}: group {e[key]} is not a group of the split ({n_groups} groups); "
                                  f"allowed: 0..{n_groups - 1} or null")
        if e["from_group"] is not None and e["from_group"] == e["to_group"]:
            raise ConfigError(f"{where}.to_group: {e['to_group']} is its from_group; allowed: another group or null")
        if "window" in given and e["kind"] != "gradual":
            raise ConfigError(f"{where}.window: only a gradual event has one; allowed: kind gradual, or no window")
        if e["kind"] == "recurrent":
            if e["until"] is None or int(e["until"]) <= e["round"]:
                raise ConfigError(f"{where}.until: {e['until']!r}; allowed: a recurrent event's return round, after "
                                  f"its round {e['round']}")
        elif e["until"] is not None:
            raise ConfigError(f"{where}.until: only a recurrent event has one; allowed: kind recurrent, or no until")
        if e["round"] <= previous_end and i > 0:
            raise ConfigError(f"{where}.round: {e['round']} is not after the previous event's last round "
                              f"{previous_end}; allowed: events in round order that do not overlap, from round "
                              f"{previous_end + 1}")
        previous_end = event_last_round(e)


def check_schedule_rounds(schedule: Sequence[Mapping[str, Any]] | None, n_rounds: int, field: str,
                          rounds_field: str) -> None:
    """Every round the schedule names is a round of a run of ``n_rounds`` rounds (0-based: 1..n_rounds - 1)."""
    for i, e in enumerate(drift_events(schedule)):
        last = event_last_round(e)
        if last > n_rounds - 1:
            key = {"gradual": "window", "recurrent": "until"}.get(e["kind"], "round") if last != e["round"] else "round"
            raise ConfigError(f"{field}[{i}].{key}: the event reaches round {last}, beyond the run ({rounds_field}: "
                              f"{n_rounds}, rounds 0..{n_rounds - 1}); allowed: rounds 1..{n_rounds - 1}")


def _half_up(x: float) -> int:
    return int(np.floor(x + 0.5))


def realise_schedule(schedule: Sequence[Mapping[str, Any]] | None, cluster_of_client: Sequence[int], n_groups: int,
                     rng: np.random.Generator, field: str = "split.drift") -> list[list[int]]:
    """``changes``: ``[round, client, group]`` rows (module doc), sorted by round and client. Each event draws its
    clients without replacement among those in ``from_group`` (or all) at its round and not already in ``to_group``:
    ``max(1, round(share · eligible))`` of them; a target drawn uniformly among the other groups where ``to_group``
    is null."""
    current = np.asarray(cluster_of_client, dtype=np.int64).copy()
    changes: list[list[int]] = []
    for i, e in enumerate(drift_events(schedule)):
        eligible = np.arange(current.size)
        if e["from_group"] is not None:
            eligible = eligible[current[eligible] == int(e["from_group"])]
        if e["to_group"] is not None:
            eligible = eligible[current[eligible] != int(e["to_group"])]
        if eligible.size == 0:
            raise ConfigError(f"{field}[{i}].from_group: no client can move at round {e['round']} (group "
                              f"{e['from_group']} has none left); allowed: a group with clients at that round")
        m = max(1, _half_up(e["share"] * eligible.size))
        movers = rng.choice(eligible, size=m, replace=False)
        for j, client in enumerate(movers):
            home = int(current[client])
            if e["to_group"] is not None:
                target = int(e["to_group"])
            else:
                others = [g for g in range(n_groups) if g != home]
                target = int(others[int(rng.integers(len(others)))])
            if e["kind"] == "gradual":
                at = e["round"] + (j * int(e["window"])) // m
            else:
                at = e["round"]
            changes.append([int(at), int(client), target])
            if e["kind"] == "recurrent":
                changes.append([int(e["until"]), int(client), home])
            else:
                current[client] = target
    return sorted(changes)


def groups_at_round(cluster_of_client: Sequence[int], changes: Sequence[Sequence[int]], rnd: int) -> np.ndarray:
    """The ground-truth group of every client in round ``rnd``: ``cluster_of_client`` with every change of a round
    <= ``rnd`` applied in order."""
    groups = np.asarray(cluster_of_client, dtype=np.int64).copy()
    for at, client, group in sorted(changes):
        if at <= rnd:
            groups[int(client)] = int(group)
    return groups


def drawn_pairs(changes: Sequence[Sequence[int]], home: Sequence[int]) -> list[tuple[int, int]]:
    """The (client, group) pairs the ``changes`` bring together, the group not the client's own, in (client, group)
    order: the samples a class-distribution split draws for its schedule (module doc)."""
    return sorted({(int(c), int(g)) for _, c, g in changes if int(g) != int(home[int(c)])})


def fewest_drawn_pairs(schedule: Sequence[Mapping[str, Any]] | None, group_sizes: Sequence[int] | None,
                       n_clients: int) -> int:
    """The fewest pairs :func:`drawn_pairs` can give, known before the schedule is realised: the first event's
    movers (:func:`realise_schedule`: ``max(1, round(share · eligible))``), each a client in a group not its own;
    later events may bring a client back home or to a group it has seen. ``group_sizes`` (None where the dataset
    decides them) give the first event's eligible clients of a ``from_group`` / ``to_group``; without them, 1."""
    events = drift_events(schedule)
    if not events:
        return 0
    e = events[0]
    if e["from_group"] is not None:
        eligible = None if group_sizes is None else int(group_sizes[int(e["from_group"])])
    elif e["to_group"] is not None:
        eligible = None if group_sizes is None else n_clients - int(group_sizes[int(e["to_group"])])
    else:
        eligible = n_clients
    return 1 if eligible is None else max(1, _half_up(e["share"] * eligible))


def manifest_changes(manifest: Mapping[str, Any]) -> list[list[int]]:
    """The split's ``changes`` (manifest ``drift``), [] for a static split."""
    drift = manifest.get(DRIFT_KEY)
    return [list(map(int, c)) for c in drift["changes"]] if drift else []
