"""A verdict's stability under the CPU's kernels (issue 67, item 4; cflcore.report.papers.base.check_claims with
``kernel_sets``): the claim is decided again on the same runs trained with the kernels held to each path of
``report.kernel_paths``; the same verdict everywhere is printed "same under ...", a verdict that differs on a path is
inconclusive, naming the flip and keeping the native verdict in the note. The SCL home claim ("ARI ≥ 0.9 in at least
80 % of seeds", the exact binomial test) is fed 18 seeds at 1.00 (holds) and 9 at 1.00 with 9 at 0.4 (contradicted)."""
import copy

import pandas as pd
import pytest

import cflcore.config as cc
from cflcore.errors import ConfigError
from cflcore.report.papers import base as cl
from cflcore.report.papers import home
from cflcore.report.statistics import verdicts as vd
from conftest import REPO

CLAIM = "home-scl-rotated-half"
HOLDING = [1.0] * 18
FAILING = [1.0] * 9 + [0.4] * 9  # half the seeds at the level: contradicted at 18 seeds


def data(aris) -> cl.ClaimData:
    """SCL's home runs, one per seed, with the given final ARIs."""
    runs = pd.DataFrame([{"dataset": "mnist5k", "clients": 10, "seed": s, "algorithm": home.SCL_VARIANT,
                          "algorithm_base": home.SCL_VARIANT, "split": home.SCL_SPLIT, "split_base": home.SCL_SPLIT,
                          "ari": float(a), "n_clusters": 2.0, "local_acc": 0.9} for s, a in enumerate(aris)])
    return cl.ClaimData(runs, loaded=[object()] * len(runs))  # claims count the loaded runs, not read them here


def checked(native, **paths) -> pd.DataFrame:
    return cl.check_claims([home.PAPER], data(native), kernel_sets={k: data(v) for k, v in paths.items()} or None)


def test_native_verdicts_of_the_two_tables():
    """The tables decide both ways on their own: the flip below is a real change of verdict."""
    assert checked(HOLDING).set_index("claim_id").loc[CLAIM, "holds"] == vd.HOLDS
    assert checked(FAILING).set_index("claim_id").loc[CLAIM, "holds"] == vd.CONTRADICTED


def test_same_verdict_on_every_path_is_printed_beside_it():
    got = checked(HOLDING, avx2=HOLDING, default=HOLDING).set_index("claim_id").loc[CLAIM]
    assert (got["holds"], got["lean"], got["kernels"]) == (vd.HOLDS, vd.TOWARD, "same under avx2, default")


def test_a_flip_is_inconclusive_and_names_the_path_and_its_verdict():
    got = checked(HOLDING, avx2=HOLDING, default=FAILING).set_index("claim_id").loc[CLAIM]
    assert (got["holds"], got["lean"]) == (vd.INCONCLUSIVE, vd.NONE)
    assert got["kernels"] == "flips under default (contradicted, lean against)"
    assert got["reason"] == ("inconclusive: the verdict flips under the CPU's kernels "
                             "(native holds, avx2 holds, default contradicted)")
    assert got["note"].startswith("the verdict on the native kernels: holds (lean toward")


def test_a_flip_away_from_the_native_verdict_either_way():
    """The native verdict is no privileged truth: contradicted natively and holding on a path flips as well."""
    got = checked(FAILING, avx2=HOLDING).set_index("claim_id").loc[CLAIM]
    assert (got["holds"], got["kernels"]) == (vd.INCONCLUSIVE, "flips under avx2 (holds, lean toward)")


def test_a_flip_between_leaning_verdicts_keeps_their_common_lean():
    """SCL's home check here: native 3 of 6 (inconclusive, against), a path 2 of 6 (contradicted, against)."""
    got = checked([1, 1, 1, 0, 0, 0.72], avx2=[0, 1, 1, 0.72, 0.82, 0]).set_index("claim_id").loc[CLAIM]
    assert (got["holds"], got["lean"]) == (vd.INCONCLUSIVE, vd.AGAINST)
    assert got["kernels"] == "flips under avx2 (contradicted, lean against)"


def test_the_same_verdict_leaning_the_other_way_is_named_and_leans_nowhere():
    """SCL's steps ablation here: native 6 of 6 (inconclusive, toward), avx2 4 of 6 (inconclusive, against)."""
    got = checked([1.0] * 6, avx2=[1, 1, 0.72, 0.72, 1, 1]).set_index("claim_id").loc[CLAIM]
    assert (got["holds"], got["lean"]) == (vd.INCONCLUSIVE, vd.NONE)
    assert got["kernels"] == "same under avx2, but leans against under avx2"
    assert got["reason"].endswith("where it leans differs under the CPU's kernels (native toward, avx2 against)")


def test_a_path_with_missing_runs_says_so():
    got = checked(HOLDING, avx2=HOLDING[:17]).set_index("claim_id").loc[CLAIM]
    assert got["kernels"].startswith("same under avx2; avx2 has 17 of 18 runs") or "flips under avx2" in got["kernels"]
    assert "avx2 has 17 of 18 runs" in got["kernels"]


def test_without_kernel_paths_the_table_is_todays():
    """Unset (every shipped study): paper_claims.csv keeps its columns, no ``kernels`` one."""
    assert list(checked(HOLDING).columns) == list(cl.CLAIM_COLUMNS)
    with_paths = list(checked(HOLDING, avx2=HOLDING).columns)
    assert with_paths[with_paths.index("lean") + 1] == "kernels"


def test_the_front_page_prints_the_stability_beside_the_verdict():
    from cflcore.report.front_page import claims_checks

    (check,) = claims_checks(checked(HOLDING, avx2=HOLDING, default=FAILING))
    frame = check.tables[0][1]
    assert list(frame.columns)[list(frame.columns).index("Lean") + 1] == "Kernels"
    assert "*Kernels*" in check.text
    assert frame["Kernels"].tolist().count("flips under default (contradicted, lean against)") == 1
    assert set(frame["Kernels"]) == {"flips under default (contradicted, lean against)", ""}  # n/a rows: no runs


def test_an_unknown_kernel_path_is_refused_in_one_line(tmp_path):
    cfg = cc.deep_update(copy.deepcopy(cc.read_config_file(f"{REPO}/config/tiny.yaml")),
                         {"report": {"kernel_paths": ["avx2", "avx512"]}, "results_dir": str(tmp_path / "r")})
    with pytest.raises(ConfigError) as err:
        cc.validate_config_cached(cfg, tmp_path / "cache")
    assert str(err.value) == "report.kernel_paths[1]: 'avx512'; allowed: avx2, default"
