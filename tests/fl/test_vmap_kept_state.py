"""``optimizer_state: kept`` on the vmap trainer (cflcore.fl.optim.stack_states / stacked_step / unstack_states): over
rounds that sample different clients, each client's momentum or Adam moments and step count continue as the loop
trainer's do (float64, the loop-vs-vmap tolerance of tests/fl/test_trainers.py), in one chunk or one client a chunk;
and the kept state is live (per_round gives other numbers from the second round on)."""
import pytest
import torch

from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer, OptimizerState
from cflcore.fl.trainers import LoopTrainer, VmapTrainer, derive_seed
from cflcore.models import build_model
from engine_runs import cpu_train_spec

CPU = torch.device("cpu")
SHAPE, SIZES = (1, 8, 8), [40, 33, 17, 50]  # unequal sizes: short last batches, clients leaving the active set
ROUNDS = [[0, 1, 2], [1, 2, 3], [0, 3], [0, 1, 2, 3]]  # clients 1, 2, 3 in round 1: 5, 3 and 0 steps before it
OPTIMIZERS = [ClientOptimizer("sgd", 0.05, momentum=0.9, weight_decay=1e-3), ClientOptimizer("adam", 1e-3, weight_decay=1e-2)]


def _model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return build_model("tinyvgg", SHAPE[0], SHAPE[1:], 6)


def _rounds(trainer, fed, start, kept: bool):
    states = {i: OptimizerState() for i in range(len(SIZES))}
    out = []
    for rnd, sampled in enumerate(ROUNDS):
        starts = torch.stack([start + 0.01 * i for i in sampled])
        own = {"optimizer_states": [states[i] for i in sampled]} if kept else {}
        result = trainer.train(starts, [fed.clients[i] for i in sampled], [derive_seed(rnd, i) for i in sampled], **own)
        out.append((result.params.clone(), result.step_losses))
    return out, states


@pytest.mark.parametrize("one_client_a_chunk", [False, True])
@pytest.mark.parametrize("opt", OPTIMIZERS, ids=["sgd-momentum", "adam"])
def test_kept_states_on_the_vmap_trainer_are_the_loop_trainers(opt, one_client_a_chunk):
    fed = synthetic_federated(n_clients=len(SIZES), n_train=SIZES, shape=SHAPE)
    layout = ModelLayout.of(_model())
    start = layout.flatten(_model()).double()
    spec = cpu_train_spec(optimizer=opt, batch_size=8, local_epochs=1, precision="fp64", memory_budget_mb=64)
    loop, loop_states = _rounds(LoopTrainer(_model(), layout, spec, CPU), fed, start, kept=True)
    vmap_trainer = VmapTrainer(_model(), layout, spec, CPU)
    if one_client_a_chunk:
        vmap_trainer._probe(vmap_trainer.client_tensors(fed.clients[0])[0])
        vmap_trainer._activation_numel = 10 ** 7  # pretend big activations: one client a chunk
        assert vmap_trainer.chunk_size(len(SIZES)) == 1
    vmap, vmap_states = _rounds(vmap_trainer, fed, start, kept=True)
    for (pa, la), (pb, lb) in zip(loop, vmap):
        assert (pa - pb).abs().max().item() <= 1e-10
        for a, b in zip(la, lb):
            assert len(a) == len(b) and abs(a - b).max() <= 1e-10
    for i, own in loop_states.items():
        theirs = vmap_states[i]
        assert own.step == theirs.step == sum(-(-SIZES[i] // 8) for s in ROUNDS if i in s)
        for name in ("momentum", "exp_avg", "exp_avg_sq"):
            a, b = getattr(own, name), getattr(theirs, name)
            assert (a is None) == (b is None)
            for x, y in zip(a or [], b or []):
                assert x.shape == y.shape and (x - y).abs().max().item() <= 1e-10
    for own in vmap_states.values():  # each client's own storage, not a view keeping a whole chunk's tensor alive
        for t in (own.momentum or []) + (own.exp_avg or []):
            assert t.untyped_storage().nbytes() == t.numel() * t.element_size()
    fresh, _ = _rounds(VmapTrainer(_model(), layout, spec, CPU), fed, start, kept=False)
    assert torch.equal(fresh[0][0], vmap[0][0])  # round 0: nothing kept yet, the same bytes as per_round
    assert (fresh[1][0] - vmap[1][0]).abs().max().item() > 1e-6  # then the kept states change the training
