"""No module of cflcore/report/ outside papers/ names a paper (issue 60, docs/architecture.md §10): a paper's id, its
module and one study's split names live in the paper's own module (cflcore/report/papers/<paper>.py); the rest of the
report reaches a paper through the registry and the contract (papers/base.py).

Read with :mod:`ast`, so docstrings and comments are free to cite a source ("000 Table 3"): what is refused is a string
literal (not a docstring) that *is* a seed's id or a config's split name (a branch, a dict key, a lookup by name), a
comparison with any registered paper's id (the ids ``home`` and ``heterogeneity`` are words too, a column may be called
``home``), an import of a paper's module, and a text the report prints that cites a seed (a caption, a title, a
departure: "(000 Fig. 2)"), which the paper's module gives (``output_titles``, ``output_captions``, its departures)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from cflcore.paper_sources import PAPER_FOLDER, declared_papers
from cflcore.registry import declared_names

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "cflcore" / "report"
CONTRACT = {"base", "__init__"}
"""What of papers/ the rest of the report may import: the contract and the package."""
SEED_ID = re.compile(r"\d{3}")
"""A seed's id (the papers are numbered: 000, 001, 002, 004), registered or not (001 is read with 000)."""
CITED_SEED = re.compile(r"(?<![\w.,])0\d\d(?!\w)")
"""A seed's id inside a text ("… (000 Fig. 2)", "002's"), not a number's digits ("0.143", "1,300")."""


def paper_modules() -> set[str]:
    return {p.stem for p in PAPER_FOLDER.glob("*.py")} - CONTRACT


def config_split_names() -> set[str]:
    """Every split the shipped configs name, less the names that are also a split generator's (``majority``: a
    generator a module may name)."""
    names: set[str] = set()
    for path in (REPO / "config").glob("*.yaml"):
        names |= set((yaml.safe_load(path.read_text()) or {}).get("splits") or {})
    return names - set(declared_names("split generator"))


def _docstrings(tree: ast.AST) -> set[int]:
    """A module's, class's or function's docstring, and an attribute's (a string statement after an assignment)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def violations(source: str, module: str) -> list[str]:
    """What ``source`` (the module ``cflcore.report.<module>``) names of a paper: one line each."""
    tree = ast.parse(source)
    docs, ids, splits, modules = _docstrings(tree), set(declared_papers()), config_split_names(), paper_modules()
    package = ["cflcore", "report", *module.split(".")[:-1]]
    compared = {id(c) for node in ast.walk(tree) if isinstance(node, ast.Compare)
                for c in (node.left, *node.comparators)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if SEED_ID.fullmatch(node.value) or (node.value in ids and id(node) in compared):
                found.append(f"line {node.lineno}: paper id {node.value!r}")
            elif node.value in splits:
                found.append(f"line {node.lineno}: a config's split name {node.value!r}")
            elif any(re.search(rf"\bpapers[./]{m}\b", node.value) for m in modules):
                found.append(f"line {node.lineno}: a paper module in {node.value!r}")
            elif CITED_SEED.search(node.value):
                found.append(f"line {node.lineno}: a text citing a paper: {node.value!r}")
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names = [f"{target}.{a.name}" for a in node.names] + [target]
            for name in names:
                parts = name.split(".")
                if "papers" in parts[:-1] and parts[parts.index("papers") + 1] in modules:
                    found.append(f"line {node.lineno}: imports the paper module {name}")
                    break
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: imports the paper module {a.name}" for a in node.names
                      if any(a.name.endswith(f"papers.{m}") for m in modules)]
    return found


def report_modules() -> dict[str, Path]:
    """cflcore/report/'s modules outside papers/: dotted name under cflcore.report -> path."""
    return {".".join(p.relative_to(REPORT).with_suffix("").parts): p for p in sorted(REPORT.rglob("*.py"))
            if "papers" not in p.relative_to(REPORT).parts}


def test_no_module_of_the_report_outside_papers_names_a_paper():
    found = {name: v for name, path in report_modules().items() if (v := violations(path.read_text(), name))}
    assert not found, f"paper names outside cflcore/report/papers/ (move them into the paper's module): {found}"


def test_the_check_catches_an_injected_paper_id_module_or_split_name():
    """Mutants of a real module: each injected line is one violation the check names."""
    source = (REPORT / "cross_paper.py").read_text()
    assert violations(source, "cross_paper") == []
    mutants = {
        'ACCURACY = {"004": "local_bacc"}\n': "paper id '004'",
        'SEED = "001"\n': "paper id '001'",
        'CHECKED = [p for p in ("a",) if p == "heterogeneity"]\n': "paper id 'heterogeneity'",
        "from .papers.louvain_002 import FIG3\n": "imports the paper module cflcore.report.papers.louvain_002",
        "from .papers import ocfl_000\n": "imports the paper module cflcore.report.papers.ocfl_000",
        "import cflcore.report.papers.home\n": "imports the paper module cflcore.report.papers.home",
        'ROTATED = "rotation-half"\n': "a config's split name 'rotation-half'",
        'WHERE = "cflcore.report.papers.fedgwc_004"\n': "a paper module in",
        'TITLE = "PF1 / GF1 learning gap (000 Fig. 2)"\n': "a text citing a paper",
        'CAPTION = f"{len(SEED)} cells of 004\'s Tables 1, 3-9"\n': "a text citing a paper",
    }
    for line, what in mutants.items():
        found = violations(source + line, "cross_paper")
        assert len(found) == 1 and what in found[0], (line, found)
    assert violations('"""The 000 check, cited in prose: "002" in a docstring."""\n', "x") == []
    assert violations('X = 1\n"""X: as in 000 Fig. 2 (an attribute\'s docstring)."""\nY = "Δ +0.143; 1,300 px"\n', "x") == []


def test_the_titles_and_captions_read_from_the_papers_source_are_their_classes():
    """The catalogue and the writers read a paper's output_titles and output_captions from its source (never importing
    it): what they read is what each registered class holds, and every kind the titles name is one the catalogue has."""
    from cflcore.paper_sources import declared_output_captions, declared_output_titles
    from cflcore.report.catalogue import OUTPUTS
    from cflcore.report.papers.base import PAPERS

    titles, captions = {}, {}
    for name in PAPERS.names():
        titles.update(PAPERS.get(name).output_titles)
        captions.update(PAPERS.get(name).output_captions)
    assert titles and declared_output_titles() == titles
    assert captions and declared_output_captions() == captions
    assert set(titles) <= set(OUTPUTS) and all(OUTPUTS[k].title == t for k, t in titles.items())
    assert set(captions) <= set(titles)
