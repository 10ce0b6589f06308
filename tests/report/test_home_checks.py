"""The cross-paper table's home checks (``report.cross_paper.home_checks``; cflcore/report/home_checks.py): each
method's home claim's verdict, read from its home-check study's ``paper_claims.csv`` at report time, in the column
``home_check``, and † beside every method whose home check does not hold."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cflcore.report import cross_paper as cp
from cflcore.report import home_checks as hc
from cflcore.report.papers.base import CLAIM_COLUMNS, home_claims
from test_cross_paper import SETTINGS, planted

REPO = Path(__file__).resolve().parents[2]
METHODS = ["home", "mid", "weak"]
ALGORITHMS = {"home": {"method": "ocfl"}, "mid": {"method": "ifca"}, "weak": {"method": "scl"}}
"""planted()'s methods as variants: OCFL (checked in its seed's study), IFCA and SCL (home claims of their own)."""
BLOCK = {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}}


def claims_csv(path: Path, verdicts: dict[str, tuple[str, str]]) -> str:
    """A home-check study's ``paper_claims.csv``: one row per claim id with its verdict and lean."""
    rows = [{**dict.fromkeys(CLAIM_COLUMNS, ""), "claim_id": claim_id, "paper": "x", "holds": holds, "lean": lean}
            for claim_id, (holds, lean) in verdicts.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(CLAIM_COLUMNS)).to_csv(path, index=False)
    return str(path)


def analysis_of(csv: str | None, listed: bool = True) -> dict:
    """The cross analysis of planted() with IFCA's and SCL's claims read from ``csv`` (None: a path never written)."""
    files = [csv] if csv else ["absent/report/tables/paper_claims.csv"]
    listing = {"home_checks": {"home": [], "mid": files, "weak": files}} if listed else {}
    context = {"algorithms": ALGORITHMS, **listing}
    return cp.cross_analysis(planted(), BLOCK, METHODS, home_checks=hc.home_check_verdicts(context, METHODS))


def test_the_home_paper_declares_the_claims_that_check_ifca_scl_and_fesem():
    claims = home_claims()
    assert {m: claims[m] for m in ("ifca", "scl", "fesem")} == {
        "ifca": "home-ifca-rotations", "scl": "home-scl-rotated-half", "fesem": "home-fesem-beats-fedavg"}
    assert "ocfl" not in claims and "bcl" not in claims


def test_a_verdict_on_file_fills_the_column_and_marks_a_method_whose_check_does_not_hold(tmp_path):
    ifca, scl = home_claims()["ifca"], home_claims()["scl"]
    csv = claims_csv(tmp_path / "paper_claims.csv", {ifca: ("holds", "toward"), scl: ("inconclusive", "against")})
    analysis = analysis_of(csv)
    tidy = analysis["tidy"]
    column = tidy.drop_duplicates("method").set_index("method")["home_check"].to_dict()
    assert column == {"home": hc.SEED_STUDY, "mid": "holds", "weak": "inconclusive (lean against)"}
    wide = cp.wide_table(tidy)
    assert wide["method"].tolist() == ["home", "mid", f"weak {hc.NOT_HOLDING_MARK}"]
    lines = analysis["lines"]
    assert lines[-1] == f"Average rank by ARI over 3 settings (1 = best): home 1.0, mid 2.0, weak {hc.NOT_HOLDING_MARK} 3.0."
    assert any(f"ARI ≤ {cp.FAIL_ARI} somewhere: weak {hc.NOT_HOLDING_MARK}" in line for line in lines)
    rst = cp.cross_section_rst(analysis)
    assert hc.LEGEND in rst and f"weak {hc.NOT_HOLDING_MARK}" in rst
    # the new column comes last: the existing columns keep their order and their values
    assert list(tidy.columns) == cp.COLUMNS and cp.COLUMNS[-1] == "home_check"
    plain = cp.cross_table(planted(), SETTINGS, METHODS)
    pd.testing.assert_frame_equal(tidy.drop(columns="home_check"), plain.drop(columns="home_check"))


def test_a_contradicted_home_check_marks_the_method(tmp_path):
    csv = claims_csv(tmp_path / "paper_claims.csv", {home_claims()["ifca"]: ("contradicted", "against"),
                                                     home_claims()["scl"]: ("holds", "toward")})
    tidy = analysis_of(csv)["tidy"]
    assert set(tidy.loc[tidy["method"] == "mid", "home_check"]) == {"contradicted"}
    assert cp.wide_table(tidy, oracle=["mid"])["method"].tolist() == ["home", f"mid (oracle) {hc.NOT_HOLDING_MARK}",
                                                                      "weak"]


def test_an_absent_verdict_file_reads_not_run_and_marks_the_method(tmp_path):
    tidy = analysis_of(None)["tidy"]
    column = tidy.drop_duplicates("method").set_index("method")["home_check"].to_dict()
    assert column == {"home": hc.SEED_STUDY, "mid": hc.NOT_RUN, "weak": hc.NOT_RUN}
    ring = hc.NOT_RUN_MARK
    assert cp.wide_table(tidy)["method"].tolist() == ["home", f"mid {ring}", f"weak {ring}"]
    # a file that lacks the claim (its study checks another paper) is not run either
    other = claims_csv(tmp_path / "paper_claims.csv", {"some-other-claim": ("holds", "toward")})
    assert set(analysis_of(other)["tidy"]["home_check"]) == {hc.SEED_STUDY, hc.NOT_RUN}


def test_a_study_that_lists_no_home_checks_has_no_column_values_no_marks_and_no_legend():
    analysis = analysis_of(None, listed=False)
    assert set(analysis["tidy"]["home_check"]) == {""}
    assert cp.wide_table(analysis["tidy"])["method"].tolist() == METHODS
    assert hc.LEGEND not in cp.cross_section_rst(analysis)


def test_a_method_without_a_declared_home_check_says_so_and_is_not_marked():
    verdicts = hc.home_check_verdicts({"algorithms": {"b": {"method": "bcl"}}, "home_checks": {"b": []}}, ["b"])
    assert verdicts == {"b": hc.NO_HOME_CHECK} and not hc.marked(verdicts["b"])
    assert not hc.marked("holds") and not hc.marked(hc.SEED_STUDY) and not hc.marked("")
    assert hc.marked(hc.NOT_RUN) and hc.marked("inconclusive (lean against)") and hc.marked("contradicted")


def test_each_kind_of_unheld_home_check_has_its_own_mark():
    """Fails at home (†), not testable here (‡) and not run for this report (°) are three different statements: a
    home check that was not run says nothing about the method, and is not marked as failing."""
    assert hc.mark_of("contradicted") == hc.mark_of("inconclusive (lean against)") == hc.NOT_HOLDING_MARK
    assert hc.mark_of(f"inconclusive (lean against); {hc.NOT_TESTABLE}: lr 0.0003") == hc.NOT_TESTABLE_MARK
    assert hc.mark_of(hc.NOT_RUN) == hc.NOT_RUN_MARK
    assert len({hc.NOT_HOLDING_MARK, hc.NOT_TESTABLE_MARK, hc.NOT_RUN_MARK}) == 3
    assert all(m in hc.LEGEND for m in (hc.NOT_HOLDING_MARK, hc.NOT_TESTABLE_MARK, hc.NOT_RUN_MARK))


def _raw_config(home_checks: list[str]) -> dict:
    import cflcore.config as cc

    cfg = cc.read_config_file(REPO / "config" / "config.yaml")
    split = cfg["study"]["splits"][0]
    cc.deep_update(cfg, {"report": {"cross_paper": {"settings": {split: {"home": "000"}}, "home_checks": home_checks}}})
    return cfg


def test_validation_finds_each_home_check_studys_claims_file_by_method(monkeypatch):
    """The shipped cross-paper study: IFCA's, SCL's and FeSEM's verdicts lie in their home studies' reports."""
    import cflcore.config as cc
    from cflcore.report.front_context import front_page_context

    monkeypatch.chdir(REPO)
    cfg = cc.load_config("config/config.yaml", "config/cross-paper-offline.yaml")
    files = front_page_context(cfg)["home_checks"]
    assert files["ifca-oracle"] == ["results/home-offline/report/tables/paper_claims.csv"]
    assert files["scl"] == ["results/home-scl-offline/report/tables/paper_claims.csv"]
    assert files["fesem-oracle"] == ["results/home-fesem-offline/report/tables/paper_claims.csv"]
    assert files["ocfl-km"] == [] and files["bcl"] == []
    assert "home_checks" not in front_page_context(cc.load_config("config/config.yaml"))  # not listed: not there


def test_a_missing_home_check_file_is_refused_naming_the_field(monkeypatch):
    import cflcore.config as cc

    monkeypatch.chdir(REPO)
    with pytest.raises(cc.ConfigError, match=r"^report\.cross_paper\.home_checks\[1\]: 'config/no-such-study\.yaml' "
                                             r"is not a file; allowed: the config file of a home-check study"):
        cc.validate_config(_raw_config(["config/home-offline.yaml", "config/no-such-study.yaml"]), plugins=False)
    cc.validate_config(_raw_config(["config/home-offline.yaml"]), plugins=False)  # the same, with files that exist


def test_a_home_check_study_that_lists_home_checks_itself_is_refused(tmp_path, monkeypatch):
    import yaml

    import cflcore.config as cc

    monkeypatch.chdir(REPO)
    home = cc.read_config_file(REPO / "config" / "home-offline.yaml")
    home.setdefault("report", {})["cross_paper"] = {"settings": {}, "home_checks": ["config/home-offline.yaml"]}
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump(home))
    with pytest.raises(cc.ConfigError, match=r"^report\.cross_paper\.home_checks\[0\]: .*loop\.yaml' lists "
                                             r"report\.cross_paper\.home_checks itself"):
        cc.validate_config(_raw_config([str(tmp_path / "loop.yaml")]), plugins=False)


def test_a_home_check_file_on_disk_is_an_input_of_the_part_that_reads_it(workflow_dir):
    """So a re-run home study re-makes the table; one not yet written is no input (the part reads "not run")."""
    from test_workflow import run_sm

    written = "results/home-offline/report/tables/paper_claims.csv"
    claims_csv(Path(workflow_dir) / written, {home_claims()["ifca"]: ("holds", "toward")})
    out = run_sm(workflow_dir, "-n", "--cores", "2", "--configfile", "config/cross-paper-offline.yaml").stdout
    rule = out[out.index("rule report_tables:"):]
    inputs = next(line for line in rule.splitlines() if line.strip().startswith("input:"))
    assert written in inputs and "results/home-scl-offline/" not in inputs
    figures = out[out.index("rule report_figures:"):]
    assert written not in next(line for line in figures.splitlines() if line.strip().startswith("input:"))


def test_the_heatmap_labels_a_method_whose_home_check_does_not_hold(tmp_path, monkeypatch):
    import matplotlib.axes

    tidy = analysis_of(None)["tidy"]
    rows = []
    real_ticks = matplotlib.axes.Axes.set_yticks
    monkeypatch.setattr(matplotlib.axes.Axes, "set_yticks",
                        lambda ax, t, labels=None, **kw: rows.append(list(labels)) or real_ticks(ax, t, labels, **kw))
    cp.draw_cross_heatmap(tidy, tmp_path / "heat", oracle=["mid"])
    assert rows[0] == ["home", f"mid (oracle) {hc.NOT_RUN_MARK}", f"weak {hc.NOT_RUN_MARK}"]


def test_an_edited_home_check_config_is_validated_again(tmp_path, monkeypatch):
    """Validation reads the listed files (their results_dir and methods), so the validation cache's key covers them."""
    import cflcore.config as cc

    monkeypatch.chdir(REPO)
    home = tmp_path / "home.yaml"
    home.write_text("results_dir: results/one\nalgorithms:\n  ifca-home: {method: ifca}\n")
    cfg = _raw_config([str(home)])
    before = cc.validation_key(cfg)
    home.write_text("results_dir: results/two\nalgorithms:\n  ifca-home: {method: ifca}\n")
    assert cc.validation_key(cfg) != before


@pytest.mark.parametrize("mark,symbol", [("not testable here: neither model leaves ln 10", hc.NOT_TESTABLE_MARK),
                                         ("fails at home", hc.NOT_HOLDING_MARK), ("", hc.NOT_HOLDING_MARK)])
def test_the_home_studys_mark_splits_the_dagger(tmp_path, mark, symbol):
    """Issue 68: the home-check study's home table writes each claim's mark beside its verdict; the cross table reads
    it: "not testable here" gives ‡ (not a verdict on the method), "fails at home" (or no mark written) gives †."""
    from cflcore.report.papers import home
    from cflcore.report.papers._home_rows import HOME_COLUMNS

    scl = home_claims()["scl"]
    csv = claims_csv(tmp_path / "tables" / "paper_claims.csv", {scl: ("inconclusive", "against")})
    row = dict.fromkeys(HOME_COLUMNS, "")
    row.update(method="SCL", verdict=f"inconclusive (lean against; {scl})", mark=mark)
    pd.DataFrame([row]).to_csv(tmp_path / "tables" / f"{home.Home.home_marks_table}.csv", index=False)
    tidy = analysis_of(csv)["tidy"]
    assert tidy.loc[tidy["method"] == "weak", "home_check"].iloc[0] == "inconclusive (lean against)" + (
        f"; {mark}" if mark else "")
    assert cp.wide_table(tidy)["method"].tolist()[-1] == f"weak {symbol}"
