"""Catalog and CI hygiene: no YAML file of the project declares a key twice (YAML keeps the
last one silently), and the catalog files exist and parse."""
import fnmatch
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO

ROOT = Path(REPO)


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that raises on a mapping key given twice (PyYAML keeps the last one without a word)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def project_yaml_files() -> list[Path]:
    files = [*ROOT.glob("config/*.yaml"), *ROOT.glob("cflcore/schemas/*.yaml"), *ROOT.glob("profiles/*/config.yaml"),
             ROOT / ".snakemake-workflow-catalog.yml", ROOT / "CITATION.cff"]
    return sorted({p.resolve() for p in files})


def test_unique_key_loader_catches_a_duplicate():
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'compile'"):
        yaml.load("engine:\n  compile: true\n  threads: 1\n  compile: false\n", Loader=UniqueKeyLoader)
    assert yaml.load("a: {b: 1, c: 2}\n", Loader=UniqueKeyLoader) == {"a": {"b": 1, "c": 2}}


@pytest.mark.parametrize("path", project_yaml_files(), ids=lambda p: str(p.relative_to(ROOT.resolve())))
def test_no_duplicate_keys(path):
    assert path.exists(), path
    assert yaml.load(path.read_text(), Loader=UniqueKeyLoader) is not None


def test_catalog_files():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    catalog = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    assert catalog["usage"]["report"] is True and "config/README.md" in catalog["usage"]["mandatory-flags"]["desc"]
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"].startswith("1.2") and cff["license"] == "MIT"
    # every config file is described in config/README.md, by its name or a `family*.yaml` pattern
    readme = (ROOT / "config" / "README.md").read_text()
    named = re.findall(r"`([A-Za-z0-9_.*-]+\.yaml)`", readme)
    for path in ROOT.glob("config/*.yaml"):
        assert any(fnmatch.fnmatch(path.name, n) for n in named), path.name


def test_ci_lint_fails_on_a_new_finding_only():
    """.ci/lint.py reads snakemake's text lint report: the conda finding is allowed, anything else is new."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_lint", ROOT / ".ci" / "lint.py")
    lint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lint)
    report = ("Lints for snakefile /w/rules/common.smk:\n    * Mixed rules and functions in same snakefile.:\n"
              "      Small one-liner functions ...\n\n"
              "Lints for rule train (line 9, /w/rules/train.smk):\n"
              "    * Specify a conda environment or container for each rule.:\n      This way, ...\n")
    found = lint.findings(report)
    assert found == [("snakefile /w/rules/common.smk", "Mixed rules and functions in same snakefile."),
                     ("rule train (line 9, /w/rules/train.smk)", "Specify a conda environment or container for each rule.")]
    assert [t for _, t in found if t not in lint.ALLOWED] == ["Mixed rules and functions in same snakefile."]
