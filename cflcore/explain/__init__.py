"""Explainability stage (000 §5, DESIGN §9): captum attributions, insertion/deletion AUC, Algorithm 2.

Outputs of :func:`explain_run` in ``results/explain/{scenario}/{algorithm}/``:

* ``insdel.parquet`` — one row per cluster × mode (``in_cluster``/``out_cluster``/``orchestrator``):
  ``cluster``, ``mode``, ``n_clients``, ``pool_size``, ``n_samples``, ``accuracy``,
  ``{insertion,deletion}_{mean,median,var,std,p05,p10,p25,p50,p75,p90,p95}``, ``reason``
  (non-null, with null statistics, where the pool is empty);
* ``samples.parquet`` — one row per scored image: ``cluster``, ``mode``, ``client`` (−1 =
  orchestrator), ``sample_idx`` (row in that client's / the orchestrator's test set), ``data_idx``
  (dataset Parquet ``idx``), ``label``, ``pred``, ``target_probability``, ``insertion_auc``, ``deletion_auc``;
* ``summary.parquet`` — per mode, the mean over clusters of the per-cluster mean AUC (000 footnote 12);
* ``saliency.npz`` — the saliency-grid data: ``clients``, ``clusters``, ``rows``, ``labels``,
  ``preds`` (k,), ``images`` (k, C, H, W) float32 in [0, 1], ``maps`` (k, H, W) raw attribution,
  ``attribution`` and ``reason`` strings.

Every Parquet file carries the settings (and ``status``/``reason``) as schema metadata.
"""
from .attribution import ATTRIBUTIONS, attribute, conv_layer_names, display_map, make_attributor
from .framework import (MODES, STATISTICS, ExplainSettings, auc_statistics, draw_sample, evaluation_pool,
                        explain_run, run_summary, sample_generator, write_empty_explain)
from .insdel import InsDelCurves, insertion_deletion, insertion_deletion_per_image, make_substrate

__all__ = [
    "ATTRIBUTIONS", "MODES", "STATISTICS", "ExplainSettings", "InsDelCurves", "attribute", "auc_statistics",
    "conv_layer_names", "display_map", "draw_sample", "evaluation_pool", "explain_run", "insertion_deletion",
    "insertion_deletion_per_image", "make_attributor", "make_substrate", "run_summary", "sample_generator",
    "write_empty_explain",
]
