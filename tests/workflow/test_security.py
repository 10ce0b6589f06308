"""Security checks: safe deserialisation, no shell
with config values, allow-lists that hold, wildcards that cannot escape results/."""
import ast
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, copy_workflow, snakemake_cmd

SOURCES = sorted([*Path(REPO, "cflcore").rglob("*.py"), *Path(REPO, "workflow_scripts").glob("*.py"),
                  *Path(REPO, "benchmarks").glob("*.py")])


def calls(tree: ast.AST, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            full = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if full == name:
                yield node


def unsafe_calls_in(path: Path) -> list[str]:
    """The security check on one source file: every ``torch.load`` without ``weights_only=True``, every
    subprocess call with ``shell=True`` and every bare ``eval``/``exec``, as ``path:line: problem``."""
    tree = ast.parse(path.read_text())
    problems = []
    for node in calls(tree, "load"):
        if isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "torch":
            kw = {k.arg: k.value for k in node.keywords}
            if not ("weights_only" in kw and getattr(kw["weights_only"], "value", None) is True):
                problems.append(f"{path}:{node.lineno}: torch.load without weights_only=True")
    for fn in ("run", "Popen", "call", "check_call", "check_output"):
        for node in calls(tree, fn):
            if any(k.arg == "shell" and getattr(k.value, "value", False) is True for k in node.keywords):
                problems.append(f"{path}:{node.lineno}: subprocess with shell=True")
    for fn in ("eval", "exec"):
        problems += [f"{path}:{n.lineno}: {fn}()" for n in calls(tree, fn) if isinstance(n.func, ast.Name)]
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_torch_load_is_weights_only_and_no_shell_or_eval(path):
    assert unsafe_calls_in(path) == []


def test_the_ast_check_catches_an_unsafe_load(tmp_path):
    """The check above, run on a file holding each unsafe call (and the safe forms, which it must let pass)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import subprocess, torch\n"
                   "state = torch.load('x.pt')\n"                         # line 2: no weights_only
                   "state = torch.load('x.pt', weights_only=False)\n"     # line 3: explicitly unsafe
                   "subprocess.run('ls ' + name, shell=True)\n"            # line 4
                   "value = eval(text)\n"                                  # line 5
                   "ok = torch.load('x.pt', weights_only=True)\n"          # safe
                   "subprocess.run(['ls', name], shell=False)\n"           # safe
                   "model.eval()\n")                                       # a method, not the builtin
    assert unsafe_calls_in(bad) == [f"{bad}:2: torch.load without weights_only=True",
                                    f"{bad}:3: torch.load without weights_only=True",
                                    f"{bad}:4: subprocess with shell=True", f"{bad}:5: eval()"]
    good = tmp_path / "good.py"
    good.write_text("import torch\nstate = torch.load(path, map_location='cpu', weights_only=True)\nmodel.eval()\n")
    assert unsafe_calls_in(good) == []


def test_sklearn_clusterer_allowlist_refuses_import_paths():
    from cflcore.config import validate_config
    from cflcore.errors import ConfigError
    import yaml

    cfg = yaml.safe_load(Path(REPO, "config", "tiny.yaml").read_text())
    cfg["algorithms"]["ocfl-km"] = {"method": "ocfl", "clusterer": "sklearn", "estimator": "subprocess.Popen"}
    with pytest.raises(ConfigError, match="allow"):
        validate_config(cfg)
    cfg["algorithms"]["ocfl-km"] = {"method": "ocfl", "clusterer": "sklearn", "estimator": "SpectralClustering"}
    validate_config(cfg)


def test_attribution_allowlist_holds():
    import torch
    from cflcore.errors import ConfigError
    from cflcore.explain import make_attributor

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(2 * 6 * 6, 3))
    with pytest.raises(ConfigError):
        make_attributor(model, "os.system")


def test_wildcards_cannot_escape_results(tmp_path):
    wd = copy_workflow(tmp_path / "wf")
    for target in ("results/runs/../../etc/nonoverlap-balanced/n6/s0/bnc/history.parquet",
                   "results/data/a/b.parquet"):
        p = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", "config/tiny.yaml", "--", target),
                           cwd=wd, capture_output=True, text=True, timeout=300)
        assert p.returncode != 0
        assert "MissingRuleException" in p.stdout + p.stderr or "No rule to produce" in p.stdout + p.stderr
