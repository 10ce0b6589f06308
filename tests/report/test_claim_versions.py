"""Claims fixed before the data (cflcore.report.papers.versions): every claim's reading has a version whose committed
hash matches the claim's code, so a reading changed without a new version fails here; the report keeps an earlier
reading's verdict beside the current one with the commit that changed it."""
import importlib
import sys
import textwrap

import pandas as pd
import pytest

from cflcore.report.papers import base as cl
from cflcore.report.papers import heterogeneity as het
from cflcore.report.papers import versions
from cflcore.report.statistics import rules

CLAIM_FNS = [fn for name in cl.PAPERS.names() for fn in cl.PAPERS.get(name).claims()]


@pytest.mark.parametrize("fn", CLAIM_FNS, ids=lambda fn: fn.__name__)
def test_every_claims_reading_matches_its_recorded_version(fn):
    readings = versions.history(fn)
    assert [r.version for r in readings] == list(range(1, fn.claim_version + 1)), \
        f"{fn.__name__}: versions.json lists {[r.version for r in readings]}, the claim is at v{fn.claim_version}"
    assert all(r.commit and r.reading for r in readings), fn.__name__
    now = readings[-1]
    assert now.source_sha256 == versions.reading_hash(fn), (
        f"{fn.__name__}'s reading changed without a new version: bump @claim(..., version={fn.claim_version + 1}) and "
        f"add {versions.entry_for(fn)} (with its commit and reading) to {versions.RECORD.name}")
    for v, old in fn.earlier_readings.items():  # an earlier reading kept as code cannot drift either
        assert readings[v - 1].source_sha256 == versions.reading_hash(old), (fn.__name__, v)
    assert now.rule in rules.IN_FORCE, (  # the decision rule is part of the reading (issue 67)
        f"{fn.__name__} is read under the rule {rules.CURRENT!r} (or in stages, {rules.SEED_STAGES!r}), its recorded "
        f"v{now.version} under {now.rule!r}: a change of rule is a new version")
    assert all(r.rule in rules.RULES for r in readings), fn.__name__


def test_the_hash_reads_code_and_constants_not_comments_or_docstrings(tmp_path, monkeypatch):
    body = '''
        LEVEL = 0.9

        def _helper(x):
            return x >= LEVEL

        def my_claim(data):
            """Docstring."""
            return _helper(data)  # a comment
        '''
    monkeypatch.syspath_prepend(str(tmp_path))

    def hash_of(source: str, name: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        module = importlib.import_module(name)
        try:
            return versions.reading_hash(module.my_claim)
        finally:
            del sys.modules[name]

    base = hash_of(body, "claim_a")
    assert hash_of(body.replace("Docstring.", "Another docstring.").replace("a comment", "other"), "claim_b") == base
    assert hash_of(body.replace("return x >= LEVEL", "return x > LEVEL"), "claim_c") != base  # a helper's code
    assert hash_of(body.replace("LEVEL = 0.9", "LEVEL = 0.8"), "claim_d") != base  # a constant it reads
    assert hash_of(body.replace("return _helper(data)", "return not _helper(data)"), "claim_e") != base


def test_an_earlier_reading_is_shown_beside_the_current_one_with_the_commit_that_changed_it():
    runs = pd.DataFrame([{"dataset": "d", "clients": 12, "seed": s, "algorithm": a, "algorithm_base": a,
                          "split": het.LABEL_SWAP, "split_base": het.LABEL_SWAP, "ari": ari, "local_acc": acc}
                         for s in range(6) for a, ari, acc in (("bnc", 0.0, 0.7), ("ocfl-km", 1.0, 0.9))])
    rows = cl.check_claims(["heterogeneity"], cl.ClaimData(runs)).set_index("claim_id")
    row = rows.loc["het-label-swap-fedavg"]
    assert row["version"].startswith("v4 (")
    changed = {r.version: r.commit for r in versions.history(het.fedavg_below_group_finders_under_label_swap)}
    assert f"v3 (from {changed[3]}, changed at {changed[4]}" in row["earlier"]  # the same code, the earlier rule
    assert f"v2 (from {changed[2]}, changed at {changed[3]}" in row["earlier"]
    assert f"v1 (from {changed[1]}, changed at {changed[2]}" in row["earlier"]
    quantity = rows.loc["het-quantity-control"]
    assert quantity["version"].startswith("v3") and "v1 (" in quantity["earlier"] \
        and rules.DIGIT_FLOOR in quantity["earlier"]


def test_a_change_of_rule_keeps_the_earlier_verdict_beside_the_new_one():
    """Issue 67: two seeds at ARI 1.00 held "≥ 0.9" under the printed-digit floor; under the share rule they cannot
    (80 % of seeds needs 17 at 1.00 to hold), and the row keeps the earlier verdict with its rule."""
    runs = pd.DataFrame([{"dataset": "d", "clients": 10, "seed": s, "algorithm": "scl", "algorithm_base": "scl",
                          "split": het.ROTATED_HALF, "split_base": het.ROTATED_HALF, "ari": 1.0, "n_clusters": 2.0}
                         for s in range(2)])
    row = cl.check_claims(["heterogeneity"], cl.ClaimData(runs)).set_index("claim_id").loc["het-scl-rotated-half"]
    assert row["holds"] == "inconclusive" and row["lean"] == "toward" and "80%" in row["claim"]
    assert row["earlier"].startswith("v2 (") and row["earlier"].endswith("holds (lean toward)")  # v2, then v1


def test_every_claim_a_study_reads_in_stages_records_the_staged_rule():
    """A claim a committed config reads in stages (report.seed_stages) is read under rules.SEED_STAGES, and its current
    version says so; its earlier versions stay beside it (the IFCA home check's 18-seed studies: v2, one stage)."""
    from pathlib import Path

    from cflcore.config import read_config_file
    from conftest import REPO

    by_id = {fn.claim_id: fn for fn in CLAIM_FNS}
    staged = {claim_id for path in sorted((Path(REPO) / "config").glob("*.yaml")) if path.name != "schema.yaml"
              for claim_id in ((read_config_file(path).get("report") or {}).get("seed_stages") or {})}
    assert "home-ifca-rotations" in staged
    for claim_id in staged:
        assert versions.history(by_id[claim_id])[-1].rule == rules.SEED_STAGES, claim_id


def test_a_version_must_come_after_its_earlier_readings():
    with pytest.raises(ValueError, match="earlier versions"):
        cl.claim("x", "x-1", version=2, earlier={2: lambda data: None})


def test_the_hash_follows_a_helper_into_the_papers_private_module(tmp_path, monkeypatch):
    """A paper's code is its module and its private helper modules (``_<module>_*.py``): a helper moved there keeps
    the claim's hash, and a change of the moved helper changes it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    helper = "LEVEL = 0.9\n\n\ndef _helper(x):\n    return x >= LEVEL\n"
    claim = "def my_claim(data):\n    return _helper(data)\n"

    def hash_of(name: str, module: str, helpers: str = "") -> str:
        (tmp_path / f"{name}.py").write_text(module)
        if helpers:
            (tmp_path / f"_{name}_measures.py").write_text(helpers)
        try:
            return versions.reading_hash(importlib.import_module(name).my_claim)
        finally:
            for mod in (name, f"_{name}_measures"):
                sys.modules.pop(mod, None)

    inside = hash_of("claim_h", helper + "\n\n" + claim)
    moved = f"from _claim_i_measures import LEVEL, _helper  # noqa: F401\n\n\n{claim}"
    assert hash_of("claim_i", moved, helper) == inside
    assert hash_of("claim_j", moved.replace("claim_i", "claim_j"), helper.replace("0.9", "0.8")) != inside
