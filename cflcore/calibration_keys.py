"""The keys of a study's ``calibration`` block (issue 68 item 3), written once: read by its validation
(cflcore/config/calibration.py), the tuning step and the report (cflcore/report/calibration.py), which sit on
different floors. Constants only, importing nothing."""

CALIBRATION_KEY = "calibration"
AUTHORS, TUNE = "authors", "tune"
TUNING_KEY = "tuning_variants"
"""Derived by validation, never given: ``{tuning variant: {"variant": its study variant, "values": {param: value},
"cannot_split": {split: why its parameters rule that setting out}}}``,
in the grid's order (the first value of each list first, the last key varying fastest)."""
CHOSEN_KEY = "chosen"
"""Written by ``snakemake tune`` into the calibrated file: ``{variant: {param: value}}``."""
RECORD_KEY = "record"
"""Written by ``snakemake tune`` beside :data:`CHOSEN_KEY`: the commit, metric, seeds, rule and every combination's
score or why it could not win."""
CALIBRATED_DIR = "calibrated"
"""Where ``snakemake tune`` writes a study's calibrated config: this folder beside the study's config file, under the
same name (config/calibrated/heterogeneity-offline.yaml)."""
