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
import importlib
from typing import Any

# Where each public name lives. Imported on first use (PEP 562), so that ``cflcore.explain.tables``, the torch-free
# module the report reads, can be imported without the torch-based stage.
_HOMES = {
    "attribution": ("ATTRIBUTIONS", "attribute", "conv_layer_names", "make_attributor"),
    "framework": ("ExplainSettings", "auc_statistics", "baseline_generator", "draw_sample", "evaluation_pool",
                  "explain_run", "randomised_model", "sample_generator", "spearman_rows", "target_classes",
                  "write_empty_explain"),
    "insdel": ("InsDelCurves", "insertion_deletion", "insertion_deletion_per_image", "make_substrate"),
    "tables": ("BASELINES", "MODES", "SCORED", "STATISTICS", "TARGETS", "display_map", "run_summary"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME_OF[name]}", __name__), name)
