"""The home table's fixed rows (issue 57): each method's home, its authors' demonstration with its source, and their
result, as the home configs' headers quote them (config/home-offline.yaml, config/home-scl-offline.yaml,
config/home-fesem-offline.yaml). The table itself, with ours and the verdict from the study's runs: :mod:`.home`
(``Home.tables``).

IFCA, SCL and FeSEM are checked in this study (their claims, :mod:`.home`); OCFL, Louvain and FedGWC are checked in
their own studies and named here, not rerun; BCL has no home study: its row says that no code of the authors was found
and which paper's setting is its home.
"""
from __future__ import annotations

from dataclasses import dataclass


HOME_TABLE = "home_table"
"""The home table's catalogue kind (``tables/home_table.csv``; caption report/captions/home_table.rst)."""
HOME_COLUMNS = ("method", "home", "authors' demonstration", "authors' result", "ours", "verdict", "mark", "ablations",
                "departures")

NOT_RUN = "not run in this study"
ELSEWHERE = "checked there, not rerun here"
ELSEWHERE_VERDICT = "that study's paper check (its front page)"
ELSEWHERE_DEPARTURES = "that study's departures by design (its front page)"
NO_HOME = "no home study"


@dataclass(frozen=True)
class HomeRow:
    """One method's home: where it is checked (``home``), the authors' demonstration and its source, their result."""

    method: str
    home: str
    demonstration: str
    result: str


IFCA = HomeRow(
    "IFCA (Ghosh et al. 2020)", "this study (config/home-offline.yaml)",
    "jichan3751/ifca at 61e44b8, mnist/: rotated MNIST, p 4 groups, m 2400 machines of n 100 images, h1 200, tau 10 "
    "full-batch steps, lr 0.1 (mnist/config.json:2-13, mnist/train_cluster_mnist.py:315-327, 385-402)",
    "no clustering number: mnist/run.py:208-209 prints the final test accuracy only (mean ± std over 5 seeds); "
    "cl_acc (train_cluster_mnist.py:420) is computed, never printed; the README states none")
SCL = HomeRow(
    "SCL (Sattler et al. 2020)", "this study (config/home-scl-offline.yaml)",
    "felisat/clustered-federated-learning at 23a1c38: 10 clients, Dir(1.0), clients 0-4 rotated 180°, ConvNet, SGD lr "
    "0.1 momentum 0.9, 80 rounds, eps1 0.4, eps2 1.6 (clustered_federated_learning.ipynb:53-54, 117-118, 130, "
    "220-222; fl_devices.py:86-108)",
    "one run (seed 42); the notebook's saved output (lines 343-368) shows one split, into clients 0-4 and 5-9")
FESEM = HomeRow(
    "FeSEM (Xie et al. 2020; Long et al. 2023)", "this study (config/home-fesem-offline.yaml)",
    "anonymousgit2020/fedsem at b8ad277 (LEAF, TensorFlow; arXiv 2005.01026): FEMNIST's writers, the LEAF CNN with a "
    "248-unit dense layer, SGD lr 0.0003, batch 10, 1 epoch, 2 clients a cluster, K 3, k-means over the clients' "
    "last-layer kernels every round, its labels read against a reshuffled client order (models/mlhead_clus_server.py:"
    "159, 214-224: a random partition each round; models/mlhead_trainer.py:172-243, models/utils/args.py:29-33, 86, "
    "models/baseline_constants.py:23, models/mh_constants.py:10)",
    "accuracies only, no clustering number (FEMNIST's writers have no known groups): the saved "
    "models/femnist_convg_score.tsv ends at micro accuracy 0.839 (line 100, settings not recorded); the abstract of "
    "arXiv 2005.01026: 'our method outperforms several popular federated learning methods'")
ELSEWHERE_ROWS = (
    HomeRow("OCFL (000)", "the default study, config/config.yaml (paper check 000: Tables 1-2, Figure 2)",
            "000's label-group splits (non-overlapping / overlapping, balanced / imbalanced, 000 §4.1)",
            "000 Tables 1-2, Figure 2"),
    HomeRow("Louvain (002)", "config/louvain-002-offline.yaml (paper check 002)",
            "002's own federation: superclass-like groups, AVG / 1NN / WNN / Late attribution",
            "002's claims (Figs. 2-5, §V)"),
    HomeRow("FedGWC (004)", "config/fedgwc-004-offline.yaml (paper check 004)",
            "004's own federations: visual domains, heterogeneity mixes, Dirichlet", "004 Tables 1, 3-9"),
)
NO_HOME_ROWS = (
    HomeRow("BCL (Briggs et al. 2020)", NO_HOME,
            "no authors' code found; home = the paper's setting (arXiv 2004.11791), not reproduced here: with no "
            "code to quote, its data and recipe are not stated in this table",
            "the paper's reported results, no code to quote; third-party ports exist (e.g. alexkyllo/inflorescence)"),
)
