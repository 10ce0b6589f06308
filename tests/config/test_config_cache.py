"""The validated config is remembered under a key of (config, cflcore sources, library versions), so that a
Snakemake start need not import the plug-ins again; a changed or bad config is validated afresh."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

import cflcore.config as cc


@pytest.fixture()
def raw_config():
    return yaml.safe_load(open("config/tiny.yaml"))


def test_the_remembered_result_is_the_validation_itself(raw_config, tmp_path, monkeypatch):
    direct = cc.validate_config(copy.deepcopy(raw_config))
    first = cc.validate_config_cached(copy.deepcopy(raw_config), tmp_path)
    assert first == direct
    assert len(list(tmp_path.glob("*.json"))) == 1

    def no_validation(*_a, **_k):
        raise AssertionError("validated again although the key was remembered")

    monkeypatch.setattr(cc.validate, "validate_config", no_validation)  # what validate_config_cached calls
    assert cc.validate_config_cached(copy.deepcopy(raw_config), tmp_path) == direct


def test_a_changed_config_is_validated_afresh(raw_config, tmp_path):
    cc.validate_config_cached(copy.deepcopy(raw_config), tmp_path)
    changed = copy.deepcopy(raw_config)
    changed["engine"] = {**(changed.get("engine") or {}), "eval_every": 2}
    assert cc.validation_key(changed) != cc.validation_key(raw_config)
    assert cc.validate_config_cached(changed, tmp_path)["engine"]["eval_every"] == 2
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_the_key_covers_library_versions(raw_config, monkeypatch):
    from importlib import metadata

    before = cc.validation_key(raw_config)
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0" if name == "hdbscan" else real(name))
    assert cc.validation_key(raw_config) != before


def test_a_bad_config_is_never_remembered(raw_config, tmp_path):
    bad = copy.deepcopy(raw_config)
    first = next(iter(bad["algorithms"]))
    bad["algorithms"][first]["method"] = "no-such-method"
    with pytest.raises(cc.ConfigError, match=f"algorithms.{first}.method"):
        cc.validate_config_cached(bad, tmp_path)
    assert not list(tmp_path.glob("*.json"))


def test_an_unreadable_cache_file_is_validated_and_rewritten(raw_config, tmp_path):
    cc.validate_config_cached(copy.deepcopy(raw_config), tmp_path)
    (path,) = tmp_path.glob("*.json")
    path.write_text("{not json")
    assert cc.validate_config_cached(copy.deepcopy(raw_config), tmp_path) == cc.validate_config(copy.deepcopy(raw_config))
    assert json.loads(path.read_text())
