"""A paper is one module (cflcore.report.papers): a toy paper, written in this one file with its claim, shows in the
report's paper check (``paper_claims.csv`` and the front page) once a study names it in ``report.paper_checks``; no
other file of the project is touched to add it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cflcore.errors import ConfigError
from cflcore.evaluate import evaluate_run
from cflcore.paper_sources import declared_papers
from cflcore.registry import registered_in_source
from cflcore.report import build_report
from cflcore.report.cross_paper import cross_analysis, cross_section_rst
from cflcore.report.papers.base import (CLAIMS, PAPERS, ClaimData, ClaimResult, Paper, SettingHome, check_claims, claim,
                                        register_paper, result, select)
from test_evaluate import write_synthetic_run

TOY = "toy"
TOY_HOME = "toyhome"


def register_toy(monkeypatch: pytest.MonkeyPatch) -> type[Paper]:
    """The toy paper's module, as a new file of cflcore/report/papers/ would hold it (registered for this test only)."""
    PAPERS.names()  # the shipped papers first: the copy below keeps them, and the toy leaves with the test
    monkeypatch.setattr(PAPERS, "_items", dict(PAPERS._items))
    monkeypatch.setitem(CLAIMS, TOY, [])

    @claim(TOY, "toy-runs")
    def toy_method_ran(data: ClaimData) -> ClaimResult:
        runs = select(data.runs, "ocfl-km")
        return result("toy-runs", TOY, "Toy §1", "The toy method runs on every seed", f"{len(runs)} runs", len(runs) > 0)

    @register_paper("toy")
    class Toy(Paper):
        """A toy paper: one claim, no tables of its own."""

        title = "A toy paper"
        homes = {TOY_HOME: SettingHome("the toy's own settings", methods=("ocfl-km",), accuracy="pf1", rand=True)}

    return Toy


def toy_report(tmp_path: Path, checks: list[str]) -> Path:
    specs = []
    for seed in (0, 1):
        spec, _ = write_synthetic_run(tmp_path / "results", seed=seed, algorithm="ocfl-km", rounds=4)
        evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir)
        specs.append(spec)
    out = tmp_path / "report"
    build_report(specs, out, context={"report": {"paper_checks": checks}})
    return out


def test_a_toy_paper_in_one_file_shows_in_the_report(tmp_path, monkeypatch):
    toy = register_toy(monkeypatch)
    assert registered_in_source(Path(__file__), "register_paper") == [TOY]  # its decorator is its declaration
    assert PAPERS.get(TOY) is toy and toy.registered_name == TOY and [fn.claim_id for fn in toy.claims()] == ["toy-runs"]
    out = toy_report(tmp_path, [TOY])
    rows = pd.read_csv(out / "tables" / "paper_claims.csv")
    assert rows[["claim_id", "paper", "ours", "holds"]].to_dict("records") == [
        {"claim_id": "toy-runs", "paper": TOY, "ours": "2 runs", "holds": "holds"}]
    front = (out / "front_page.rst").read_text()
    assert f"Paper check ({TOY}): its claims against this study" in front and "The toy method runs" in front


def test_a_paper_the_study_does_not_check_writes_no_rows_and_an_unknown_one_is_named(tmp_path, monkeypatch):
    register_toy(monkeypatch)
    out = toy_report(tmp_path, [])
    assert pd.read_csv(out / "tables" / "paper_claims.csv").empty
    assert f"Paper check ({TOY})" not in (out / "front_page.rst").read_text()
    with pytest.raises(ConfigError, match=r"report\.paper_checks: unknown paper 'toys'; known: .*\btoy\b"):
        check_claims(["toys"], ClaimData(pd.DataFrame()))


def test_the_papers_validation_reads_from_source_are_the_registered_ones():
    """cflcore.paper_sources reads the ids from the decorators (config validation imports no report): the same ids
    the registry finds by importing the modules."""
    assert declared_papers() == tuple(PAPERS.names()) == ("000", "002", "004", "dynamics", "heterogeneity", "home")


def test_a_toy_papers_home_shows_in_the_cross_paper_table_as_it_declares(monkeypatch):
    """The cross-paper comparison reads a home's facts from the paper that declares it (Paper.homes): the toy's home
    scores clients by PF1, reports Rand and is home to ocfl-km; no module outside the toy's names them."""
    register_toy(monkeypatch)
    summary = pd.DataFrame({"split_base": ["a"] * 4 + ["b"] * 2, "algorithm": ["ocfl-km"] * 2 + ["bnc"] * 2 + ["ocfl-km"] * 2,
                            "seed": [0, 1] * 3, "ari": [0.8, 0.9, 0.1, 0.2, 0.3, 0.3], "rand": [0.85, 0.95, 0.5, 0.5, 0.6, 0.6],
                            "pf1": [0.7, 0.8, 0.6, 0.6, 0.5, 0.5], "local_acc": [0.5] * 6})
    block = {"settings": {"a": {"home": TOY_HOME, "label": "toy a"}, "b": {"home": "leahcimali", "label": "b"}}}
    analysis = cross_analysis(summary, block, ["ocfl-km", "bnc"])
    tidy = analysis["tidy"].set_index(["method", "split"])
    assert tidy.loc[("ocfl-km", "a"), "accuracy_metric"] == "pf1" and tidy.loc[("ocfl-km", "b"), "accuracy_metric"] == "local_acc"
    section = cross_section_rst(analysis)
    assert "Rand 0.90" in section and "PF1 0.75" in section  # the toy's home reports Rand and scores by PF1
    assert f"Rand too on 004's and {TOY_HOME}'s settings" in section and f"PF1 on 000's and 002's and {TOY_HOME}'s" in section
    assert f"{TOY_HOME}'s method (ocfl-km): mean ARI 0.85 on its own settings, 0.30 on the others'" in " ".join(analysis["lines"])
    monkeypatch.setattr(PAPERS.get(TOY), "homes", {})  # a mutant: the toy declares no home; its setting is unknown
    with pytest.raises(KeyError):
        cross_analysis(summary, block, ["ocfl-km", "bnc"])
