"""The run layout under ``results_dir`` (docs/architecture.md §2), in one place: the run id (format and parse), the path of
every output, the output names and the report's figure kinds. The Snakemake rules, the ``cfl`` command line,
:mod:`cflcore.stages` and :mod:`cflcore.report` all build their paths here.

(A model's parameters as one flat vector are :mod:`cflcore.fl.flat_params`.)

The path functions join strings, so they take concrete ids and Snakemake wildcard patterns alike:
``run_dir("results", RUN_PATTERN)`` is the rules' ``results/runs/{dataset}/{split}/n{clients}/s{seed}/{algorithm}``.
A run id is parsed by its fixed number of ``/``-separated segments, never by splitting names on other characters:
names of datasets, splits and algorithm variants may hold ``=``, ``.``, ``,`` and ``--`` (factor sweeps,
e.g. ``louvain--resolution=0.5``), never ``/``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CflError

SCENARIO_PATTERN = "{dataset}/{split}/n{clients}/s{seed}"
RUN_PATTERN = SCENARIO_PATTERN + "/{algorithm}"

# ---- output names ------------------------------------------------------------------------------------------
SPLIT_OUTPUTS = ("assignments.parquet", "manifest.json")
RUN_OUTPUTS = ("history.parquet", "server.parquet", "gram.parquet", "divergence.parquet", "models.pt", "status.json")
EVAL_OUTPUTS = ("clustering.parquet", "personalisation.parquet")
WHATIF_OUTPUT = "whatif.parquet"
LATE_CLIENTS_OUTPUT = "late_clients.parquet"
EXPLAIN_OUTPUTS = ("insdel.parquet", "samples.parquet", "saliency.npz")

# ---- the report's tables and figure kinds (report/captions/<name>.rst each) ----------------------------------
REPORT_TABLES = ("table1_clustering", "table2_clustering_round", "table_personalisation", "paper_vs_run",
                 "table_late_clients")  # .csv, .md and .tex
CSV_TABLES = ("sweep_scores", "paper_claims")  # .csv only: factor sweeps (report/sweeps.py), claims (report/claims.py)
FRONT_TABLES = ("headline", "paper_ranking", "departures")
BENCHMARK_TABLES = ("benchmarks_by_rule", "critical_path", "benchmark_summary")  # where the study's time went
FIGURE_KINDS = {
    "learning_gap": "PF1 / GF1 learning gap (000 Fig. 2)",
    "temperature_mean": "Normalised temperature (000 Figs. 3-4)",
    "temperature_runs": "Temperature per run (000 Figs. 10-14)",
    "clustering_progress": "Clustering score per round (001 Fig. 1)",
    "n_clusters": "Number of clusters per round",
    "whatif_heatmap": "What-if clustering: ARI per clusterer and round (trigger vs earliest separable round)",
    "late_clients": "Late-joining clients: PF1 of late vs founding clients (000 §6.2)",
    "split_traces": "Split criteria per round: SCL update norms vs eps1/eps2, FedGWC MSE vs eps and DB",
    "sweeps": "Factor sweeps: final scores against the swept values (002 Figs. 3-4)",
    "round_envelopes": "Per-round scores, mean and std envelope over seeds (002 Fig. 5)",
    "louvain_groups": "Client distances ordered by superclass-like group and majority class (002 §V-B1)",
    "fedgwc": "FedGWC: accuracy and split rounds, P and W, spectral embedding, class shares (004 Figs. 2, 3, 5-8)",
}
EXPLAIN_FIGURE_KINDS = {  # captions: report/captions/explain_<kind>.rst
    "saliency_grid": "Saliency grids (000 Fig. 5)",
    "insdel_box": "Insertion / deletion AUC (000 Figs. 6-7)",
    "cd": "Critical-difference diagrams (000 Figs. 8, 17)",
}


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
    """``name`` of :data:`SPLIT_OUTPUTS`."""
    return f"{split_dir(results, scenario)}/{name}"


def runs_root(results: str) -> str:
    return f"{results}/runs"


def run_dir(results: str, run: str) -> str:
    return f"{runs_root(results)}/{run}"


def run_file(results: str, run: str, name: str) -> str:
    """``name`` of :data:`RUN_OUTPUTS`."""
    return f"{run_dir(results, run)}/{name}"


def run_outputs(results: str, run: str) -> dict[str, str]:
    """The train rule's outputs, :data:`RUN_OUTPUTS` named by their stems (``history``, ..., ``status``)."""
    return {name.split(".")[0]: run_file(results, run, name) for name in RUN_OUTPUTS}


def eval_dir(results: str, run: str) -> str:
    return f"{results}/eval/{run}"


def eval_file(results: str, run: str, name: str) -> str:
    """``name`` of :data:`EVAL_OUTPUTS`, :data:`WHATIF_OUTPUT` or :data:`LATE_CLIENTS_OUTPUT`."""
    return f"{eval_dir(results, run)}/{name}"


def explain_dir(results: str, run: str) -> str:
    return f"{results}/explain/{run}"


def explain_file(results: str, run: str, name: str) -> str:
    """``name`` of :data:`EXPLAIN_OUTPUTS`."""
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


def run_status_glob() -> str:
    """The glob (relative to :func:`runs_root`) of every run's status.json: one ``*`` per run id segment."""
    return "/".join("*" for _ in RUN_PATTERN.split("/")) + "/status.json"
