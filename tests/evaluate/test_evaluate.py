"""The evaluate stage on synthetic run files (history/server/gram/manifest written with cflcore.io)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score, davies_bouldin_score, silhouette_score

from cflcore.errors import DataError
from cflcore.io import read_parquet, write_json, write_parquet
from cflcore.evaluate import evaluate_run
from cflcore.report import RunSpec
from cflcore.evaluate.clustering import canonical_partition, clustering_rounds, RoundPartition

N_CLASSES = 10
CLASS_SETS = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


def true_clusters(n_clients: int) -> np.ndarray:
    return np.repeat(np.arange(3), int(np.ceil(n_clients / 3)))[:n_clients]


def schedule_one_shot(rounds: int, at: int | None, truth: np.ndarray) -> list[np.ndarray]:
    """Everyone in cluster 0 until round ``at`` (0-based), then the true partition (None: never)."""
    return [truth.copy() if at is not None and r >= at else np.zeros_like(truth) for r in range(rounds)]


def synthetic_deltas(truth: np.ndarray, rng: np.random.Generator, dim: int = 12) -> np.ndarray:
    centres = rng.normal(size=(3, dim)) * 3.0
    return centres[truth] + rng.normal(scale=0.3, size=(truth.size, dim))


def write_synthetic_run(root: Path, *, dataset: str = "mnist5k", split: str = "nonoverlap-balanced",
                        clients: int = 6, seed: int = 0, algorithm: str = "ocfl-km", rounds: int = 5,
                        partitions: list[np.ndarray] | None = None, cluster_at: int | None = 2,
                        sampled_mask: np.ndarray | None = None, upper_gram: bool = False,
                        eval_every: int = 1) -> tuple[RunSpec, dict]:
    """Write manifest, history, server and gram files of one run; return its spec and the raw inputs."""
    rng = np.random.default_rng([seed, clients, rounds])
    truth = true_clusters(clients)
    histograms = np.zeros((clients, N_CLASSES), dtype=np.int64)
    for c in range(clients):
        classes = CLASS_SETS[truth[c]]
        histograms[c, classes] = rng.integers(5, 40, size=len(classes))
    scenario = f"{dataset}/{split}/n{clients}/s{seed}"
    manifest_path = root / "splits" / scenario / "manifest.json"
    write_json({"dataset": dataset, "generator": "ocfl", "n_classes": N_CLASSES, "n_clusters": 3,
                "cluster_of_client": truth.tolist(), "label_histograms": histograms.tolist()}, manifest_path)
    partitions = partitions if partitions is not None else schedule_one_shot(rounds, cluster_at, truth)
    sampled_mask = sampled_mask if sampled_mask is not None else np.ones((len(partitions), clients), dtype=bool)
    history, server, gram, deltas_by_round = [], [], [], {}
    for r, labels in enumerate(partitions):
        evaluated = r % eval_every == 0
        for c in range(clients):
            f1 = float(rng.uniform(0.3, 1.0)) if evaluated else None
            history.append({"round": np.int32(r), "client": np.int32(c), "cluster": np.int64(labels[c]),
                            "sampled": bool(sampled_mask[r, c]), "train_loss": float(rng.uniform()),
                            "local_loss": 0.5, "local_acc": f1, "local_f1": f1,
                            "local_bacc": None if f1 is None else f1 / 2,
                            "orch_loss": 0.7, "orch_acc": None if f1 is None else f1 / 3,
                            "orch_f1": None if f1 is None else f1 / 3,
                            "orch_bacc": None if f1 is None else f1 / 4, "model_key": str(labels[c])})
        sampled = np.flatnonzero(sampled_mask[r])
        deltas = synthetic_deltas(truth, rng)[sampled]
        deltas_by_round[r] = deltas
        g = deltas @ deltas.T
        for a, i in enumerate(sampled):
            for b, j in enumerate(sampled):
                if upper_gram and b < a:
                    continue
                gram.append({"round": np.int32(r), "i": np.int32(i), "j": np.int32(j), "value": float(g[a, b])})
        server.append({"round": np.int32(r), "n_clusters": np.int64(len(np.unique(labels))),
                       "clustered_now": bool(r == cluster_at), "temperature": float(abs(r - 1.5) + 0.1 * rng.uniform()),
                       "mean_train_loss": 0.5, "mean_local_f1": 0.5, "seconds": 0.1})
    run_dir = root / "runs" / scenario / algorithm
    write_parquet(pd.DataFrame(history), run_dir / "history.parquet")
    write_parquet(pd.DataFrame(server), run_dir / "server.parquet")
    write_parquet(pd.DataFrame(gram), run_dir / "gram.parquet")
    spec = RunSpec(dataset, split, clients, seed, algorithm, eval_dir=root / "eval" / scenario / algorithm,
                   run_dir=run_dir, manifest=manifest_path, log=root / "logs" / "train" / f"{scenario}/{algorithm}.log",
                   status=run_dir / "status.json")
    return spec, {"truth": truth, "partitions": partitions, "deltas": deltas_by_round, "history": pd.DataFrame(history),
                  "histograms": histograms, "sampled": sampled_mask}


def evaluated(tmp_path: Path, score_rounds: int | None = None, **kwargs) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    spec, raw = write_synthetic_run(tmp_path, **kwargs)
    evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir, score_rounds=score_rounds)
    clustering = read_parquet(spec.eval_dir / "clustering.parquet").to_pandas()
    personal = read_parquet(spec.eval_dir / "personalisation.parquet").to_pandas()
    return clustering, personal, raw


def test_one_shot_run_scores_per_round_and_summary(tmp_path):
    clustering, _, raw = evaluated(tmp_path, rounds=5, cluster_at=2)
    per_round = clustering[clustering["kind"] == "round"].reset_index(drop=True)
    assert per_round["round"].tolist() == [0, 1, 2, 3, 4]
    assert per_round["ari"].tolist() == pytest.approx([0, 0, 1, 1, 1])
    assert per_round["completeness"].tolist()[:2] == pytest.approx([1, 1])  # one cluster is trivially complete
    assert per_round["homogeneity"].tolist() == pytest.approx([0, 0, 1, 1, 1])
    assert per_round["n_clusters"].tolist() == [1, 1, 3, 3, 3]
    assert per_round["silhouette"].isna().tolist() == [True, True, False, False, False]
    for r in (2, 3, 4):  # silhouette / DB on the update vectors equal sklearn's on the explicit deltas
        assert per_round.loc[r, "silhouette"] == pytest.approx(silhouette_score(raw["deltas"][r], raw["truth"]), abs=1e-9)
        assert per_round.loc[r, "davies_bouldin"] == pytest.approx(davies_bouldin_score(raw["deltas"][r], raw["truth"]), abs=1e-9)
    mean = clustering[clustering["kind"] == "mean"].iloc[0]
    assert mean["ari"] == pytest.approx(3 / 5)  # pre-clustering rounds included, as published
    assert mean["silhouette"] == pytest.approx(per_round["silhouette"].iloc[2:].mean())
    assert mean["clustering_round"] == 3 and mean["first_clustering_round"] == 3  # 1-based, as 000 Table 2
    assert bool(mean["ever_clustered"]) and mean["n_rounds_scored"] == 5
    final = clustering[clustering["kind"] == "final"].iloc[0]
    assert final["round"] == 4 and final["ari"] == pytest.approx(1.0)
    assert pd.isna(per_round["clustering_round"]).all()


def test_score_rounds_limits_the_mean(tmp_path):
    clustering, _, _ = evaluated(tmp_path, score_rounds=3, rounds=6, cluster_at=2)
    mean = clustering[clustering["kind"] == "mean"].iloc[0]
    assert mean["ari"] == pytest.approx(1 / 3) and mean["n_rounds_scored"] == 3


def test_single_cluster_run_has_null_internal_scores_and_no_round(tmp_path):
    clustering, _, _ = evaluated(tmp_path, rounds=4, cluster_at=None)
    rounds = clustering[clustering["kind"] == "round"]
    assert rounds[["silhouette", "davies_bouldin", "was", "wadb"]].isna().all().all()
    assert rounds["ari"].tolist() == pytest.approx([0, 0, 0, 0])
    mean = clustering[clustering["kind"] == "mean"].iloc[0]
    assert pd.isna(mean["silhouette"]) and pd.isna(mean["clustering_round"]) and pd.isna(mean["first_clustering_round"])
    assert not bool(mean["ever_clustered"])


def test_scl_like_recursive_splits_report_last_split(tmp_path):
    truth = true_clusters(6)
    two = np.where(truth == 0, 0, 1)
    partitions = [np.zeros(6, int), two, two, truth + 5, truth + 5]
    clustering, _, _ = evaluated(tmp_path, partitions=partitions)
    mean = clustering[clustering["kind"] == "mean"].iloc[0]
    assert mean["first_clustering_round"] == 2 and mean["clustering_round"] == 4


def test_relabelling_is_not_a_change():
    truth = true_clusters(6)
    parts = [RoundPartition(0, truth, np.arange(6)), RoundPartition(1, (truth + 1) % 3, np.arange(6))]
    assert clustering_rounds(parts) == (1, 1)
    assert np.array_equal(canonical_partition(np.array([7, 7, 2, 9])), [0, 0, 1, 2])


def test_partial_participation_restricts_internal_scores_to_sampled(tmp_path):
    mask = np.ones((4, 9), dtype=bool)
    mask[3, [0, 4]] = False
    clustering, _, raw = evaluated(tmp_path, clients=9, rounds=4, cluster_at=1, sampled_mask=mask, upper_gram=True)
    row = clustering[(clustering["kind"] == "round") & (clustering["round"] == 3)].iloc[0]
    sampled = np.flatnonzero(mask[3])
    assert row["n_sampled"] == 7
    assert row["silhouette"] == pytest.approx(silhouette_score(raw["deltas"][3], raw["truth"][sampled]), abs=1e-9)
    assert row["ari"] == pytest.approx(adjusted_rand_score(raw["truth"], raw["partitions"][3]))


def test_personalisation_means_skip_unevaluated_rounds(tmp_path):
    _, personal, raw = evaluated(tmp_path, rounds=4, eval_every=2)
    history = raw["history"]
    f1 = history["local_f1"].dropna()
    mean = personal[personal["kind"] == "mean"].iloc[0]
    assert mean["pf1"] == pytest.approx(f1.mean())
    assert mean["gf1"] == pytest.approx(f1.mean() / 3)
    assert mean["learning_gap"] == pytest.approx(abs(f1.mean() - f1.mean() / 3))
    assert mean["local_bacc"] == pytest.approx(f1.mean() / 2)
    assert mean["n_evaluations"] == len(f1)
    per_round = personal[personal["kind"] == "round"]
    assert per_round["round"].tolist() == [0, 2]
    assert per_round["pf1"].iloc[1] == pytest.approx(history[history["round"] == 2]["local_f1"].mean())
    assert personal[personal["kind"] == "final"].iloc[0]["round"] == 2


def test_bad_inputs_raise_one_line_data_errors(tmp_path):
    spec, _ = write_synthetic_run(tmp_path)
    history = read_parquet(spec.run_dir / "history.parquet").to_pandas()
    write_parquet(history.drop(columns=["cluster"]), spec.run_dir / "history.parquet")
    with pytest.raises(DataError, match="cluster"):
        evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir)
    with pytest.raises(DataError, match="not found"):
        evaluate_run(spec.run_dir, tmp_path / "nope.json", spec.eval_dir)
    with pytest.raises(DataError, match="score_rounds"):
        spec2, _ = write_synthetic_run(tmp_path / "b")
        evaluate_run(spec2.run_dir, spec2.manifest, spec2.eval_dir, score_rounds=0)
    assert not (spec.eval_dir / "clustering.parquet").exists()


def test_recorded_training_failure_gives_failed_eval_files(tmp_path):
    from cflcore.io import parquet_metadata
    from cflcore.report.runs import load_run

    spec, _ = write_synthetic_run(tmp_path)
    for name in ("history.parquet", "server.parquet", "gram.parquet"):  # what stages.train writes on failure
        write_parquet(pd.DataFrame({"round": pd.Series([], dtype="int32")}), spec.run_dir / name)
    write_json({"status": "failed", "reason": "TrainingDiverged: loss is NaN at round 2"}, spec.run_dir / "status.json")
    evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir)
    clustering = read_parquet(spec.eval_dir / "clustering.parquet").to_pandas()
    assert clustering.empty and "ari" in clustering.columns
    assert parquet_metadata(spec.eval_dir / "personalisation.parquet")["status"] == "failed"
    assert load_run(spec).reason == "TrainingDiverged: loss is NaN at round 2"


def test_clients_not_yet_joined_are_neither_a_cluster_nor_a_change():
    """000 §6.2 late clients: before joining they keep the pre-clustering label but have no model; the
    partition is scored on present clients, and their joining is not a new clustering round."""
    from cflcore.evaluate.clustering import round_scores, GroundTruth

    truth = true_clusters(6)
    late = np.zeros(6, dtype=bool)
    late[[1, 4]] = True
    clustered = np.where(late, 0, truth + 1)  # founders clustered, late clients still in cohort 0
    joined = truth + 1
    parts = [RoundPartition(0, np.zeros(6, np.int64), np.flatnonzero(~late), ~late),
             RoundPartition(1, clustered, np.flatnonzero(~late), ~late),
             RoundPartition(2, joined, np.arange(6), np.ones(6, bool))]
    assert clustering_rounds(parts) == (2, 2)
    gt = GroundTruth(truth, np.eye(6)[:, :3] + 1.0)
    row = round_scores(parts[1], gt, None)
    assert row["n_clusters"] == 3 and row["ari"] == pytest.approx(1.0)
    # without the presence mask the waiting clients form a fourth cluster and the join looks like a split
    blind = [RoundPartition(p.round, p.labels, p.sampled) for p in parts]
    assert clustering_rounds(blind) == (3, 2)
    assert round_scores(blind[1], gt, None)["n_clusters"] == 4


def test_a_split_without_groups_has_no_external_scores(tmp_path):
    """shards / dirichlet (manifest ground_truth: false): ARI and the other external scores are null, never 0."""
    import json

    import numpy as np

    from cflcore.evaluate.clustering import RoundPartition, load_ground_truth, round_scores
    from cflcore.metrics import EXTERNAL_SCORES

    manifest = {"cluster_of_client": [0, 0, 0, 0], "label_histograms": [[3, 1]] * 4, "ground_truth": False}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    truth = load_ground_truth(tmp_path / "manifest.json")
    part = RoundPartition(0, np.array([0, 0, 1, 1]), np.arange(4))
    scores = round_scores(part, truth, None)
    assert all(scores[k] is None for k in EXTERNAL_SCORES) and scores["n_clusters"] == 2
    manifest.pop("ground_truth")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert round_scores(part, load_ground_truth(tmp_path / "manifest.json"), None)["ari"] == 0.0
