"""Split generators: which client holds which samples, and the ground-truth cluster of every client
(docs/architecture.md §7). One module per family, each generator declaring its parameters, defaults and checks
beside itself (the contract: :mod:`.base`):

* :mod:`.label_skew`: groups that differ in their classes (000's OCFL splits, 002's majority classes, 004's
  Dirichlet mixes);
* :mod:`.partitions`: the standard label partitions, without groups (per-client Dirichlet, shards);
* :mod:`.shifts`: concept and feature shifts (004's visual domains; rotations, label swaps, erosion / dilation);
* :mod:`.quantity`: quantity skew, a negative control;
* :mod:`.grouped`: the base of the generators whose groups differ by one shift;
* :mod:`.build`: the shared sampler, the streams and the files (``make_split``).

A new generator is one new module here: its ``@SPLIT_GENERATORS.register("<name>")`` is its declaration (config
validation reads the names from the source, cflcore.registry), its ``params_schema`` its parameters (the config
reference, docs/configuration.md, is generated from them). tests/data/test_split_plugins.py adds one so.
"""
from .base import SPLIT_GENERATORS, SplitGenerator
from .build import build_split, make_split, split_summary

__all__ = ["SPLIT_GENERATORS", "SplitGenerator", "build_split", "make_split", "split_summary"]
