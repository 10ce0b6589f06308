"""What the paper plug-ins declare (cflcore/report/papers/, one module per paper), read from their source with
:mod:`ast`, never importing the report (pandas, the claims): the paper ids (``@register_paper("002")``), their claims'
ids (``@claim("002", "002-ari-mk")``), each paper's roles, the cross-paper homes it owns and the tables of its own. Config validation
(cflcore.config, cflcore.config_checks) and the report's catalogue (parsed with the Snakefile) read them here, as
cflcore.registry.declared_names reads the other plug-ins' names.

It is its own module, not part of cflcore.registry, whose code every stage's code hash covers (cflcore.provenance):
what the papers declare concerns validation and the report only, and a new paper changes no training job's hash.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from .errors import ConfigError
from .registry import decorator_name, registered_in_tree

PAPER_FOLDER = Path(__file__).parent / "report" / "papers"
"""The folder of the paper modules (cflcore.report.papers.base.PAPERS finds them there)."""
PAPER_DECORATOR, CLAIM_DECORATOR = "register_paper", "claim"
"""``@register_paper("002") class ...(Paper)`` and ``@claim(paper, claim_id)`` (cflcore.report.papers.base)."""


def _trees() -> list[ast.Module]:
    return [ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for path in sorted(PAPER_FOLDER.glob("*.py"))]


@functools.cache
def declared_papers() -> tuple[str, ...]:
    """The paper ids the modules register (``@register_paper("002")``), sorted."""
    return tuple(sorted(name for tree in _trees() for name in registered_in_tree(tree, PAPER_DECORATOR)))


def check_paper(name: str, field: str) -> None:
    """ConfigError ``<field>: unknown paper <name>; known: ...`` unless a paper module declares ``name`` (the message of
    cflcore.registry.Registry.get)."""
    if name not in declared_papers():
        raise ConfigError(f"{field}: unknown paper {name!r}; known: {', '.join(declared_papers())}")


def _constant(node: ast.expr, constants: dict[str, str]) -> str | None:
    """A string literal, or the name of a module-level string constant."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return constants.get(node.id) if isinstance(node, ast.Name) else None


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module-level string constants of a module (``PAPER = "002"``)."""
    return {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            for t in n.targets if isinstance(t, ast.Name)}


@functools.cache
def declared_claims() -> dict[str, tuple[str, ...]]:
    """Paper -> the ids of the claims its module declares (``@claim("002", "002-ari-mk")``, or a registration call at
    module level, ``claim("h", "h-x")(fn)``), in declaration order."""
    claims: dict[str, list[str]] = {}
    for tree in _trees():
        constants = _constants(tree)
        for node in tree.body:
            calls = [*getattr(node, "decorator_list", []),
                     *([node.value.func] if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else [])]
            for deco in calls:
                if isinstance(deco, ast.Call) and decorator_name(deco.func) == CLAIM_DECORATOR and len(deco.args) == 2:
                    paper, claim_id = (_constant(a, constants) for a in deco.args)
                    if paper is not None and claim_id is not None:
                        claims.setdefault(paper, []).append(claim_id)
    return {paper: tuple(ids) for paper, ids in claims.items()}


def _class_dicts(attribute: str) -> dict[str, dict[str, str]]:
    """Paper -> the dict literal its registered class assigns to ``attribute``: key -> the value's string (a string
    literal, or the first argument of a call such as ``Role("split", ...)``); keys and values are literals or
    module-level string constants."""
    found: dict[str, dict[str, str]] = {}
    for tree in _trees():
        constants = _constants(tree)
        for node in tree.body:
            names = registered_in_tree(ast.Module(body=[node], type_ignores=[]), PAPER_DECORATOR)
            if not isinstance(node, ast.ClassDef) or not names:
                continue
            for stmt in node.body:
                if (isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == attribute for t in stmt.targets)
                        and isinstance(stmt.value, ast.Dict)):
                    values = [v.args[0] if isinstance(v, ast.Call) and v.args else v for v in stmt.value.values]
                    pairs = [(_constant(k, constants), _constant(v, constants))
                             for k, v in zip(stmt.value.keys, values) if k is not None]
                    found[names[0]] = {k: v for k, v in pairs if k is not None and v is not None}
    return found


@functools.cache
def declared_roles() -> dict[str, dict[str, str]]:
    """Paper -> its roles (role key -> the kind of run it names, ``split`` or ``variant``): the class's ``roles``
    (cflcore.report.papers.base.Paper.roles)."""
    return _class_dicts("roles")


@functools.cache
def declared_paper_tables() -> dict[str, str]:
    """The report tables of the papers' own: catalogue kind -> its title in the HTML report, from each paper class's
    ``table_titles`` (cflcore.report.papers.base.Paper.tables)."""
    return {kind: title for titles in _class_dicts("table_titles").values() for kind, title in titles.items()}


@functools.cache
def declared_output_titles() -> dict[str, str]:
    """The titles of the report's kinds drawn after a paper (its tables and figures, written by the report's own
    writers): catalogue kind -> its title, citing the paper, from each paper class's ``output_titles``
    (cflcore.report.papers.base.Paper.output_titles)."""
    return {kind: title for titles in _class_dicts("output_titles").values() for kind, title in titles.items()}


@functools.cache
def declared_output_captions() -> dict[str, str]:
    """The captions of the report's tables drawn after a paper that cite it: catalogue kind -> the caption its
    Markdown and LaTeX versions carry, from each paper class's ``output_captions``
    (cflcore.report.papers.base.Paper.output_captions)."""
    return {kind: text for captions in _class_dicts("output_captions").values() for kind, text in captions.items()}


@functools.cache
def declared_homes() -> dict[str, str]:
    """The homes of the cross-paper settings (``report.cross_paper.settings.<split>.home``): home id -> the source in
    words, from each paper class's ``homes`` (cflcore.report.papers.base.Paper.homes), sorted by id."""
    return dict(sorted((home, what) for homes in _class_dicts("homes").values() for home, what in homes.items()))


def check_home(name: str, field: str) -> None:
    """ConfigError ``<field>: unknown home <name>; allowed: ...`` unless a paper module declares the home ``name``."""
    if name not in declared_homes():
        raise ConfigError(f"{field}: unknown home {name!r}; allowed: {', '.join(declared_homes())}")


@functools.cache
def declared_ablations() -> dict[str, tuple[str, str]]:
    """The ablation studies the papers declare (cflcore.report.papers.base.Paper.ablations): config file -> (paper, the
    id of the claim it decides again), in the order of the papers' ids and their declarations."""
    return {file: (paper, claim_id) for paper, files in sorted(_class_dicts("ablations").items())
            for file, claim_id in files.items()}
