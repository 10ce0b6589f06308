"""Late-joining clients (000 §6.2): where they were attached, and how well they do afterwards.

Reads a finished run's ``server.parquet`` (the strategy's ``late_clients`` / ``late_joined`` diagnostics,
cflcore/strategies/ocfl.py) and ``history.parquet``, and the split manifest's ground truth (which the
strategy never sees). Writes ``results/eval/{scenario}/{algorithm}/late_clients.parquet`` with a ``kind``
column:

``client`` rows (one per client): ``client``, ``role`` (``late`` / ``founding``), ``true_cluster``,
``assigned_cluster`` (its cluster in the last round), ``join_round`` (0-based round in which a late client
joined; null for founding clients and for late clients that never joined, i.e. OCFL never clustered),
``attached_to_true`` (late clients: its assigned cluster is the one the founding members of its true
cluster are in, by majority; false when it never joined), ``true_cluster_founded`` (whether its true
cluster had at least one founding member: a uniform, truth-blind draw of late clients can leave a true
cluster with none, and its late clients then cannot be attached correctly), and ``pf1`` / ``gf1`` /
``n_evaluations``: the client's mean local / orchestrator F1 over the evaluated rounds from the run's
``join_round`` on (the same window for founding clients, so late and founding PF1 compare like with like;
all rounds when nobody joined), and ``pf1_final`` (the last evaluated round).

``round`` rows (one per round and role): ``round``, ``role``, ``pf1`` / ``gf1`` (means over that role's
clients evaluated that round) and ``n_evaluations``. A late client is not in the federation before it joins:
the engine records null metrics for it (``absent_clients``), so those rounds never enter any PF1 mean here
nor in personalisation.parquet.

Attachment accuracy of a run = mean ``attached_to_true`` over its late clients (:func:`late_summary`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import filenames as fn
from ..errors import DataError
from ..io import read_parquet, write_parquet
from .clustering import GroundTruth, load_ground_truth, read_history, recorded_failure, typed_frame

LATE_COLUMNS = ["kind", "round", "client", "role", "true_cluster", "assigned_cluster", "join_round",
                "attached_to_true", "true_cluster_founded", "pf1", "gf1", "pf1_final", "n_evaluations"]
_LATE_DTYPES = {"kind": "string", "role": "string",
                **dict.fromkeys(("round", "client", "true_cluster", "assigned_cluster", "join_round", "n_evaluations"),
                                "Int64"),
                **dict.fromkeys(("attached_to_true", "true_cluster_founded"), "boolean")}


@dataclass(frozen=True)
class LateSchedule:
    """What the strategy recorded: the late clients, and per joined client its round and cluster."""

    late: np.ndarray  # sorted global ids
    join_round: dict[int, int]
    assigned: dict[int, int]

    @property
    def first_join(self) -> int | None:
        return min(self.join_round.values()) if self.join_round else None


def _json_cells(server: pd.DataFrame, column: str) -> list[tuple[int, Any]]:
    """(round, decoded value) of the non-null cells of a JSON diagnostics column, in round order."""
    if column not in server.columns:
        return []
    rows = server[["round", column]].dropna().sort_values("round")
    return [(int(r), json.loads(v) if isinstance(v, str) else v) for r, v in zip(rows["round"], rows[column])]


def late_schedule(server: pd.DataFrame) -> LateSchedule:
    """The late clients and their joining from server.parquet's ``late_clients`` / ``late_joined`` columns."""
    declared = _json_cells(server, "late_clients")
    late = np.asarray(sorted(int(c) for c in declared[0][1]) if declared else [], dtype=np.int64)
    join_round, assigned = {}, {}
    for rnd, joined in _json_cells(server, "late_joined"):
        for client, cluster in joined.items():
            join_round[int(client)], assigned[int(client)] = rnd, int(cluster)
    unknown = sorted(set(join_round) - set(late.tolist()))
    if unknown:
        raise DataError(f"server.parquet: clients {unknown} joined but are not in late_clients {late.tolist()}")
    return LateSchedule(late, join_round, assigned)


def majority_true_cluster(labels: np.ndarray, truth: np.ndarray, among: np.ndarray) -> dict[int, int]:
    """Found cluster -> the true cluster most of its ``among`` members belong to (ties: the smallest id)."""
    out = {}
    for cluster in np.unique(labels[among]):
        members = among[labels[among] == cluster]
        values, counts = np.unique(truth[members], return_counts=True)
        out[int(cluster)] = int(values[np.argmax(counts)])
    return out


def _mean(values: pd.Series) -> float:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return float(v.mean()) if len(v) else float("nan")


def client_rows(history: pd.DataFrame, truth: GroundTruth, schedule: LateSchedule) -> list[dict[str, Any]]:
    """One ``client`` row per client (module doc)."""
    n = truth.n_clients
    last_round = int(history["round"].max())
    final = history[history["round"] == last_round].sort_values("client")["cluster"].to_numpy(dtype=np.int64)
    if final.size != n:
        raise DataError(f"history: {final.size} clients in round {last_round}, the manifest has {n}")
    is_late = np.isin(np.arange(n), schedule.late)
    founding = np.flatnonzero(~is_late)
    true_final = truth.clusters_at(last_round)  # the last round's groups (a drift schedule's, cflcore.data.drift)
    owner = majority_true_cluster(final, true_final, founding)
    founded = set(true_final[founding].tolist())
    window = schedule.first_join if schedule.first_join is not None else 0
    rows = []
    for client in range(n):
        mine = history[history["client"] == client].sort_values("round")
        evaluated = mine[pd.to_numeric(mine["local_f1"], errors="coerce").notna()]
        joined = client in schedule.join_round
        start = schedule.join_round.get(client, window) if is_late[client] else window
        scored = evaluated[evaluated["round"] >= start]
        true = int(true_final[client])
        rows.append({
            "kind": "client", "round": None, "client": client, "role": "late" if is_late[client] else "founding",
            "true_cluster": true, "assigned_cluster": int(final[client]) if (joined or not is_late[client]) else None,
            "join_round": schedule.join_round.get(client),
            "attached_to_true": bool(joined and owner.get(int(final[client])) == true) if is_late[client] else None,
            "true_cluster_founded": true in founded,
            "pf1": _mean(scored["local_f1"]), "gf1": _mean(scored["orch_f1"]),
            "pf1_final": float(evaluated["local_f1"].iloc[-1]) if len(evaluated) else float("nan"),
            "n_evaluations": int(len(scored)),
        })
    return rows


def round_rows(history: pd.DataFrame, schedule: LateSchedule) -> list[dict[str, Any]]:
    """Per round and role the mean PF1/GF1 of the clients evaluated in that round (absent clients are null)."""
    roles = np.where(np.isin(history["client"].to_numpy(np.int64), schedule.late), "late", "founding")
    frame = history.assign(role=roles)
    rows = []
    for (rnd, role), group in frame.groupby(["round", "role"], sort=True):
        evaluated = pd.to_numeric(group["local_f1"], errors="coerce").notna()
        rows.append({"kind": "round", "round": int(rnd), "role": str(role), "pf1": _mean(group["local_f1"]),
                     "gf1": _mean(group["orch_f1"]), "n_evaluations": int(evaluated.sum())})
    return rows


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    return typed_frame(frame, LATE_COLUMNS, _LATE_DTYPES)


def late_clients_frame(history: pd.DataFrame, server: pd.DataFrame, truth: GroundTruth) -> pd.DataFrame:
    """``client`` and ``round`` rows of one run (module doc)."""
    schedule = late_schedule(server)
    return _typed(pd.DataFrame([*client_rows(history, truth, schedule), *round_rows(history, schedule)]))


def late_summary(frame: pd.DataFrame) -> dict[str, float | int | None]:
    """A run's attachment accuracy, late and founding PF1 (from the joining round on) and final PF1."""
    clients = frame[frame["kind"] == "client"]
    late, founding = clients[clients["role"] == "late"], clients[clients["role"] == "founding"]
    joined = late["join_round"].dropna()
    return {
        "n_late": int(len(late)), "n_joined": int(len(joined)),
        "join_round": int(joined.min()) if len(joined) else None,
        "attach_accuracy": float(late["attached_to_true"].astype("float64").mean()) if len(late) else float("nan"),
        "n_unfounded": int((~late["true_cluster_founded"].astype(bool)).sum()),
        "pf1_late": _mean(late["pf1"]), "pf1_founding": _mean(founding["pf1"]),
        "pf1_final_late": _mean(late["pf1_final"]), "pf1_final_founding": _mean(founding["pf1_final"]),
        "gf1_late": _mean(late["gf1"]), "gf1_founding": _mean(founding["gf1"]),
    }


def evaluate_late_clients(run_dir: str | Path, manifest_path: str | Path, out_path: str | Path) -> pd.DataFrame:
    """Write ``late_clients.parquet`` of one run (atomically); a failed run gets a zero-row file whose
    Parquet metadata says ``status: failed`` and why."""
    run_dir = Path(run_dir)
    failed = recorded_failure(run_dir, out_path, _typed(pd.DataFrame(columns=LATE_COLUMNS)))
    if failed is not None:
        return failed
    truth = load_ground_truth(manifest_path)
    history = read_history(run_dir / fn.HISTORY)
    server = read_parquet(run_dir / fn.SERVER).to_pandas()
    frame = late_clients_frame(history, server, truth)
    summary = {k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in late_summary(frame).items()}
    write_parquet(frame, out_path, metadata={"run_dir": str(run_dir), "round_base": "round, join_round: 0-based",
                                             "summary": summary})
    return frame
