"""Plug-ins from installed distributions (cflcore/external.py, docs/extending.md): entry points name them, config
validation checks their names without importing them, a name two distributions register or one shadowing a
built-in is refused in one line naming both, and a job's code hash covers the source of the external plug-in it
selects, and only of that one.

The fast tests here write small distributions by hand (a ``.dist-info`` folder with ``entry_points.txt`` beside a
module) onto ``sys.path``; tests/workflow/test_lab_package.py builds the example package's wheel and runs a study."""
from __future__ import annotations

from pathlib import Path

import pytest

from cflcore import external
from cflcore.errors import ConfigError
from cflcore.provenance import code_version, external_sources, package_graph

STRATEGY = '''
from cflcore.strategies.base import ClusterAssignment, Strategy, StrategyResult, register_strategy
from . import helper


@register_strategy("{name}")
class Toy(Strategy):
    params_schema = {{"k": {{"type": "integer", "minimum": 1, "default": 2}}}}

    def aggregate(self, updates):
        return StrategyResult(ClusterAssignment.single(self.ctx.n_clients))
'''


def write_distribution(root: Path, dist: str, package: str, entry_points: dict[str, dict[str, str]],
                       modules: dict[str, str]) -> Path:
    """A distribution as pip installs one into ``root``: its package's modules and a ``.dist-info`` naming its entry
    points (group -> name -> module)."""
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    for name, text in modules.items():
        (root / package / f"{name}.py").write_text(text)
    info = root / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {module}\n" for name, module in names.items()) + "\n"
        for group, names in entry_points.items()))
    return root


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """Put distributions on ``sys.path`` for one test; the cached entry-point listing is cleared before and after."""
    external.installed.cache_clear()
    roots: list[Path] = []

    def add(dist: str, package: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str]) -> Path:
        root = write_distribution(tmp_path / f"site-{len(roots)}", dist, package, entry_points, modules)
        roots.append(root)
        monkeypatch.syspath_prepend(str(root))
        external.installed.cache_clear()
        return root

    yield add
    external.installed.cache_clear()


def lab(name: str = "labtoy") -> dict[str, str]:
    return {"strategy": STRATEGY.format(name=name), "helper": "SCALE = 1\n", "other": "UNUSED = 1\n"}


def test_an_installed_method_is_a_known_name_with_its_distribution(on_path):
    on_path("lab-one", "lab_one", {"cflcore.strategies": {"labtoy": "lab_one.strategy"}}, lab())
    plugin = external.installed("method")["labtoy"]
    assert (plugin.distribution, plugin.version, plugin.module) == ("lab-one", "0.1.0", "lab_one.strategy")
    assert "labtoy" in external.known_names("method") and "ocfl" in external.known_names("method")
    external.check_name("method", "labtoy", "algorithms.x.method")
    with pytest.raises(ConfigError, match=r"^algorithms\.x\.method: unknown method 'labtoi'; known: .*\blabtoy\b"):
        external.check_name("method", "labtoi", "algorithms.x.method")
    import sys

    assert "lab_one.strategy" not in sys.modules  # listed and checked from its source, never imported


def test_a_name_two_distributions_register_is_refused_naming_both(on_path):
    on_path("lab-one", "lab_one", {"cflcore.strategies": {"labtoy": "lab_one.strategy"}}, lab())
    on_path("lab-two", "lab_two", {"cflcore.strategies": {"labtoy": "lab_two.strategy"}}, lab())
    with pytest.raises(ConfigError) as err:
        external.check_installed()
    line = str(err.value)
    assert "\n" not in line and "lab-one 0.1.0 (lab_one.strategy)" in line and "lab-two 0.1.0 (lab_two.strategy)" in line
    assert line.startswith("method 'labtoy' is registered by two distributions")


def test_a_name_shadowing_a_built_in_is_refused_naming_both(on_path):
    on_path("lab-one", "lab_one", {"cflcore.strategies": {"ocfl": "lab_one.strategy"}}, lab("ocfl"))
    with pytest.raises(ConfigError, match=r"^method 'ocfl': lab-one 0\.1\.0 \(lab_one\.strategy\) shadows the built-in "
                                          r"method 'ocfl' \(cflcore\.strategies\.ocfl\)"):
        external.installed("method")


def test_an_entry_point_whose_module_registers_another_name_is_refused(on_path):
    on_path("lab-one", "lab_one", {"cflcore.strategies": {"labtoy": "lab_one.strategy"}}, lab("other-name"))
    with pytest.raises(ConfigError, match=r"registers no method 'labtoy'; allowed: .*@register_strategy\('labtoy'\)"):
        external.installed("method")


def test_the_code_hash_covers_the_selected_plugins_source_only(on_path):
    """An edit of the method's module or of a module it imports moves the train hash of its runs; an edit of another
    module of the same distribution, a comment, or the built-in runs' selection does not."""
    root = on_path("lab-one", "lab_one", {"cflcore.strategies": {"labtoy": "lab_one.strategy"}}, lab())
    builtin = code_version("train", {"method": "ocfl", "model": "tinyvgg"})
    selection = {"method": "labtoy", "model": "tinyvgg"}

    def version() -> str:
        from cflcore import provenance

        provenance._code_version.cache_clear()
        return code_version("train", selection)

    first = version()
    files, modules = external_sources(external.installed("method")["labtoy"], package_graph())
    assert [path for path, _ in files] == ["lab-one:lab_one/__init__.py", "lab-one:lab_one/helper.py",
                                           "lab-one:lab_one/strategy.py"]
    assert "cflcore.strategies.base" in modules and "cflcore.strategies.ocfl" not in modules
    (root / "lab_one" / "other.py").write_text("UNUSED = 2\n")
    (root / "lab_one" / "strategy.py").write_text(STRATEGY.format(name="labtoy") + "# a comment\n")
    assert version() == first
    (root / "lab_one" / "helper.py").write_text("SCALE = 2\n")
    second = version()
    assert second != first
    (root / "lab_one" / "strategy.py").write_text(STRATEGY.format(name="labtoy").replace('"default": 2', '"default": 3'))
    assert version() not in (first, second)
    from cflcore import provenance

    provenance._code_version.cache_clear()
    assert code_version("train", {"method": "ocfl", "model": "tinyvgg"}) == builtin


def test_a_stage_hashing_every_built_in_plugin_keeps_its_hash_for_a_built_in_selection(on_path):
    """split, prepare_dataset and report hash every built-in plug-in of their kind; the rules pass them only the
    external part of a selection, so a study of built-in plug-ins keeps its hashes."""
    on_path("lab-one", "lab_one", {"cflcore.split_generators": {"labsplit": "lab_one.split"}},
            {"split": 'from cflcore.data.splits.base import SPLIT_GENERATORS, SplitGenerator\n\n\n'
                      '@SPLIT_GENERATORS.register("labsplit")\nclass S(SplitGenerator):\n    params_schema = {}\n'})
    assert external.external_only({"split generator": "ocfl"}) == {}
    assert code_version("split", external.external_only({"split generator": "ocfl"})) == code_version("split")
    assert external.external_only({"split generator": "labsplit"}) == {"split generator": "labsplit"}
    assert code_version("split", {"split generator": "labsplit"}) != code_version("split")


def test_config_plugins_lists_every_name_a_config_gives():
    cfg = {"datasets": {"d": {"model": "m1", "algorithm_params": {"a": {"clusterer": "c2"}}}, "e": {"loader": "l", "model": "m2"}},
           "splits": {"s": {"generator": "g"}},
           "algorithms": {"a": {"method": "x", "clusterer": "c1", "training": {"model": "m3"}}},
           "report": {"paper_checks": ["p"]}}
    names = external.config_plugins(cfg)
    assert names == {"dataset": {"d", "l"}, "model": {"m1", "m2", "m3"}, "split generator": {"g"}, "method": {"x"},
                     "clusterer": {"c1", "c2"}, "paper": {"p"}}
