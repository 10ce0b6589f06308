"""Explainability stage (000 §5, docs/architecture.md §9): captum attributions, insertion/deletion AUC, Algorithm 2.

Outputs of :func:`explain_run` in ``results/explain/{scenario}/{algorithm}/``:

* ``insdel.parquet`` — one row per cluster × mode (``in_cluster``/``out_cluster``/``orchestrator``):
  ``cluster``, ``mode``, ``n_clients``, ``pool_size``, ``n_samples``, ``accuracy``,
  ``{insertion,deletion,insertion_random,deletion_random}_{mean,median,var,std,p05,p10,p25,p50,p75,p90,p95}``
  (``*_random``: the same images scored with a seeded random pixel order, the baseline),
  ``sanity_spearman_{mean,median}``, ``sanity_passed``, ``sanity_threshold`` (model-randomisation check,
  Adebayo et al. 2018), ``reason`` (non-null, with null statistics, where the pool is empty);
* ``samples.parquet`` — one row per scored image: ``cluster``, ``mode``, ``client`` (−1 =
  orchestrator), ``sample_idx`` (row in that client's / the orchestrator's test set), ``data_idx``
  (dataset Parquet ``idx``), ``label``, ``pred``, ``target_probability``, ``insertion_auc``, ``deletion_auc``, ``insertion_random_auc``,
  ``deletion_random_auc``, ``sanity_spearman``;
* ``summary.parquet`` — per mode, the mean over clusters of the per-cluster mean AUC (000 footnote 12),
  for the attribution and for the random baseline;
* ``saliency.npz`` — the saliency-grid data: ``clients``, ``clusters``, ``rows``, ``labels``,
  ``preds`` (k,), ``images`` (k, C, H, W) float32 in [0, 1], ``maps`` (k, H, W) raw attribution,
  ``attribution`` and ``reason`` strings.

Every Parquet file carries the settings (and ``status``/``reason``) as schema metadata.
"""
from .attribution import ATTRIBUTIONS, attribute, conv_layer_names, display_map, make_attributor
from .framework import (BASELINES, MODES, SCORED, STATISTICS, TARGETS, ExplainSettings, auc_statistics,
                        baseline_generator, draw_sample, evaluation_pool, explain_run, randomised_model, run_summary,
                        sample_generator, spearman_rows, target_classes, write_empty_explain)
from .insdel import InsDelCurves, insertion_deletion, insertion_deletion_per_image, make_substrate

__all__ = [
    "ATTRIBUTIONS", "BASELINES", "MODES", "SCORED", "STATISTICS", "TARGETS", "ExplainSettings", "InsDelCurves",
    "attribute", "auc_statistics", "baseline_generator", "conv_layer_names", "display_map", "draw_sample",
    "evaluation_pool", "explain_run", "insertion_deletion", "insertion_deletion_per_image", "make_attributor",
    "make_substrate", "randomised_model", "run_summary", "sample_generator", "spearman_rows", "target_classes",
    "write_empty_explain",
]
