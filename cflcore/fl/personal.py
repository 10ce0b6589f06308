"""Personalised FL as an engine option (``engine.personalisation``): pFedMe and Per-FedAvg under any strategy.

* **pFedMe** (Dinh, Tran & Nguyen, NeurIPS 2020, "Personalized Federated Learning with Moreau Envelopes"):
  each local round r takes a fresh mini-batch D and approximately solves the inner problem (paper eq. 7)
  θ̂ = argmin_θ f(θ; D) + λ/2 ||θ − w_r||² with K gradient steps of the personal learning rate (the authors'
  ``pFedMeOptimizer``, which adds an L2 term ``inner_l2`` θ), then updates the local model (Alg. 1 l. 8)
  w_{r+1} = w_r − ηλ(w_r − θ̂). λ(w − θ̂) is ∇F_i(w), the Moreau envelope's gradient (§3), so the step goes
  through the client optimiser (lr η = ``datasets.*.lr``; its weight decay / momentum, 0 in the authors' runs).
  The server's β mixing (Alg. 1 l. 10, w ← (1 − β) w + β mean w_i) is ``engine.server_lr`` β of server SGD
  (ref + β (mean − ref) with ref the cluster model every member started from).
* **Per-FedAvg** (Fallah, Mokhtari & Ozdaglar, NeurIPS 2020, "Personalized Federated Learning with Theoretical
  Guarantees: A Model-Agnostic Meta-Learning Approach", Alg. 1): each local step adapts w̃ = w − α∇f(w; D),
  then moves w by β times ∇f(w̃; D') (Per-FedAvg (FO): the Hessian term dropped) or (I − α d)∇f(w̃; D') with
  d the Hessian-vector product ∇²f(w; D'')∇f(w̃; D') from two gradients (Per-FedAvg (HF):
  (∇f(w + δu; D'') − ∇f(w − δu; D''))/(2δ), as in Fallah et al.'s HF-MAML, AISTATS 2020).
  α = ``datasets.*.lr`` (the authors' ``learning_rate``), β = ``personalisation.beta`` (the meta step goes through
  the client optimiser with lr β). A client is scored after one SGD step of α on a training mini-batch.

Both take τ = E · ⌈n / B⌉ w-updates per client and round (the mini-batch steps FedAvg makes; the authors' code
counts ``local_epochs`` such single-batch steps for all three methods); a step draws its mini-batches from the
client's seeded stream of epochs (cflcore.fl.trainers.LoopTrainer.epoch_batches), which continues into further
epochs when a step needs more than one batch (Per-FedAvg: 2 or 3).

Text against the authors' code (github.com/CharlieDinh/pFedMe, which holds both methods; docs/seed-text-vs-code.md):

parameter: authors' code (the default) | paper's text (the option)

* ``personal_model``: ``local``, the scored "personalised" model is w_R (``userbase.py``'s
  ``persionalized_model_bar`` aliases the module's parameters, which ``UserpFedMe.train`` sets to
  ``local_model``) | ``theta``, θ̂ of the last inner problem.
* ``inner_l2``: 0.001 (``pFedMeOptimizer``'s ``mu``) | 0 (eq. 7 has no such term).
* ``update``: ``fo`` (``UserPerAvg.train``) | ``hf`` (not in the code).
* ``all_clients``: true (``serverpFedMe.train`` trains every user) | true as well (Alg. 1 l. 4); the default
  here is false, 1/participation times less training (config/fedgwc-004.yaml states it).

Not an option: the code's Per-FedAvg scores after an α step and a β step on *test* batches
(``UserPerAvg.train_one_step``, pFedMe issue #19); here one α step on a training batch, as the text says.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import count, islice
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.federated import ClientData
from ..errors import ConfigError
from .flat_params import ModelLayout
from .optim import OptimizerState, optimizer_step
from .trainers import LoopTrainer, TrainResult, TrainSpec, autocast_context

Tensors = list[torch.Tensor]
KINDS, PERSONAL_MODELS, UPDATES = ("none", "pfedme", "perfedavg"), ("local", "theta"), ("fo", "hf")


@dataclass(frozen=True)
class Personalisation:
    """``engine.personalisation`` (cflcore/schemas/config.schema.yaml describes every field), checked; the engine
    builds it from the typed block, ``Personalisation(**cflcore.settings.block_values(engine.personalisation))``."""

    kind: str
    lam: float
    inner_steps: int
    personal_lr: float
    inner_l2: float
    personal_model: str
    all_clients: bool
    beta: float
    update: str
    hf_delta: float

    def __post_init__(self) -> None:
        for name, value, allowed in (("kind", self.kind, KINDS), ("personal_model", self.personal_model, PERSONAL_MODELS),
                                     ("update", self.update, UPDATES)):
            if value not in allowed:
                raise ConfigError(f"engine.personalisation.{name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
        if self.inner_steps < 1:
            raise ConfigError(f"engine.personalisation.inner_steps: {self.inner_steps!r} is not allowed; allowed: an integer >= 1")
        for name in ("lam", "personal_lr", "beta", "hf_delta"):
            if not getattr(self, name) > 0:  # also rejects NaN
                raise ConfigError(f"engine.personalisation.{name}: {getattr(self, name)!r} is not allowed; allowed: a number > 0")
        if not self.inner_l2 >= 0:
            raise ConfigError(f"engine.personalisation.inner_l2: {self.inner_l2!r} is not allowed; allowed: a number >= 0")

    @property
    def active(self) -> bool:
        return self.kind != "none"

    @property
    def keeps_personal_models(self) -> bool:
        """pFedMe keeps one personal model per client (N × P more memory); Per-FedAvg derives it when scoring."""
        return self.kind == "pfedme"


# ---------------------------------------------------------------------------------------------
# The update rules (pure, on lists of tensors)
# ---------------------------------------------------------------------------------------------
def pfedme_inner_step(theta: Tensors, grads: Tensors, w: Tensors, lam: float, lr: float, l2: float) -> Tensors:
    """One step on pFedMe's inner problem (eq. 7): θ − lr (∇f(θ; D) + λ(θ − w) + l2 θ). The l2 term is the
    authors' ``pFedMeOptimizer`` ``mu`` (0.001 there, not in the paper's text; 0 gives the text's step)."""
    direction = torch._foreach_add(grads, torch._foreach_sub(theta, w), alpha=lam)
    if l2:
        direction = torch._foreach_add(direction, theta, alpha=l2)
    return torch._foreach_add(theta, direction, alpha=-lr)


def pfedme_envelope_grad(w: Tensors, theta: Tensors, lam: float) -> Tensors:
    """∇F_i(w) = λ(w − θ̂(w)) (pFedMe §3); a gradient step of η on it is Alg. 1 l. 8, w − ηλ(w − θ̂)."""
    return torch._foreach_mul(torch._foreach_sub(w, theta), lam)


def hvp_finite_difference(grad_plus: Tensors, grad_minus: Tensors, delta: float) -> Tensors:
    """∇²f(w)u ≈ (∇f(w + δu) − ∇f(w − δu)) / (2δ) (Per-FedAvg (HF)'s Hessian-vector product)."""
    return torch._foreach_div(torch._foreach_sub(grad_plus, grad_minus), 2 * delta)


def perfedavg_hf_direction(grad_adapted: Tensors, hvp: Tensors, alpha: float) -> Tensors:
    """(I − α∇²f(w; D''))∇f(w̃; D') = ∇f(w̃; D') − α · hvp (Per-FedAvg Alg. 1, HF estimate of ∇F_i(w))."""
    return torch._foreach_add(grad_adapted, hvp, alpha=-alpha)


def sgd_point(params: Tensors, grads: Tensors, lr: float) -> Tensors:
    """params − lr · grads (Per-FedAvg's adaptation w̃ = w − α∇f(w; D); plain SGD as in both paper and code)."""
    return torch._foreach_add(params, grads, alpha=-lr)


# ---------------------------------------------------------------------------------------------
# The client trainer
# ---------------------------------------------------------------------------------------------
@dataclass
class PersonalResult(TrainResult):
    personal: torch.Tensor | None = None  # pFedMe: (n_clients, n_full) personal models; None otherwise


class PersonalTrainer(LoopTrainer):
    """The loop trainer's module, data and seeded batch stream with pFedMe's or Per-FedAvg's client update."""

    keeps_optimizer_state = False  # its inner problems start their optimiser afresh (optimizer_state per_round)
    stops_early = False  # its steps are pFedMe's / Per-FedAvg's, not the stragglers' (engine.stragglers)

    def __init__(self, model: nn.Module, model_layout: ModelLayout, spec: TrainSpec, device: torch.device,
                 personal: Personalisation):
        super().__init__(model, model_layout, spec, device)
        if not personal.active:
            raise ValueError("PersonalTrainer needs engine.personalisation.kind pfedme or perfedavg")
        self.personal = personal

    # ----- helpers -----------------------------------------------------------------------------
    def steps_per_round(self, client: ClientData) -> int:
        """τ: the mini-batch steps FedAvg makes (E epochs of ⌈n / B⌉ batches)."""
        return self.spec.local_epochs * -(-client.n_train // self.spec.batch_size)

    def stream(self, client: ClientData, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The client's mini-batches epoch after epoch (each epoch's seeded permutation and dropout masks)."""
        for epoch in count():
            yield from self.epoch_batches(client, seed, epoch)

    def set_params(self, values: Tensors) -> None:
        with torch.no_grad():
            torch._foreach_copy_(self.params, values)

    def loss_grads(self, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, Tensors]:
        """The mini-batch loss f(·; D) at the module's current parameters and its gradient."""
        with autocast_context(self.spec, self.device):
            loss = F.cross_entropy(self.forward(xb), yb)
        return loss.detach(), [g.detach() for g in torch.autograd.grad(loss, self.params)]

    def grads_at(self, point: Tensors, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, Tensors]:
        self.set_params(point)
        return self.loss_grads(*batch)

    def done(self) -> None:
        for m in self.dropouts:
            m.mask_source = None

    # ----- pFedMe ------------------------------------------------------------------------------
    def train_pfedme(self, start: torch.Tensor, client: ClientData, seed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """pFedMe's client (Alg. 1 l. 5-8): (new local model w_R, personal model, one loss per local round).

        θ starts at the round's start model and carries over from one local round to the next (the authors'
        code). The personal model is w_R with ``personal_model: local`` (the authors' code: its
        ``persionalized_model_bar`` aliases the module's parameters, which it sets to w_R, pFedMe issue #5) or
        θ̂ of the last local round with ``theta`` (the paper's text)."""
        p = self.personal
        self.model_layout.load(self.model, start)
        w = [t.detach().clone() for t in self.params]
        state, losses = OptimizerState(), []
        for _, (xb, yb) in zip(range(self.steps_per_round(client)), self.stream(client, seed)):
            for k in range(p.inner_steps):
                loss, grads = self.loss_grads(xb, yb)
                self.set_params(pfedme_inner_step([t.detach() for t in self.params], grads, w, p.lam, p.personal_lr, p.inner_l2))
                if k == 0:
                    losses.append(loss)  # f(θ; D) before the round's inner steps
            theta = [t.detach().clone() for t in self.params]
            optimizer_step(self.spec.optimizer, w, pfedme_envelope_grad(w, theta, p.lam), state)
        self.done()
        theta_full = self.model_layout.flatten(self.model)
        self.set_params(w)
        local = self.model_layout.flatten(self.model)
        personal = theta_full if p.personal_model == "theta" else local
        return local, personal, torch.stack(losses).to(torch.float64).cpu().numpy()

    # ----- Per-FedAvg --------------------------------------------------------------------------
    def train_perfedavg(self, start: torch.Tensor, client: ClientData, seed: int) -> tuple[torch.Tensor, np.ndarray]:
        """Per-FedAvg's client (Alg. 1 l. 4-8): τ meta steps, each on 2 (FO) or 3 (HF) fresh mini-batches."""
        p, opt = self.personal, self.spec.optimizer
        meta = replace(opt, lr=p.beta)  # the step that moves w: lr β, the client optimiser's weight decay / momentum
        self.model_layout.load(self.model, start)
        w = [t.detach().clone() for t in self.params]
        state, losses = OptimizerState(), []
        n_batches = 2 if p.update == "fo" else 3
        stream = self.stream(client, seed)
        for _ in range(self.steps_per_round(client)):
            batches = list(islice(stream, n_batches))
            loss, g = self.grads_at(w, batches[0])
            losses.append(loss)  # f(w; D)
            _, direction = self.grads_at(sgd_point(w, g, opt.lr), batches[1])  # ∇f(w̃; D')
            if p.update == "hf":
                _, plus = self.grads_at(torch._foreach_add(w, direction, alpha=p.hf_delta), batches[2])
                _, minus = self.grads_at(torch._foreach_add(w, direction, alpha=-p.hf_delta), batches[2])
                direction = perfedavg_hf_direction(direction, hvp_finite_difference(plus, minus, p.hf_delta), opt.lr)
            optimizer_step(meta, w, direction, state)
        self.done()
        self.set_params(w)
        return self.model_layout.flatten(self.model), torch.stack(losses).to(torch.float64).cpu().numpy()

    def adapt(self, start: torch.Tensor, client: ClientData, seed: int) -> torch.Tensor:
        """Per-FedAvg's personalised model: one SGD step of α on a training mini-batch (the paper's evaluation).
        The authors' ``train_one_step`` takes two steps (α, then β) on *test* batches (pFedMe issue #19, a
        leak); here the client's training data only. The batch is the first of an epoch seeded by ``seed``."""
        self.model.train()
        self.model_layout.load(self.model, start)
        xb, yb = next(self.stream(client, seed))
        _, g = self.loss_grads(xb, yb)
        self.done()
        self.set_params(sgd_point([t.detach() for t in self.params], g, self.spec.optimizer.lr))
        return self.model_layout.flatten(self.model)

    # ----- the trainer interface ---------------------------------------------------------------
    def train(self, starts: torch.Tensor, clients: Sequence[ClientData], client_seeds: Sequence[int],
              out: torch.Tensor | None = None) -> PersonalResult:
        self.model.train()
        if out is None:
            out = torch.empty(starts.shape, dtype=self.spec.dtype, device=self.device)
        personal = torch.empty(starts.shape, dtype=self.spec.dtype, device=self.device) if self.personal.keeps_personal_models else None
        all_losses: list[np.ndarray] = []
        for i, (client, seed) in enumerate(zip(clients, client_seeds)):
            if personal is not None:
                out[i], personal[i], losses = self.train_pfedme(starts[i], client, seed)
            else:
                out[i], losses = self.train_perfedavg(starts[i], client, seed)
            all_losses.append(losses)
        return PersonalResult(out, all_losses, personal)
