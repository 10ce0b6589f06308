"""The import layers of the code (docs/architecture.md §4): imports point down, there are no cycles, and the house
is at most :data:`MAX_FLOORS` floors high.

A *room* is a top-level module of ``cflcore`` (``cflcore/layout.py``) or one of its subpackages (``cflcore/fl/``),
and each of ``rules/`` (the Snakefile and ``rules/*.smk``), ``workflow_scripts/`` and ``benchmarks/``. A room stands
one floor above the highest room it imports; imports inside functions count too (they run, and they tie the
modules together as much as any other). Imports inside a room do not count."""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "cflcore"

MAX_FLOORS = 7
"""The height docs/architecture.md §4 draws: errors/defaults; layout, io, registry, plugin...; data, clustering,
models, provenance; strategies, explain, evaluate; fl, config, report; stages, status; cli, rules, adapters,
benchmarks."""

# one import a line: the names never run on into the next line (a "from" line would swallow the one after it)
_SMK_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(cflcore[\w.]*)[ \t]+import[ \t]+([\w \t,]+)|import[ \t]+(cflcore[\w.]*))", re.M)


def room_of_module(module: str) -> str | None:
    """The room of a ``cflcore`` module name (``cflcore.fl.run`` -> ``cflcore/fl/``), None outside the package."""
    parts = module.split(".")
    if parts[0] != "cflcore" or len(parts) == 1:
        return None
    if (PACKAGE / parts[1]).is_dir():
        return f"cflcore/{parts[1]}/"
    return f"cflcore/{parts[1]}.py"


def room_of_file(path: Path) -> str:
    rel = path.relative_to(REPO)
    if rel.parts[0] == "cflcore":
        return f"cflcore/{rel.parts[1]}/" if len(rel.parts) > 2 else f"cflcore/{rel.parts[1]}"
    if rel.parts[0] == "Snakefile":
        return "rules/"
    return f"{rel.parts[0]}/"


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every ``cflcore`` module a Python file imports, anywhere in it (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # `from . import layout`: a submodule
    return {m for m in found if m.startswith("cflcore")}


def smk_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for m in _SMK_IMPORT.finditer(path.read_text()):
        if m.group(3):
            found.add(m.group(3))
        else:
            found.add(m.group(1))
            found.update(f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(",") if n.strip())
    return found


def room_graph() -> dict[str, set[str]]:
    """room -> the rooms it imports (itself and ``cflcore/__init__.py`` left out)."""
    files = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    files += sorted((REPO / "workflow_scripts").glob("*.py")) + sorted((REPO / "benchmarks").glob("*.py"))
    graph: dict[str, set[str]] = {}
    for path in files:
        room = room_of_file(path)
        if room == "cflcore/__init__.py":
            continue
        targets = {room_of_module(m) for m in imported_modules(path)}
        graph.setdefault(room, set()).update(t for t in targets if t and t != room and t != "cflcore/__init__.py")
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        targets = {room_of_module(m) for m in smk_imports(path)}
        graph.setdefault("rules/", set()).update(t for t in targets if t and t != "rules/")
    return graph


def floors(graph: dict[str, set[str]]) -> tuple[dict[str, int], list[list[str]]]:
    """Each room's floor (1 + the highest floor it imports), and the cycles met on the way."""
    floor: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(room: str, path: list[str]) -> int:
        if room in path:
            cycles.append(path[path.index(room):] + [room])
            return 0
        if room not in floor:
            floor[room] = 1 + max((visit(t, path + [room]) for t in graph.get(room, ())), default=0)
        return floor[room]

    for room in sorted(graph):
        visit(room, [])
    return floor, cycles


def _why(graph: dict[str, set[str]], floor: dict[str, int]) -> str:
    lines = []
    for room in sorted(floor, key=lambda r: (-floor[r], r)):
        lifts = sorted(t for t in graph.get(room, ()) if floor.get(t, 0) == floor[room] - 1)
        lines.append(f"  floor {floor[room]}: {room}" + (f"  (lifted by {', '.join(lifts)})" if lifts else ""))
    return "\n".join(lines)


def test_the_graph_sees_the_known_arrows():
    """The reader is not blind: arrows everyone can check by eye are in the graph."""
    graph = room_graph()
    assert "cflcore/strategies/" in graph["cflcore/fl/"]  # the engine imports the strategy contract
    assert "cflcore/stages.py" in graph["rules/"]
    assert "cflcore/layout.py" in graph["cflcore/report/"]
    assert "cflcore/errors.py" in graph["cflcore/config/"]


def test_no_cycles_and_at_most_max_floors():
    graph = room_graph()
    floor, cycles = floors(graph)
    assert not cycles, f"import cycles between rooms: {cycles}"
    top = max(floor.values())
    assert top <= MAX_FLOORS, f"{top} floors, at most {MAX_FLOORS} allowed:\n{_why(graph, floor)}"


def test_the_floors_catch_an_upward_import():
    """An import from a low room up to a high one lifts the house: the check would see it."""
    graph = {room: set(targets) for room, targets in room_graph().items()}
    graph["cflcore/layout.py"].add("cflcore/stages.py")  # layout -> stages: a cycle through stages -> layout
    _, cycles = floors(graph)
    assert cycles
