"""The name of every file a run writes, in one place (docs/architecture.md §2): constants only, importing nothing.

Every writer and every reader takes its file names from here, and :mod:`cflcore.layout` builds the paths from them.
Because this module holds only names, a stage that imports it adds nothing but these names to its code hash
(cflcore/provenance.py): the train stage names its files without importing the run layout, so editing the layout
or the report retrains nothing. What the report writes inside its folder is named in its catalogue
(cflcore/report/catalogue.py).
"""

# ---- a scenario's split folder (rule split; cflcore.data.splits) ------------------------------------------------
ASSIGNMENTS = "assignments.parquet"
MANIFEST = "manifest.json"
SPLIT_OUTPUTS = (ASSIGNMENTS, MANIFEST)
CENTRALISED_UPDATE_NORMS_FILE = "scl_proxy-{option}.parquet"
"""A ``centralised_update_norms/<round size>`` strategy input beside the split (rule centralised_update_norms): the
name it had when SCL's proxy was its only user."""

# ---- a run's folder (rule train; cflcore.fl.artifacts, cflcore.stages) ------------------------------------------
HISTORY = "history.parquet"
SERVER = "server.parquet"
GRAM = "gram.parquet"
DIVERGENCE = "divergence.parquet"
TRAFFIC = "traffic.parquet"
MODELS = "models.pt"
STATUS = "status.json"
RUN_TABLES = (HISTORY, SERVER, GRAM, DIVERGENCE, TRAFFIC)
RUN_OUTPUTS = (*RUN_TABLES, MODELS, STATUS)
# a run's files that no rule declares, so they never change a rerun decision: the live per-round record
# (cflcore.fl.progress), the failed attempts (cflcore.stages.failed_attempts) and the checkpoints (cflcore.fl.checkpoint)
PROGRESS = "progress.jsonl"
FAILURES = "failures.jsonl"
CHECKPOINTS = "checkpoints"
CHECKPOINT_PREFIX, CHECKPOINT_SUFFIX = "round_", ".pt"  # checkpoints/round_00012.pt: the round, five digits or more

# ---- a run's evaluation folder (rules evaluate, evaluate_late_clients; cflcore.evaluate) --------------------------
CLUSTERING = "clustering.parquet"
PERSONALISATION = "personalisation.parquet"
EVAL_OUTPUTS = (CLUSTERING, PERSONALISATION)
WHATIF = "whatif.parquet"
LATE_CLIENTS = "late_clients.parquet"

# ---- a run's explanation folder (rule explain; cflcore.explain.framework) -------------------------------------------
INSDEL = "insdel.parquet"
SAMPLES = "samples.parquet"
EXPLAIN_SUMMARY = "summary.parquet"
SALIENCY = "saliency.npz"
EXPLAIN_OUTPUTS = (INSDEL, SAMPLES, EXPLAIN_SUMMARY, SALIENCY)

# ---- the report folder (rule report; cflcore.report.index) ------------------------------------------------------
REPORT_INDEX = ("index.json", "index.csv")
