"""`cfl --set KEY=VALUE`: dotted keys, YAML values, validated like the config files."""
from pathlib import Path

import pytest

from cflcore.cli import main, parse_set
from cflcore.errors import ConfigError
from conftest import REPO

TINY = str(Path(REPO) / "config" / "tiny.yaml")


def test_parse_set_nests_dotted_keys_and_parses_yaml_values():
    assert parse_set(["engine.threads=2", "study.clients=[6, 12]", "datasets.digits.lr=0.01",
                      "explain.enabled=false", "engine.threads=3"]) == {
        "engine": {"threads": 3}, "study": {"clients": [6, 12]},
        "datasets": {"digits": {"lr": 0.01}}, "explain": {"enabled": False}}
    for bad in ("engine.threads", "=2", "engine..threads=2", "engine.threads=[1"):
        with pytest.raises(ConfigError, match="--set"):
            parse_set([bad])


def test_set_overrides_the_files(capsys):
    assert main(["--config", TINY, "--set", "engine.threads=2", "--set", "study.clients=[6, 12]", "validate"]) == 0
    out = capsys.readouterr().out
    assert "config OK: 6 runs" in out  # 3 methods x {6, 12} clients
    assert "digits/nonoverlap-balanced/n12/s0/ocfl-hdb" in out


@pytest.mark.parametrize("item, field", [("engine.threads=0", "engine.threads"),
                                         ("engine.threds=2", "engine"),
                                         ("study.clients=six", "study.clients")])
def test_set_is_validated_like_the_files(capsys, item, field):
    assert main(["--config", TINY, "--set", item, "validate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cfl: error: ") and field in err, err
