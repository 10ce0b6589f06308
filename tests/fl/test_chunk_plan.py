"""The vmap trainer's chunk plan (cflcore.fl.chunk_plan): the round buffer counted once, and under
``memory_budget_mb: auto`` on CUDA a plan that takes fewer jobs a GPU, visibly, rather than one client a chunk."""
from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from cflcore.fl.chunk_plan import (MIN_CLIENTS_PER_CHUNK, REFERENCE_GPU_MB, ModelCost, clients_per_chunk, gpu_share_mb,
                                   model_cost, plan_chunks)
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer
from cflcore.fl.trainers import VmapTrainer
from cflcore.models import build_model
from engine_runs import cpu_train_spec

STEPS = 3 * 9  # ocfl-cnn's study: 3 local epochs of 267 samples in batches of 32


@pytest.fixture(scope="module")
def ocfl_cnn() -> ModelCost:
    return model_cost("ocfl-cnn", (1, 28, 28), 10, 32)


def test_ocfl_cnn_at_100_clients_on_the_reference_card_trains_more_than_one_client_a_chunk(ocfl_cnn):
    assert REFERENCE_GPU_MB == 40 * 1024
    plan = plan_chunks(ocfl_cnn, 100, STEPS, 0, gpu_jobs=4)  # memory_budget_mb: auto on CUDA, the default 4 jobs
    assert plan.clients_per_chunk >= MIN_CLIENTS_PER_CHUNK > 1
    assert plan.chunks * plan.clients_per_chunk >= 100 and plan.calls_per_round == plan.chunks * STEPS < 100 * STEPS
    assert plan.jobs_per_gpu < 4 and plan.budget_mb == gpu_share_mb(plan.jobs_per_gpu) and plan.peak_mb <= plan.budget_mb
    assert "engine.gpu_jobs: 4 gives a job 7,680 MB" in plan.note and f"engine.gpu_jobs: {plan.jobs_per_gpu}" in plan.note
    # the former rule, 4 jobs' share held fixed, collapses to one client a chunk: that plan now says so
    fixed = plan_chunks(ocfl_cnn, 100, STEPS, gpu_share_mb(4))
    assert fixed.clients_per_chunk == 1 and fixed.calls_per_round == 100 * STEPS
    assert "1 client(s) a chunk" in fixed.note


def test_smaller_rounds_keep_the_configured_jobs_and_say_nothing(ocfl_cnn):
    at15, at30 = plan_chunks(ocfl_cnn, 15, STEPS, 0, gpu_jobs=4), plan_chunks(ocfl_cnn, 30, STEPS, 0, gpu_jobs=4)
    assert (at15.clients_per_chunk, at15.chunks, at15.jobs_per_gpu, at15.note) == (8, 2, 4, None)  # 8 + 7
    assert (at30.clients_per_chunk, at30.chunks, at30.jobs_per_gpu, at30.note) == (6, 5, 4, None)
    assert at15.buffer_mb == 15 * ocfl_cnn.n_full * 4 / 2 ** 20


def test_the_buffer_is_counted_once_per_round_not_per_chunk():
    cost = ModelCost(n_full=1000, activation_numel=0, element_size=4, batch_size=8)  # 24 kB a client's working memory
    budget = 1  # MB: 1,048,576 bytes
    room = 2 ** 20 - 20 * 4000
    assert clients_per_chunk(20, budget, cost) == room // cost.per_client_bytes == 40  # room beyond the round
    per_chunk = (2 ** 20 - 200 * 4000) // 24000  # 10: the 200-row buffer comes off once, not once per chunk
    assert clients_per_chunk(200, budget, cost) == per_chunk == 10
    assert plan_chunks(cost, 200, 1, budget).chunks == 20


def test_the_vmap_trainer_plans_with_the_jobs_a_gpu_and_logs_a_departure(caplog):
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", 0.1), batch_size=8, local_epochs=1, precision="fp64", memory_budget_mb=64)
    trainer = VmapTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, spec, torch.device("cpu"))
    trainer._probe(torch.zeros(2, 1, 8, 8, dtype=torch.float64))
    assert trainer.chunk_plan(5).jobs_per_gpu is None and trainer.chunk_plan(5).budget_mb == 64
    gpu = VmapTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, dataclasses.replace(cpu_train_spec(
        optimizer=ClientOptimizer("sgd", 0.1), batch_size=8, local_epochs=1, precision="fp64", memory_budget_mb=gpu_share_mb(4)),
        planned_gpu_jobs=4), torch.device("cpu"))
    gpu._probe(torch.zeros(2, 1, 8, 8, dtype=torch.float64))
    assert gpu.chunk_plan(5).jobs_per_gpu == 4
    tight = ModelCost(layout.n_full, 10 ** 9, 8, 8)  # activations no share holds: a note, logged once
    gpu._activation_numel = tight.activation_numel
    with caplog.at_level(logging.WARNING):
        plan = gpu.chunk_plan(5)
        gpu.chunk_plan(5)
    assert plan.jobs_per_gpu == 1 and plan.clients_per_chunk == 1 and plan.note
    assert sum("chunk plan" in r.getMessage() for r in caplog.records) == 1


def test_status_json_hardware_holds_the_rounds_chunk_plan():
    from cflcore.data.synthetic import synthetic_federated
    from cflcore.fl.run import build_engine
    from cflcore.strategies import build_strategy

    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.01, "batch_size": 8, "local_epochs": 1,
                             "rounds": 1}, "engine": {"trainer": "vmap"}, "algorithm": {"method": "bnc"}, "device": "cpu"}
    fed = synthetic_federated(n_clients=3, n_train=[12, 9, 16], shape=(1, 8, 8))
    engine, state = build_engine(fed, settings, 0, logging.getLogger("t"), strategy=build_strategy({"method": "bnc"}))
    assert engine.hardware()["chunk_plan"] is None  # no round yet
    engine.run_round(state, 0, 1)
    plan = engine.hardware()["chunk_plan"]
    assert plan["n_clients"] == 3 and plan["chunks"] == 1 and plan["calls_per_round"] == 2  # 16 samples: 2 steps
    assert plan["budget_mb"] == 2048 and plan["jobs_per_gpu"] is None and plan["note"] is None
