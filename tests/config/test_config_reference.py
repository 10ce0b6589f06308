"""docs/configuration.md is the schema's rendering (cflcore/config_reference.py): regenerating it changes nothing."""
from pathlib import Path

from cflcore import config_reference
from conftest import REPO


def test_the_config_reference_is_the_schemas():
    written = (Path(REPO) / config_reference.OUTPUT).read_text(encoding="utf-8")
    assert written == config_reference.render(), (
        f"{config_reference.OUTPUT} disagrees with the schema; regenerate it: {config_reference.COMMAND}")


def test_the_reference_names_every_key_and_plugin_parameter():
    """Spot checks that the rendering walks nested blocks, list items and the plug-ins' params_schema."""
    text = config_reference.render()
    for key in ("`engine.personalisation.lam`", "`datasets.<name>.lr`", "`whatif.clusterers[].k_max`",
                "`report.cross_paper.settings.<name>.home`", "### `ocfl`", "`min_cluster_fraction`", "### `dirichlet-mix`"):
        assert key in text, key
    assert max(len(line) for line in text.splitlines()) <= config_reference.WIDTH
