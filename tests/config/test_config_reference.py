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


def test_every_field_that_names_something_says_what_it_may_name():
    """cflcore.config_checks.naming_fields: each path is a field the reference renders (a path it does not render
    would drop its sentence silently), and the sentence follows the field's entry."""
    from cflcore.config_checks import naming_fields
    from cflcore.paper_sources import declared_claims

    text = " ".join(config_reference.render().split())
    for path, sentence in naming_fields().items():
        # a split generator's parameter (splits.<name>.<key>) is rendered by its key, in its generator's section
        parameter = path.startswith("splits.<name>.") and f"- `{path.rsplit('.', 1)[1]}` (" in text
        assert f"- `{path}` (" in text or f"- `{path}`:" in text or parameter, path
        assert " ".join(sentence.split()) in text, path
    assert "`report.claims_not_carried`" in text and all(c in text for ids in declared_claims().values() for c in ids)
