"""Explain stage: attributions, insertion/deletion AUC, Algorithm 2 of 000, explain figures."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cflcore.data.federated import ClientData, FederatedData
from cflcore.errors import ConfigError, DataError
from cflcore.explain import (MODES, attribute, draw_sample, evaluation_pool, explain_run, insertion_deletion,
                             insertion_deletion_per_image, sample_generator, write_empty_explain)
from cflcore.config import load_config
from cflcore.explain import randomised_model, spearman_rows, target_classes
from cflcore.explain.framework import ExplainSettings, auc_statistics, check_round, sanity_verdict
from cflcore.explain.insdel import step_pixel_counts, to_channels_last
from cflcore.io import parquet_metadata, read_parquet
from cflcore.report.explain_figures import RANDOM_ENTRY, ExplainRunRef, explain_figures, load_insdel


# ---------------------------------------------------------------------------------------------
# Fixtures: a model that looks at one pixel block only, and a small CNN
# ---------------------------------------------------------------------------------------------
class BlockModel(nn.Module):
    """Two classes; logit_1 = 3·(sum of the 2×2 block at rows/cols 2–3) − 6; every other pixel is ignored."""

    explain_layer = "conv"

    def __init__(self, size: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 1, bias=False)
        nn.init.ones_(self.conv.weight)
        mask = torch.zeros(1, 1, size, size)
        mask[..., 2:4, 2:4] = 1.0
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (self.conv(x) * self.mask).sum(dim=(1, 2, 3))
        return torch.stack([torch.zeros_like(z), 3.0 * z - 6.0], dim=1)


class SmallCNN(nn.Module):
    explain_layer = "features.3"

    def __init__(self, in_channels: int = 1, n_classes: int = 3, size: int = 12, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)  # test fixture only: fixed weights
        self.features = nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(4 * (size // 2) ** 2, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def block_attribution(kind: str, n: int = 1, seed: int = 0) -> torch.Tensor:
    perfect = BlockModel().mask[0, 0].expand(n, 8, 8).clone()
    if kind == "perfect":
        return perfect
    if kind == "reversed":
        return -perfect
    return torch.rand(n, 8, 8, generator=torch.Generator().manual_seed(seed))


def full_probability() -> float:
    return float(torch.sigmoid(torch.tensor(6.0)))


# ---------------------------------------------------------------------------------------------
# Insertion / deletion
# ---------------------------------------------------------------------------------------------
def test_perfect_attribution_gives_extreme_aucs_random_lies_between_reversed_worst():
    model, x = BlockModel().eval(), torch.ones(4, 1, 8, 8)
    target = torch.ones(4, dtype=torch.long)
    res = {k: insertion_deletion(model, x, block_attribution(k, 4), target, step=1)
           for k in ("perfect", "random", "reversed")}
    perfect, rnd, rev = res["perfect"], res["random"], res["reversed"]
    assert float(perfect.deletion_auc.max()) < 0.05
    assert float(perfect.insertion_auc.min()) > full_probability() - 0.05
    assert float(perfect.insertion_auc.max()) <= full_probability() + 1e-9
    assert torch.all(perfect.deletion_auc < rnd.deletion_auc) and torch.all(rnd.deletion_auc < rev.deletion_auc)
    assert torch.all(perfect.insertion_auc > rnd.insertion_auc) and torch.all(rnd.insertion_auc > rev.insertion_auc)
    assert float(rev.deletion_auc.min()) > full_probability() - 0.05
    # the curve's end points: deletion starts at the full image, insertion at the black substrate
    assert torch.allclose(perfect.deletion[:, 0], torch.full((4,), full_probability(), dtype=torch.float64))
    assert torch.allclose(perfect.insertion[:, 0], torch.sigmoid(torch.tensor(-6.0)).double().expand(4))


def test_saliency_attribution_finds_the_block():
    model, x = BlockModel().eval(), torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(1)) + 0.5
    target = torch.ones(2, dtype=torch.long)
    maps = attribute(model, x, target, "saliency")
    top4 = torch.argsort(maps.flatten(1), dim=1, descending=True)[:, :4].sort(dim=1).values
    block = torch.tensor([2 * 8 + 2, 2 * 8 + 3, 3 * 8 + 2, 3 * 8 + 3])
    assert torch.equal(top4, block.expand(2, 4))


@pytest.mark.parametrize("substrate,step,channels", [("zeros", 7, 3), ("blur", 10, 1), ("zeros", 144, 1)])
def test_batched_and_per_image_aucs_agree(substrate, step, channels):
    gen = torch.Generator().manual_seed(3)
    model = SmallCNN(in_channels=channels).eval()
    x = torch.rand(5, channels, 12, 12, generator=gen)
    attribution = torch.randn(5, 12, 12, generator=gen)
    target = torch.randint(0, 3, (5,), generator=gen)
    batched = insertion_deletion(model, x, attribution, target, step, substrate, forward_batch=16)
    loop = insertion_deletion_per_image(model, x, attribution, target, step, substrate)
    assert batched.insertion.shape == (5, int(np.ceil(144 / step)) + 1)
    assert torch.allclose(batched.insertion_auc, loop.insertion_auc, atol=1e-6, rtol=0)
    assert torch.allclose(batched.deletion_auc, loop.deletion_auc, atol=1e-6, rtol=0)
    # channels-last weights (what explain_run uses) give the same numbers
    fast = insertion_deletion(to_channels_last(SmallCNN(in_channels=channels).eval()), x, attribution, target,
                              step, substrate)
    assert torch.allclose(fast.deletion_auc, loop.deletion_auc, atol=1e-6, rtol=0)


def test_auc_is_the_trapezoid_over_pixel_fractions():
    counts = step_pixel_counts(10, 4)
    assert counts.tolist() == [0, 4, 8, 10]  # ceil(10 / 4) = 3 steps, the last one partial
    model, x = BlockModel().eval(), torch.ones(1, 1, 8, 8)
    res = insertion_deletion(model, x, block_attribution("random"), torch.ones(1, dtype=torch.long), step=5)
    xs = res.x.numpy()
    assert xs[0] == 0.0 and xs[-1] == 1.0 and len(xs) == 14
    assert np.isclose(float(res.deletion_auc[0]), np.trapezoid(res.deletion[0].numpy(), xs))


# ---------------------------------------------------------------------------------------------
# Attributions
# ---------------------------------------------------------------------------------------------
def manual_gradcam(model: SmallCNN, x: torch.Tensor, target: torch.Tensor, layer: nn.Module) -> torch.Tensor:
    """Grad-CAM by hand (Selvaraju et al.): α_k = mean of ∂y_t/∂A_k; map = Σ_k α_k A_k, bilinear upsampling."""
    store = {}
    handle = layer.register_forward_hook(lambda m, i, o: store.setdefault("a", o))
    logits = model(x)
    handle.remove()
    acts = store["a"]
    grads = torch.autograd.grad(logits.gather(1, target[:, None]).sum(), acts)[0]
    cam = (grads.mean(dim=(2, 3), keepdim=True) * acts).sum(dim=1, keepdim=True)
    return F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0].detach()


def test_gradcam_shape_and_upsampling_match_a_manual_gradcam():
    model = SmallCNN(in_channels=3).eval()
    x = torch.rand(3, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    target = torch.tensor([0, 1, 2])
    maps = attribute(model, x, target, "gradcam")
    assert maps.shape == (3, 12, 12)  # layer output is 6×6, upsampled to the image
    assert torch.allclose(maps, manual_gradcam(model, x, target, model.features[3]), atol=1e-6)
    first = attribute(model, x, target, "gradcam", layer_name="features.0")
    assert first.shape == (3, 12, 12)
    assert torch.allclose(first, manual_gradcam(model, x, target, model.features[0]), atol=1e-6)


class PlantedPixelLinear(nn.Module):
    """Linear, 3 channels, 8×8, two classes. Class 1's weights: +4 per channel at the planted pixel (5, 2), −8 per
    channel at a decoy pixel (1, 6) (more weight, but against class 1), and |w| < 0.1 elsewhere."""

    PLANTED, DECOY = (5, 2), (1, 6)

    def __init__(self):
        super().__init__()
        w = torch.empty(2, 3, 8, 8).uniform_(-0.1, 0.1, generator=torch.Generator().manual_seed(0))
        w[1, :, 5, 2], w[1, :, 1, 6] = 4.0, -8.0
        self.register_buffer("w", w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bchw,kchw->bk", x, self.w)


def test_integrated_gradients_ranks_the_planted_pixel_first_and_equals_x_times_w():
    """For a linear model, IG from the zero baseline is exactly x ⊙ w (summed over channels): the planted pixel
    ranks first, the decoy with the largest |w| (negative evidence) last."""
    model = PlantedPixelLinear().eval()
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(1)) * 0.5 + 0.5
    target = torch.ones(4, dtype=torch.long)
    maps = attribute(model, x, target, "integrated_gradients")
    assert maps.shape == (4, 8, 8)
    torch.testing.assert_close(maps, (x * model.w[1]).sum(dim=1), atol=1e-5, rtol=1e-5)
    flat = maps.flatten(1)
    planted, decoy = 8 * PlantedPixelLinear.PLANTED[0] + PlantedPixelLinear.PLANTED[1], 8 * PlantedPixelLinear.DECOY[0] + PlantedPixelLinear.DECOY[1]
    assert flat.argmax(dim=1).tolist() == [planted] * 4 and flat.argmin(dim=1).tolist() == [decoy] * 4


class SaturatedPixelModel(nn.Module):
    """logit_1 = 10·tanh(5·x[3, 4]) + 0.3·(sum of every other pixel): the pixel (3, 4) carries almost all of the
    logit, but at x = 1 its gradient is nearly zero (saturated), so plain gradients rank it last."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        img = x[:, 0]
        other = img.sum(dim=(1, 2)) - img[:, 3, 4]
        z = 10.0 * torch.tanh(5.0 * img[:, 3, 4]) + 0.3 * other
        return torch.stack([torch.zeros_like(z), z], dim=1)


def test_integrated_gradients_sees_a_saturated_pixel_that_saliency_misses_and_is_complete():
    model = SaturatedPixelModel().eval()
    x = torch.ones(2, 1, 6, 6)
    target = torch.ones(2, dtype=torch.long)
    ig = attribute(model, x, target, "integrated_gradients")
    assert ig.flatten(1).argmax(dim=1).tolist() == [3 * 6 + 4] * 2
    assert attribute(model, x, target, "saliency").flatten(1).argmin(dim=1).tolist() == [3 * 6 + 4] * 2
    # completeness (Sundararajan et al. 2017): the attributions add up to f(x) − f(baseline)
    with torch.no_grad():
        gap = model(x)[:, 1] - model(torch.zeros_like(x))[:, 1]
    torch.testing.assert_close(ig.sum(dim=(1, 2)), gap, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("name", ["hirescam", "saliency", "integrated_gradients"])
def test_attribution_ranks_the_only_block_the_model_reads_first(name):
    """BlockModel reads only the 2×2 block at rows/cols 2–3: every faithful attribution puts those four pixels on
    top, on random bright images (Grad-CAM is left out: its spatially averaged weight spreads over every pixel)."""
    model = BlockModel().eval()
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(2)) + 0.5
    maps = attribute(model, x, torch.ones(3, dtype=torch.long), name)
    top4 = torch.argsort(maps.flatten(1), dim=1, descending=True)[:, :4].sort(dim=1).values
    assert torch.equal(top4, torch.tensor([2 * 8 + 2, 2 * 8 + 3, 3 * 8 + 2, 3 * 8 + 3]).expand(3, 4))


def test_bad_attribution_and_layer_names():
    model = SmallCNN()
    with pytest.raises(ConfigError, match=r"explain.attribution: unknown attribution 'lime'; allowed: hirescam, gradcam, "):
        attribute(model, torch.rand(1, 1, 12, 12), torch.tensor([0]), "lime")
    with pytest.raises(ConfigError, match=r"explain.layer: .*no layer 'conv9'; conv layers: features.0, features.3"):
        attribute(model, torch.rand(1, 1, 12, 12), torch.tensor([0]), "gradcam", layer_name="conv9")
    with pytest.raises(ConfigError, match="explain.substrate"):
        ExplainSettings.from_dict({"substrate": "noise"})
    with pytest.raises(ConfigError, match="explain.round"):
        check_round(3, 10)
    check_round("last", 10), check_round(10, 10)


# ---------------------------------------------------------------------------------------------
# Algorithm 2
# ---------------------------------------------------------------------------------------------
@dataclass
class FakeRunModels:
    models: dict
    labels: np.ndarray
    round: int = 9
    model_name: str = "small-cnn"
    client_models: dict = field(default_factory=dict)


def make_fed(n_clients: int = 4, n_test: int = 10, n_orch: int = 12, seed: int = 0) -> FederatedData:
    gen = torch.Generator().manual_seed(seed)
    clients = []
    for c in range(n_clients):
        y = torch.randint(0, 3, (n_test,), generator=gen)
        y[: n_test // 2] = c % 3  # a clear majority class per client
        clients.append(ClientData(torch.rand(6, 1, 12, 12, generator=gen), torch.zeros(6, dtype=torch.long),
                                  torch.rand(n_test, 1, 12, 12, generator=gen), y, np.arange(6) + 100 * c,
                                  np.arange(n_test) + 100 * c + 50))
    return FederatedData(clients, torch.rand(n_orch, 1, 12, 12, generator=gen),
                         torch.randint(0, 3, (n_orch,), generator=gen), np.array([0, 0, 1, 1][:n_clients]), 3,
                         (1, 12, 12))


SETTINGS = {"attribution": "saliency", "step": 12, "samples": 6, "batch_size": 4, "grid_clients": [1, 3, 12],
            "enabled": True, "model": "small-cnn", "round": "last", "layer": None}


def test_seeded_sampling():
    a = draw_sample(1000, 50, sample_generator(3, "in_cluster", 1))
    assert np.array_equal(a, draw_sample(1000, 50, sample_generator(3, "in_cluster", 1)))
    assert not np.array_equal(a, draw_sample(1000, 50, sample_generator(4, "in_cluster", 1)))
    assert not np.array_equal(a, draw_sample(1000, 50, sample_generator(3, "in_cluster", 2)))
    assert len(np.unique(a)) == 50 and a.max() < 1000
    # the orchestrator draw is shared by all clusters (common random numbers across cluster models)
    assert np.array_equal(draw_sample(1000, 50, sample_generator(3, "orchestrator", 0)),
                          draw_sample(1000, 50, sample_generator(3, "orchestrator", 5)))
    assert draw_sample(7, 50, sample_generator(3, "out_cluster", 0)).tolist() == list(range(7))


def test_pools_follow_the_assigned_clusters():
    fed = make_fed()
    labels = np.array([0, 1, 1, 0])  # the algorithm's partition, not the ground truth
    pool = evaluation_pool(fed, labels, 1, "in_cluster")
    assert sorted(set(pool.clients.tolist())) == [1, 2] and pool.size == 20
    out = evaluation_pool(fed, labels, 1, "out_cluster")
    assert sorted(set(out.clients.tolist())) == [0, 3]
    orch = evaluation_pool(fed, labels, 1, "orchestrator")
    assert orch.size == 12 and set(orch.clients.tolist()) == {-1}


def test_explain_run_writes_consistent_outputs(tmp_path):
    fed = make_fed()
    run = FakeRunModels({0: SmallCNN(seed=1), 1: SmallCNN(seed=2)}, np.array([0, 0, 1, 1]))
    explain_run(run, fed, SETTINGS, seed=5, out_dir=tmp_path)
    insdel = read_parquet(tmp_path / "insdel.parquet").to_pandas()
    samples = read_parquet(tmp_path / "samples.parquet").to_pandas()
    assert len(insdel) == 6 and insdel["reason"].isna().all() and (insdel["n_samples"] == 6).all()
    assert set(insdel["mode"]) == set(MODES) and len(samples) == 36
    for (cluster, mode), grp in samples.groupby(["cluster", "mode"]):
        row = insdel[(insdel["cluster"] == cluster) & (insdel["mode"] == mode)].iloc[0]
        assert np.isclose(row["insertion_mean"], grp["insertion_auc"].mean())
        assert np.isclose(row["deletion_p90"], np.percentile(grp["deletion_auc"], 90))
        assert np.isclose(row["accuracy"], (grp["label"] == grp["pred"]).mean())
        if mode == "in_cluster":
            assert set(grp["client"]) <= set(np.flatnonzero(run.labels == cluster))
    assert samples["insertion_auc"].between(0, 1).all() and samples["deletion_auc"].between(0, 1).all()
    in_rows = samples[samples["mode"] == "in_cluster"]
    expected_idx = [int(fed.clients[c].idx_test[r]) for c, r in zip(in_rows["client"], in_rows["sample_idx"])]
    assert in_rows["data_idx"].tolist() == expected_idx
    summary = read_parquet(tmp_path / "summary.parquet").to_pandas().set_index("mode")
    assert np.isclose(summary.loc["in_cluster", "insertion_auc"],
                      insdel[insdel["mode"] == "in_cluster"]["insertion_mean"].mean())
    meta = parquet_metadata(tmp_path / "insdel.parquet")
    assert meta["attribution"] == "saliency" and meta["target"] == "predicted" and meta["n_steps"] == 12
    assert meta["sanity_threshold"] in (0.5, "0.5")
    for col in ("insertion_random_auc", "deletion_random_auc", "sanity_spearman"):
        assert samples[col].notna().all(), col
    assert insdel["sanity_passed"].notna().all() and (insdel["sanity_threshold"] == 0.5).all()
    assert np.isclose(summary.loc["in_cluster", "deletion_random_auc"],
                      insdel[insdel["mode"] == "in_cluster"]["deletion_random_mean"].mean())
    with np.load(tmp_path / "saliency.npz") as grid:
        assert grid["clients"].tolist() == [1, 3]  # client 12 does not exist: clipped
        assert grid["images"].shape == (2, 1, 12, 12) and grid["maps"].shape == (2, 12, 12)
        assert grid["labels"].tolist() == [1, 0]  # each client's majority class (make_fed: c % 3)
    # deterministic: a second run gives the same per-sample table
    explain_run(FakeRunModels({0: SmallCNN(seed=1), 1: SmallCNN(seed=2)}, np.array([0, 0, 1, 1])), fed, SETTINGS,
                seed=5, out_dir=tmp_path / "again")
    pd.testing.assert_frame_equal(samples, read_parquet(tmp_path / "again" / "samples.parquet").to_pandas())


def test_empty_modes_give_null_rows_with_reason(tmp_path):
    fed = make_fed()
    bnc = FakeRunModels({0: SmallCNN(seed=1), 3: SmallCNN(seed=2)}, np.zeros(4, dtype=np.int64))
    explain_run(bnc, fed, {**SETTINGS, "attribution": "gradcam"}, seed=0, out_dir=tmp_path)
    insdel = read_parquet(tmp_path / "insdel.parquet").to_pandas().set_index(["cluster", "mode"])
    out0 = insdel.loc[(0, "out_cluster")]
    assert out0["reason"] == "no out-of-cluster clients" and out0["n_samples"] == 0
    assert pd.isna(out0["insertion_mean"]) and pd.isna(out0["deletion_p95"])
    assert insdel.loc[(3, "in_cluster"), "reason"] == "no clients assigned to this cluster"
    assert insdel.loc[(0, "in_cluster"), "n_samples"] == 6 and pd.isna(insdel.loc[(0, "in_cluster"), "reason"])
    assert parquet_metadata(tmp_path / "insdel.parquet")["layer"] == "features.3"


def test_failed_run_writes_empty_outputs_with_reason(tmp_path):
    write_empty_explain(tmp_path, "run failed: loss diverged")
    assert pq.read_table(tmp_path / "insdel.parquet").num_rows == 0
    assert parquet_metadata(tmp_path / "samples.parquet")["reason"] == "run failed: loss diverged"
    _, missing = load_insdel([ExplainRunRef("d", "s", 4, 0, "bnc", tmp_path)])
    assert missing["reason"].tolist() == ["run failed: loss diverged"]


def test_labels_must_match_the_split(tmp_path):
    with pytest.raises(DataError, match="models.pt labels: 3 clients, but the split has 4"):
        explain_run(FakeRunModels({0: SmallCNN()}, np.zeros(3, dtype=np.int64)), make_fed(), SETTINGS, 0, tmp_path)


def test_auc_statistics():
    stats = auc_statistics(np.arange(21, dtype=float))
    assert stats["mean"] == 10 and stats["median"] == 10 and stats["p05"] == 1 and stats["p95"] == 19
    assert np.isclose(stats["var"], np.var(np.arange(21))) and np.isclose(stats["std"] ** 2, stats["var"])
    assert all(v is None for v in auc_statistics(np.array([])).values())


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------
def test_explain_figures_write_files(tmp_path):
    refs = []
    for seed in (0, 1, 2):
        fed = make_fed(seed=seed)
        for k, algo in enumerate(("bnc", "ocfl-km")):
            labels = np.zeros(4, dtype=np.int64) if algo == "bnc" else np.array([0, 0, 1, 1])
            models = {int(c): SmallCNN(seed=10 * seed + k + int(c)) for c in np.unique(labels)}
            out = tmp_path / "explain" / f"s{seed}" / algo
            explain_run(FakeRunModels(models, labels), fed, {**SETTINGS, "samples": 4}, seed=seed, out_dir=out)
            refs.append(ExplainRunRef("toy", "ocfl-bal", 4, seed, algo, out))
    refs.append({"dataset": "toy", "split": "ocfl-bal", "clients": 4, "seed": 3, "algorithm": "bnc",
                 "explain_dir": tmp_path / "nowhere"})
    result = explain_figures(refs, tmp_path / "fig")
    assert result["missing"]["run"].tolist() == ["toy/ocfl-bal/n4/s3/bnc"]
    assert len(result["saliency"]) == 6  # three scenarios × (png, pdf)
    assert not result["saliency"][0].with_suffix(".png").read_bytes() == result["saliency"][2].read_bytes()
    pngs = [p for p in result["cd"] if p.suffix == ".png"]
    assert len(pngs) == 6  # 3 modes × insertion/deletion
    for p in result["saliency"] + result["boxplots"] + result["cd"]:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p
        elif p.suffix == ".pdf":
            assert p.read_bytes()[:5] == b"%PDF-", p
        else:
            assert p.suffix == ".csv" and len(pd.read_csv(p).columns) > 1, p  # a table (may have no rows)
    assert len(result["boxplots"]) == 9  # 3 modes + the sanity figure, each png + pdf, and explain_sanity.csv
    sanity = pd.read_csv(tmp_path / "fig" / "explain_sanity.csv")
    assert {"algorithm", "cluster", "mode", "sanity_spearman_mean", "sanity_passed"} <= set(sanity.columns)
    ranks = pd.read_csv(tmp_path / "fig" / "explain_cd_in_cluster_insertion_ranks.csv")
    # the random-order baseline is ranked beside the algorithms: mean ranks recomputed by hand from the runs'
    # insdel.parquet (per scenario: each algorithm's mean over clusters of its in-cluster insertion mean; the
    # baseline: the mean over the algorithms of that of the random order; rank 1 = highest insertion AUC)
    assert sorted(ranks["algorithm"]) == sorted(["bnc", "ocfl-km", RANDOM_ENTRY])
    expected_ranks = {name: [] for name in ("bnc", "ocfl-km", RANDOM_ENTRY)}
    for seed in (0, 1, 2):
        scores, random = {}, []
        for algo in ("bnc", "ocfl-km"):
            rows = read_parquet(tmp_path / "explain" / f"s{seed}" / algo / "insdel.parquet").to_pandas()
            rows = rows[rows["mode"] == "in_cluster"]
            scores[algo] = rows["insertion_mean"].dropna().mean()
            random.append(rows["insertion_random_mean"].dropna().mean())
        scores[RANDOM_ENTRY] = np.mean(random)
        ordered = sorted(scores, key=lambda name: -scores[name])
        assert len(set(scores.values())) == 3  # no ties: ranks 1, 2, 3
        for rank, name in enumerate(ordered, start=1):
            expected_ranks[name].append(rank)
    got = dict(zip(ranks["algorithm"], ranks["mean_rank"]))
    assert got == pytest.approx({name: np.mean(r) for name, r in expected_ranks.items()})
    assert ranks["algorithm"].tolist() == sorted(got, key=lambda name: (got[name], name))  # best first


# ---------------------------------------------------------------------------------------------
# Faithfulness: random baseline, HiResCAM vs Grad-CAM, sanity check, target class
# ---------------------------------------------------------------------------------------------
class FlatHeadBlockModel(nn.Module):
    """A Flatten → Linear head with a known answer: logit_1 = Σ W ⊙ conv(x) − 2 with W = +3 on the 2×2 block
    at rows/cols 2–3 and −1 elsewhere. On an image that is bright only on the block, the block is all the
    evidence, yet the spatial mean of W (Grad-CAM's channel weight α) is negative: Grad-CAM ranks the
    block last, HiResCAM (W ⊙ A) first."""

    explain_layer = "conv"

    def __init__(self, size: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 1, bias=False)
        nn.init.ones_(self.conv.weight)
        weight = -torch.ones(1, 1, size, size)
        weight[..., 2:4, 2:4] = 3.0
        self.register_buffer("weight", weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (self.conv(x) * self.weight).sum(dim=(1, 2, 3)) - 2.0
        return torch.stack([torch.zeros_like(z), z], dim=1)


def test_gradcam_inverts_on_a_flatten_head_hirescam_does_not():
    model = FlatHeadBlockModel().eval()
    x = torch.zeros(3, 1, 8, 8)
    x[..., 2:4, 2:4] = 1.0
    x[1, 0, 6, 6] = 0.2  # a little background ink the model counts against class 1
    target = torch.ones(3, dtype=torch.long)
    random = torch.rand(3, 8, 8, generator=torch.Generator().manual_seed(0))
    base = insertion_deletion(model, x, random, target, step=2)
    hires = insertion_deletion(model, x, attribute(model, x, target, "hirescam"), target, step=2)
    grad = insertion_deletion(model, x, attribute(model, x, target, "gradcam"), target, step=2)
    assert torch.all(hires.insertion_auc > base.insertion_auc) and torch.all(hires.deletion_auc < base.deletion_auc)
    assert torch.all(grad.insertion_auc < base.insertion_auc) and torch.all(grad.deletion_auc > base.deletion_auc)


class FlatCNN(nn.Module):
    """Conv-ReLU-pool-conv-ReLU, then Flatten → Linear (TinyVGG's head type)."""

    explain_layer = "features.3"

    def __init__(self, size: int = 12, n_classes: int = 2):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(4 * (size // 2) ** 2, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def shapes(n: int, gen: torch.Generator, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """A tiny MNIST-like task on a black background: class 0 = a 3×3 square in the left half, class 1 = a plus
    sign in the right half, at seeded random positions."""
    y = torch.randint(0, 2, (n,), generator=gen)
    rows = torch.randint(0, size - 3, (n,), generator=gen)
    cols = torch.randint(0, size // 2 - 3, (n,), generator=gen) + (size // 2) * y
    x = torch.zeros(n, 1, size, size)
    for i, (r, c) in enumerate(zip(rows.tolist(), cols.tolist())):
        if y[i] == 0:
            x[i, 0, r:r + 3, c:c + 3] = 1.0
        else:
            x[i, 0, r + 1, c:c + 3] = 1.0
            x[i, 0, r:r + 3, c + 1] = 1.0
    return x, y


def trained_flat_cnn(seed: int, steps: int = 60) -> FlatCNN:
    """FlatCNN after ``steps`` Adam steps on :func:`shapes` (about 0.3 s; test accuracy 1.0)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = FlatCNN()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        x, y = shapes(64, gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def trained_models() -> dict[int, FlatCNN]:
    return {seed: trained_flat_cnn(seed) for seed in (1, 2)}


@pytest.mark.kernels
@pytest.mark.parametrize("seed", [1, 2])
def test_trained_model_insertion_above_random_above_deletion(trained_models, seed):
    model = trained_models[seed]
    x, y = shapes(32, torch.Generator().manual_seed(100))
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    assert (pred == y).float().mean() > 0.95
    random = torch.rand(32, 12, 12, generator=torch.Generator().manual_seed(7))
    base = insertion_deletion(model, x, random, pred, step=4)
    hires = insertion_deletion(model, x, attribute(model, x, pred, "hirescam"), pred, step=4)
    assert float(hires.insertion_auc.mean()) > float(base.insertion_auc.mean()) + 0.03
    assert float(base.insertion_auc.mean()) > float(base.deletion_auc.mean()) - 0.1  # random: both near p(x)
    assert float(hires.deletion_auc.mean()) < float(base.deletion_auc.mean()) - 0.2


@pytest.mark.kernels
def test_sanity_check_separates_trained_from_reinitialised(trained_models):
    model = trained_models[1]
    x, _ = shapes(16, torch.Generator().manual_seed(5))
    target = torch.ones(16, dtype=torch.long)
    maps = attribute(model, x, target, "hirescam").abs()
    before = torch.random.get_rng_state()
    scrambled = randomised_model(model, seed=3, cluster=0)
    assert torch.equal(before, torch.random.get_rng_state())  # the global generator is untouched
    same = randomised_model(model, seed=3, cluster=0)
    assert all(torch.equal(a, b) for a, b in zip(scrambled.parameters(), same.parameters()))  # reproducible
    assert not torch.equal(scrambled.head.weight, model.head.weight)
    # a 4-channel toy net: one re-initialisation can by chance keep |map| ≈ the activation shape, so pool four
    rho_random = np.concatenate([spearman_rows(maps, attribute(randomised_model(model, seed=s, cluster=0), x,
                                                               target, "hirescam").abs()) for s in range(4)])
    rho_self = spearman_rows(maps, attribute(trained_flat_cnn(1), x, target, "hirescam").abs())
    assert np.allclose(rho_self, 1.0)
    assert np.nanmean(rho_random) < 0.3
    assert sanity_verdict(rho_random, 0.5)["sanity_passed"] is True
    assert sanity_verdict(rho_self, 0.5)["sanity_passed"] is False
    assert sanity_verdict(np.array([np.nan]), 0.5)["sanity_passed"] is None


def test_spearman_rows_uses_average_ranks_for_ties():
    a = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    b = torch.tensor([[0.0, 0.0, 0.0, 2.0]])
    assert np.allclose(spearman_rows(a, b), 1.0)
    assert np.allclose(spearman_rows(a, torch.tensor([[3.0, 2.0, 1.0, 0.0]])), -np.sqrt(0.6))
    assert np.isnan(spearman_rows(torch.zeros(1, 4), b)).all()  # a constant map has no ranking



def test_average_ranks_equal_scipy_rankdata_with_ties():
    """framework.average_ranks (pandas DataFrame.rank) is scipy.stats.rankdata(axis=1), bit for bit, on rows
    with many ties (quantised maps, a constant row, ±0.0 and ±inf), the shape explain_run ranks (B, H·W)."""
    from scipy.stats import rankdata

    from cflcore.explain.framework import average_ranks

    gen = torch.Generator().manual_seed(0)
    maps = torch.round(torch.randn(24, 28, 28, generator=gen, dtype=torch.float64) * 3) / 3  # heavy ties
    maps[0] = 0.0
    maps[1, :2, :] = -0.0
    maps[2, 0, :3] = torch.tensor([float("inf"), -float("inf"), float("inf")], dtype=torch.float64)
    maps[3] = maps[3].abs()  # one-sided, like the |map| of the sanity check
    for m in (maps, maps.float(), maps[:1, :1, :4]):
        ours = average_ranks(m)
        ref = rankdata(m.flatten(1).double().numpy(), axis=1)
        assert ours.dtype == ref.dtype == np.float64 and ours.shape == ref.shape
        assert np.array_equal(ours, ref)
        ours -= 1.0  # writable: spearman_rows centres the ranks in place

class ConstantModel(nn.Module):
    """Always predicts class 0 with softmax (0.7, 0.2, 0.1), whatever the image."""

    explain_layer = "conv"

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = torch.log(torch.tensor([0.7, 0.2, 0.1], dtype=x.dtype, device=x.device))
        return logits + 0.0 * self.conv(x).sum(dim=(1, 2, 3))[:, None]


def test_target_predicted_versus_label(tmp_path):
    pred, label = torch.tensor([0, 2, 1]), torch.tensor([1, 2, 0])
    assert target_classes(pred, label, "predicted").tolist() == [0, 2, 1]
    assert target_classes(pred, label, "label").tolist() == [1, 2, 0]
    with pytest.raises(ConfigError, match="explain.target: unknown target 'truth'; allowed: predicted, label"):
        target_classes(pred, label, "truth")
    assert ExplainSettings.from_dict({}).target == "predicted"
    fed = make_fed()
    tables = {}
    for target in ("predicted", "label"):
        run = FakeRunModels({0: ConstantModel(), 1: ConstantModel()}, np.array([0, 0, 1, 1]))
        explain_run(run, fed, {**SETTINGS, "target": target}, seed=0, out_dir=tmp_path / target)
        tables[target] = read_parquet(tmp_path / target / "samples.parquet").to_pandas()
    assert np.allclose(tables["predicted"]["target_probability"], 0.7)  # the prediction's probability
    expected = np.array([0.7, 0.2, 0.1])[tables["label"]["label"].to_numpy()]
    assert np.allclose(tables["label"]["target_probability"], expected)  # the true label's probability
    with np.load(tmp_path / "label" / "saliency.npz") as grid:
        assert grid["preds"].tolist() == [0, 0]


def test_random_baseline_is_seeded_and_independent_of_batch_size(tmp_path):
    fed = make_fed()
    frames = []
    for batch_size in (4, 5):
        run = FakeRunModels({0: SmallCNN(seed=1), 1: SmallCNN(seed=2)}, np.array([0, 0, 1, 1]))
        explain_run(run, fed, {**SETTINGS, "batch_size": batch_size}, seed=5, out_dir=tmp_path / str(batch_size))
        frames.append(read_parquet(tmp_path / str(batch_size) / "samples.parquet").to_pandas())
    cols = ["insertion_random_auc", "deletion_random_auc"]
    np.testing.assert_allclose(frames[0][cols].to_numpy(), frames[1][cols].to_numpy(), rtol=0, atol=1e-9)


CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


def test_schema_refuses_a_bad_target_naming_field_and_allowed_values():
    with pytest.raises(ConfigError, match=r"explain.target: 'truth' is not allowed; allowed: predicted, label"):
        load_config(CONFIG, overrides={"explain": {"target": "truth"}})
    with pytest.raises(ConfigError, match=r"explain.attribution: 'lime' is not allowed; allowed: hirescam, gradcam"):
        load_config(CONFIG, overrides={"explain": {"attribution": "lime"}})
    cfg = load_config(CONFIG, overrides={"explain": {"target": "label"}})
    assert cfg["explain"]["target"] == "label" and ExplainSettings.from_dict(cfg["explain"]).target == "label"
