"""End to end on the real MNIST-5k: every algorithm of the default study (config/config.yaml
``study.algorithms``) trains through the stage functions the Snakemake rules call (``stages.train`` and
``stages.evaluate``, workflow_scripts/train.py and evaluate.py), on the default study's first scenario
(nonoverlap-balanced, 15 clients, seed 0, 120 samples per client, 10 rounds, every method's default-config
parameters: tests/conftest.py ``MnistStudy``). Scores come from the evaluation's Parquet files.

What each paper says on a non-overlapping split, asserted per method:

* every clustered method ends at ARI >= 0.9 (the three disjoint class sets are recovered), and its final
  PF1 is high (>= 0.85) and far above BNC's (000 §4.3: 0.955 against 0.302 on MNIST-15 NB): a regression
  in the training settings fails, not only one in the clustering;
* BNC (FedAvg, 000 §4.2) stays one cluster;
* OCFL (000 Algorithm 1) clusters once, when the temperature trigger fires: one cluster before, the true
  partition (ARI 1.0, 3 clusters) from that round on; with late clients (000 §6.2) they are absent until the
  round after clustering, then every one is attached to the cluster of its true cluster's founders;
* SCL (Sattler et al.) bi-partitions recursively: nothing during the cooldown, each split refines the
  partition by one cluster;
* BCL (Briggs et al.) clusters once, at its configured round;
* Louvain CFL (002) finds the number of communities itself (3);
* FedGWC (004 Alg. 1) splits recursively, a cluster only once its interaction matrix's MSE is below eps;
* IFCA (Ghosh et al.) never holds more than its k models.

Each method is trained once per session; tests/fl/test_resume.py reuses these runs as the uninterrupted
references of its kill-and-resume tests.
"""
import json

import numpy as np
import pandas as pd
import pytest

from cflcore import config as cc
from cflcore import stages
from conftest import REPO

pytestmark = pytest.mark.slow

ALGORITHMS = cc.load_config(f"{REPO}/config/config.yaml")["study"]["algorithms"]


def rounds(study, algorithm: str) -> pd.DataFrame:
    """clustering.parquet's per-round rows (ARI over the clients present that round), indexed by round."""
    scores = study.table(algorithm, "clustering")
    return scores[scores["kind"] == "round"].set_index("round")


def final_pf1(study, algorithm: str) -> float:
    return float(study.table(algorithm, "personalisation").set_index("kind").loc["final", "pf1"])


def partitions(study, algorithm: str) -> dict[int, np.ndarray]:
    """history.parquet's cluster label of every client, per round."""
    history = study.table(algorithm, "history").sort_values(["round", "client"])
    return {int(r): g["cluster"].to_numpy() for r, g in history.groupby("round")}


def refines(new: np.ndarray, old: np.ndarray) -> bool:
    """Every cluster of ``new`` lies inside one cluster of ``old`` (a split never merges)."""
    return all(np.unique(old[new == c]).size == 1 for c in np.unique(new))


def change_rounds(study, algorithm: str) -> list[int]:
    server = study.table(algorithm, "server")
    return server.loc[server["clustered_now"], "round"].astype(int).tolist()


# ----- per-method outcomes ------------------------------------------------------------------------
def check_ocfl(study, algorithm):
    per_round = rounds(study, algorithm)
    clustered = per_round[per_round["n_clusters"] > 1]
    assert len(clustered), "the temperature trigger never fired"
    first = int(clustered.index.min())
    assert (per_round.loc[:first - 1, "n_clusters"] == 1).all()  # one-shot: nothing before the trigger
    assert per_round.loc[first, "n_clusters"] == 3
    assert clustered["ari"].tolist() == pytest.approx([1.0] * len(clustered))  # ... and the partition stays
    params = study.settings(algorithm)["algorithm"]
    if not params.get("late_clients", 0):
        assert change_rounds(study, algorithm) == [first]
        return
    join = first + params.get("join_after", 1)
    assert change_rounds(study, algorithm) == [first, join]  # the late clients' attachment changes labels
    check_late_clients(study, algorithm, join)


def check_late_clients(study, algorithm, join_round):
    """000 §6.2: the late clients are out of the federation (null metrics) until they join, the round after
    clustering, when each is attached to the cluster its true cluster's founders are in."""
    out = study.eval_dir(algorithm) / "late_clients.parquet"
    stages.evaluate_late_clients(study.run(algorithm), study.manifest, out)
    clients = pd.read_parquet(out).query("kind == 'client' and role == 'late'")
    assert len(clients) == 3  # 0.2 of 15
    assert (clients["join_round"] == join_round).all()
    assert clients["attached_to_true"].all(), clients
    history = study.table(algorithm, "history")
    waiting = history[history["client"].isin(clients["client"]) & (history["round"] < join_round)]
    assert waiting["model_key"].isna().all() and waiting["local_f1"].isna().all()


def check_scl(study, algorithm):
    params = study.settings(algorithm)["algorithm"]
    server = study.table(algorithm, "server").set_index("round")
    labels = partitions(study, algorithm)
    splits = change_rounds(study, algorithm)
    assert len(splits) >= 2, "SCL should bi-partition recursively on NB (default study: 2 splits)"
    assert min(splits) >= params["cooldown"]  # 0-based rounds < cooldown never split
    previous = np.zeros_like(labels[0])
    for rnd, now in labels.items():
        assert refines(now, previous)
        assert np.unique(now).size - np.unique(previous).size == server.loc[rnd, "n_splits"]
        previous = now


def check_bcl(study, algorithm):
    at = study.settings(algorithm)["algorithm"]["round"]
    assert change_rounds(study, algorithm) == [at]
    assert (rounds(study, algorithm).loc[:at - 1, "n_clusters"] == 1).all()


def check_louvain(study, algorithm):
    per_round = rounds(study, algorithm)
    assert per_round["n_clusters"].iloc[-1] == 3  # found, not given: Louvain has no k


def check_fedgwc(study, algorithm):
    epsilon = study.settings(algorithm)["algorithm"]["epsilon"]
    server = study.table(algorithm, "server").set_index("round")
    labels = partitions(study, algorithm)
    assert (labels[0] == labels[0][0]).all()
    splits = change_rounds(study, algorithm)
    assert len(splits) >= 2, "FedGWC should split recursively on NB (default study: 2 splits)"
    for rnd in splits:
        assert refines(labels[rnd], labels[rnd - 1])
        mse = json.loads(server.loc[rnd, "mse"])
        for event in json.loads(server.loc[rnd, "split_events"]):
            assert mse[str(event["parent"])] < epsilon  # 004 Alg. 1 l. 15


def check_ifca(study, algorithm):
    k = study.settings(algorithm)["algorithm"]["k"]
    assert (rounds(study, algorithm)["n_clusters"] <= k).all()


CHECKS = {"scl": check_scl, "bcl": check_bcl, "ocfl": check_ocfl, "louvain": check_louvain,
          "fedgwc": check_fedgwc, "ifca": check_ifca}


@pytest.mark.kernels
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_method_reaches_its_papers_outcome_on_mnist(mnist_study, algorithm):
    method = mnist_study.settings(algorithm)["algorithm"]["method"]
    per_round = rounds(mnist_study, algorithm)
    assert len(per_round) == mnist_study.settings(algorithm)["training"]["rounds"]
    if method == "bnc":
        assert (per_round["n_clusters"] == 1).all()
        assert (mnist_study.table(algorithm, "history")["cluster"] == 0).all()
        return
    assert per_round["ari"].iloc[-1] >= 0.9, per_round["ari"].tolist()
    pf1, baseline = final_pf1(mnist_study, algorithm), final_pf1(mnist_study, "bnc")
    assert pf1 >= 0.85, (pf1, baseline)
    assert pf1 - baseline >= 0.4, (pf1, baseline)
    CHECKS[method](mnist_study, algorithm)


def test_the_default_study_runs_every_method_here():
    """The parametrisation above is the default study's list, and every method of it is checked."""
    cfg = cc.load_config(f"{REPO}/config/config.yaml")
    methods = {cfg["algorithms"][a]["method"] for a in cfg["study"]["algorithms"]}
    assert methods <= set(CHECKS) | {"bnc"}
