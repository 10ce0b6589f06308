"""The run layout under ``results_dir`` (docs/architecture.md §2), in one place: the run id (format and parse) and the
path of every output. The file names are :mod:`cflcore.filenames` (what the report writes inside its folder:
:mod:`cflcore.report.catalogue`). The Snakemake rules, the ``cfl`` command line, :mod:`cflcore.stages` and
:mod:`cflcore.report` all build their paths here.

(A model's parameters as one flat vector are :mod:`cflcore.fl.flat_params`.)

The path functions join strings, so they take concrete ids and Snakemake wildcard patterns alike:
``run_dir("results", RUN_PATTERN)`` is the rules' ``results/runs/{dataset}/{split}/n{clients}/s{seed}/{algorithm}``.
A run id is parsed by its fixed number of ``/``-separated segments, never by splitting names on other characters:
names of datasets, splits and algorithm variants may hold ``=``, ``.``, ``,`` and ``@`` (factor sweeps,
e.g. ``louvain@resolution=0.5``), never ``/``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CflError
from .filenames import CENTRALISED_UPDATE_NORMS_FILE, CHECKPOINTS, FAILURES, PROGRESS, RUN_OUTPUTS, STATUS

SCENARIO_PATTERN = "{dataset}/{split}/n{clients}/s{seed}"
RUN_PATTERN = SCENARIO_PATTERN + "/{algorithm}"

# ---- run ids ---------------------------------------------------------------------------------------------------
def scenario_id(dataset: str, split: str, clients: int | str, seed: int | str) -> str:
    """``{dataset}/{split}/n{clients}/s{seed}`` (docs/architecture.md §2)."""
    return SCENARIO_PATTERN.format(dataset=dataset, split=split, clients=clients, seed=seed)


def run_id(dataset: str, split: str, clients: int | str, seed: int | str, algorithm: str) -> str:
    """``{scenario}/{algorithm}``."""
    return RUN_PATTERN.format(dataset=dataset, split=split, clients=clients, seed=seed, algorithm=algorithm)


@dataclass(frozen=True)
class RunRef:
    """A parsed scenario id (``algorithm`` None) or run id."""

    dataset: str
    split: str
    clients: int
    seed: int
    algorithm: str | None = None

    @property
    def scenario(self) -> str:
        return scenario_id(self.dataset, self.split, self.clients, self.seed)

    @property
    def run(self) -> str:
        if self.algorithm is None:
            raise CflError(f"{self.scenario}: a scenario id names no algorithm")
        return run_id(self.dataset, self.split, self.clients, self.seed, self.algorithm)


def _parse(text: str, n_parts: int, what: str) -> RunRef:
    parts = str(text).strip("/").split("/")
    pattern = RUN_PATTERN if n_parts == 5 else SCENARIO_PATTERN
    if (len(parts) != n_parts or not all(parts) or not parts[2][:1] == "n" or not parts[3][:1] == "s"
            or not parts[2][1:].isdigit() or not parts[3][1:].isdigit()):
        raise CflError(f"{text!r} is not a {what} id; allowed: {pattern}")
    return RunRef(parts[0], parts[1], int(parts[2][1:]), int(parts[3][1:]), parts[4] if n_parts == 5 else None)


def parse_run_id(text: str) -> RunRef:
    """The five parts of ``{dataset}/{split}/n{clients}/s{seed}/{algorithm}``, by position."""
    return _parse(text, 5, "run")


def parse_scenario_id(text: str) -> RunRef:
    """The four parts of ``{dataset}/{split}/n{clients}/s{seed}``, by position."""
    return _parse(text, 4, "scenario")


# ---- paths (strings; ``results`` is results_dir without a trailing slash) ---------------------------------------
def dataset_file(results: str, dataset: str) -> str:
    return f"{results}/data/{dataset}.parquet"


def split_dir(results: str, scenario: str) -> str:
    return f"{results}/splits/{scenario}"


def split_file(results: str, scenario: str, name: str) -> str:
    """``name`` of :data:`cflcore.filenames.SPLIT_OUTPUTS`."""
    return f"{split_dir(results, scenario)}/{name}"


def input_file_name(kind: str) -> str:
    """The file name, in the scenario's split folder, of a strategy input of file kind ``"<kind>/<option>"``
    (cflcore.strategies.base.INPUT_KINDS). ``centralised_update_norms/<round size>`` keeps the name it had when SCL's
    proxy was its only user: ``scl_proxy-<round size>.parquet``."""
    base, _, option = kind.partition("/")
    if base == "centralised_update_norms" and option:
        return CENTRALISED_UPDATE_NORMS_FILE.format(option=option)
    raise ValueError(f"strategy input kind {kind!r}: known kinds: centralised_update_norms/<round size>")


def input_file(results: str, scenario: str, kind: str) -> str:
    """A strategy input's path (:func:`input_file_name`) beside the scenario's split."""
    return split_file(results, scenario, input_file_name(kind))


def kernel_results(results: str, kernels: str) -> str:
    """The results folder of the study's runs trained again on kernel path ``kernels`` (cflcore.kernel_paths): its
    ``runs/``, ``eval/``, ``logs/`` and ``benchmarks/`` as a study's; the data and splits stay the study's own."""
    return f"{results}/kernels/{kernels}"


def runs_root(results: str) -> str:
    return f"{results}/runs"


def run_dir(results: str, run: str) -> str:
    return f"{runs_root(results)}/{run}"


def run_file(results: str, run: str, name: str) -> str:
    """``name`` of :data:`cflcore.filenames.RUN_OUTPUTS`."""
    return f"{run_dir(results, run)}/{name}"


def progress_file(results: str, run: str) -> str:
    """A run's live per-round record (undeclared; cflcore.fl.progress)."""
    return f"{run_dir(results, run)}/{PROGRESS}"


def failures_file(results: str, run: str) -> str:
    """A run's failed attempts, one JSON line each (undeclared; cflcore.stages.failed_attempts)."""
    return f"{run_dir(results, run)}/{FAILURES}"


def checkpoints_dir(results: str, run: str) -> str:
    """A run's checkpoints (undeclared; cflcore.fl.checkpoint)."""
    return f"{run_dir(results, run)}/{CHECKPOINTS}"


def tensorboard_root(results: str) -> str:
    """TensorBoard's ``--logdir`` for a whole study (config ``monitor.tensorboard``; undeclared)."""
    return f"{results}/tensorboard"


def tensorboard_dir(results: str, run: str) -> str:
    """One run's TensorBoard event files: one folder per run id, so TensorBoard lists the runs side by side."""
    return f"{tensorboard_root(results)}/{run}"


def run_outputs(results: str, run: str) -> dict[str, str]:
    """The train rule's outputs, :data:`RUN_OUTPUTS` named by their stems (``history``, ..., ``status``)."""
    return {name.split(".")[0]: run_file(results, run, name) for name in RUN_OUTPUTS}


def eval_dir(results: str, run: str) -> str:
    return f"{results}/eval/{run}"


def eval_file(results: str, run: str, name: str) -> str:
    """``name`` of an evaluation file (:data:`cflcore.filenames.EVAL_OUTPUTS`, ``WHATIF``, ``LATE_CLIENTS``)."""
    return f"{eval_dir(results, run)}/{name}"


def explain_dir(results: str, run: str) -> str:
    return f"{results}/explain/{run}"


def explain_file(results: str, run: str, name: str) -> str:
    """``name`` of :data:`cflcore.filenames.EXPLAIN_OUTPUTS`."""
    return f"{explain_dir(results, run)}/{name}"


def log_file(results: str, rule: str, path: str) -> str:
    """A job's log: ``path`` is its wildcards path (dataset, scenario or run id; ``report`` for the report)."""
    return f"{results}/logs/{rule}/{path}.log"


def benchmarks_dir(results: str) -> str:
    return f"{results}/benchmarks"


def benchmark_in(root: str, rule: str, path: str) -> str:
    """A job's benchmark file under the benchmarks folder ``root`` (:func:`benchmarks_dir`)."""
    return f"{root}/{rule}/{path}.tsv"


def benchmark_file(results: str, rule: str, path: str) -> str:
    """A job's Snakemake benchmark file (``path`` as for :func:`log_file`)."""
    return benchmark_in(benchmarks_dir(results), rule, path)


def report_dir(results: str) -> str:
    return f"{results}/report"


def report_file(results: str, relative: str) -> str:
    """A file or folder of the report, ``relative`` to the report folder (the catalogue's paths,
    :func:`part_index_file`, :data:`cflcore.filenames.REPORT_INDEX`); the folder itself for ``""``."""
    return f"{report_dir(results)}/{relative}" if relative else report_dir(results)


def part_index_file(part: str) -> str:
    """A report part's index entries (``parts/<part>.json``, cflcore.report.parts), relative to the report folder."""
    return f"parts/{part}.json"


def run_status_glob() -> str:
    """The glob (relative to :func:`runs_root`) of every run's status.json: one ``*`` per run id segment."""
    return "/".join("*" for _ in RUN_PATTERN.split("/")) + "/" + STATUS
