"""How much domain signal FedGWC has to work with, and what scale it needs (a measurement script, not a test).

FedGWC (004) sees a client only through its per-step training losses. Whether it can separate two visual
domains depends on three numbers of those losses, measured here on a real split, and then on the scale
(K, N, α, rounds) at which its server logic turns that signal into clusters, measured on synthetic traces
with the same ratios.

``loss-gap SPLIT_DIR``  FedAvg (plain torch; one local epoch in batches, ``--optimizer`` Adam or SGD with
    ``--lr`` and ``--weight-decay``, ``--sampled`` of K clients a round, the model of the offline studies: tinyvgg,
    hidden 8) on a ``domains`` split of MNIST-5k; for each of ``--windows`` windows of the rounds it prints the
    noisy-minus-clean gap of the per-step losses (centred per round, step and domain),
    the standard deviation of the clients' mean offsets within a domain, and of a step's loss around its
    client's round mean. ``--noise fixed`` uses the split's images (noise drawn once per client, clipped, as
    cflcore.data.transforms does); ``redrawn`` draws the same clipped noise afresh for every batch, and
    ``redrawn-unclipped`` unclipped, as the authors' code (davedleo/FedGWC) does.
``mechanism``  FedGWC's own select_clients / aggregate (cflcore.strategies.fedgwc, zero stand-in updates) on
    traces where client k of domain d reports, at step s, ``2 − s/(S−1) + gap·d + o_k + e`` with o_k ~ N(0,
    offset²) fixed and e ~ N(0, step²) fresh; prints the final Rand index and cluster count per seed (the
    traces of tests/strategies/test_fedgwc_mechanism.py, with the ratios as arguments).
``run-signal RUN_DIR SPLIT_DIR``  the same quantities read back from a finished FedGWC run on a ``domains``
    split: per window of rounds, the clean and noisy clients' mean training loss and their gap in client-offset
    and round-to-round standard deviations (history.parquet); per Alg. 2 snapshot of the whole federation
    (server.parquet), the best Davies–Bouldin score and the Rand index of W's two-way ``cluster_qr`` labels
    against the true domains, whether or not Alg. 2 accepted them; and the final Rand index.

    python benchmarks/fedgwc_domain_signal.py loss-gap results/fedgwc-004-domains/splits/mnist5k/domains-noise/n100/s0
    python benchmarks/fedgwc_domain_signal.py loss-gap results/fedgwc-004-domains/splits/mnist5k/domains-noise/n100/s1 \
        --rounds 1600 --sampled 10 --steps 8 --windows 8 --optimizer sgd --lr 0.1 --weight-decay 4e-4
    python benchmarks/fedgwc_domain_signal.py mechanism --gap 1 --offset 0.167 --step 0.5 --rounds 4000 --steps 8
    python benchmarks/fedgwc_domain_signal.py run-signal results/fedgwc-004-domains/runs/mnist5k/domains-noise/n100/s1/fedgwc \
        results/fedgwc-004-domains/splits/mnist5k/domains-noise/n100/s1
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.metrics import rand_score


def loss_gap(split_dir: Path, noise: str, rounds: int, batch: int, steps: int, lr: float, sampled: int,
             seed: int, optimizer: str = "adam", weight_decay: float = 0.0, windows: int = 4) -> pd.DataFrame:
    """Per window of rounds: gap, client-offset sd and step sd of the per-step training losses (module docstring)."""
    from cflcore.data import store, transforms
    from cflcore.models import build_model

    dataset = split_dir.parents[4] / "data" / f"{split_dir.parents[2].name}.parquet"
    fed = store.load_federated(dataset, split_dir)
    domains = fed.manifest["domains"]
    data = store.load_dataset(dataset)
    clean = [store.to_float_images(data.images[data.rows_of(c.idx_train)]) for c in fed.clients]
    torch.manual_seed(seed)
    model = build_model("tinyvgg", fed.shape[0], fed.shape[1:], fed.n_classes, hidden=8)
    global_params = [p.detach().clone() for p in model.parameters()]
    gen, rng = torch.Generator().manual_seed(seed), np.random.default_rng(seed)
    truth = np.asarray(fed.true_clusters)
    records = []
    for rnd in range(rounds):
        chosen = rng.choice(len(truth), sampled, replace=False)
        mean = [torch.zeros_like(p) for p in global_params]
        for k in chosen:
            client = fed.clients[k]
            with torch.no_grad():
                for p, g in zip(model.parameters(), global_params):
                    p.copy_(g)
            opt = (torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay) if optimizer == "adam"
                   else torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay))
            perm = torch.randperm(len(client.y_train), generator=gen)
            for s, lo in enumerate(range(0, min(len(perm), steps * batch), batch)):
                idx = perm[lo:lo + batch]
                x = client.x_train[idx]
                if noise != "fixed" and domains[k]["domain"] == "noise":
                    std = float(domains[k]["noise_std"])
                    x = (transforms.gaussian_noise(clean[k][idx], std, gen) if noise == "redrawn"
                         else clean[k][idx] + torch.randn(clean[k][idx].shape, generator=gen) * std)
                loss = F.cross_entropy(model(x), client.y_train[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                records.append((rnd, int(k), s, loss.item()))
            for m, p in zip(mean, model.parameters()):
                m += p.detach() / sampled
        global_params = mean
    d = pd.DataFrame(records, columns=["round", "client", "step", "loss"])
    d["domain"] = truth[d["client"]]
    rows = []
    q = max(rounds // windows, 1)
    for lo in range(0, rounds, q):
        w = d[(d["round"] >= lo) & (d["round"] < lo + q)].copy()
        w["centred"] = w["loss"] - w.groupby(["round", "step", "domain"])["loss"].transform("mean")
        by = w.groupby(["round", "step", "domain"])["loss"].mean().unstack("domain")
        gap = float((by[1] - by[0]).mean())
        offset = float(w.groupby("client")["centred"].mean().std())
        step = float((w["centred"] - w.groupby(["round", "client"])["centred"].transform("mean")).std())
        rows.append({"rounds": f"{lo}-{lo + q}", "mean_loss": w["loss"].mean(), "gap": gap, "offset_sd": offset,
                     "step_sd": step, "gap_per_offset": gap / offset, "gap_per_step": gap / step})
    return pd.DataFrame(rows)


def mechanism(seed: int, clients: int, participation: float, rounds: int, gap: float, offset: float, step: float,
              steps: int, epsilon: float = 1e-5, n_domains: int = 2) -> tuple[float, int]:
    """Final Rand index and cluster count of FedGWC's server logic on synthetic loss traces."""
    from cflcore.strategies.base import ClusterAssignment, RoundUpdates, StrategyContext, build_strategy

    rng = np.random.default_rng([seed, 27])
    domains = np.arange(clients) % n_domains
    offsets = rng.normal(0.0, offset, clients)
    strategy = build_strategy({"method": "fedgwc", "participation": participation, "beta": 0.5,
                               "epsilon": epsilon, "db_every_round": False})
    strategy.setup(StrategyContext(n_clients=clients, n_params=1, seed=seed, device=torch.device("cpu")))
    base = np.linspace(2.0, 1.0, steps)
    for rnd in range(rounds):
        chosen = strategy.select_clients(rnd, np.arange(clients))
        losses = base + gap * domains[chosen, None] + offsets[chosen, None] + rng.normal(0.0, step, (chosen.size, steps))
        strategy.aggregate(RoundUpdates(round=rnd, clients=np.asarray(chosen, dtype=np.int64),
                                        deltas=torch.zeros(chosen.size, 1), start=None, step_losses=list(losses),
                                        n_samples=np.full(chosen.size, 100), evaluate=lambda *a, **k: None,
                                        previous=ClusterAssignment.single(clients)))
    return rand_score(domains, strategy.assignment.labels), strategy.assignment.n_clusters


def run_signal(run_dir: Path, split_dir: Path, window: int = 250) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """A finished run's loss gap per window, its snapshots' two-way labels against the domains, its final Rand."""
    from sklearn.cluster import SpectralClustering

    from cflcore import filenames as fn
    from cflcore.evaluate.clustering import load_ground_truth
    from cflcore.report.fedgwc_figures import matrix_snapshots

    domain = load_ground_truth(split_dir / fn.MANIFEST).cluster_of_client
    history = pd.read_parquet(run_dir / fn.HISTORY)
    trained = history[history["sampled"] & history["train_loss"].notna()].copy()
    trained["domain"] = domain[trained["client"].to_numpy()]
    trained["window"] = trained["round"] // window * window
    gaps = []
    for start, rows in trained.groupby("window"):
        per_client = rows.groupby(["client", "domain"])["train_loss"].mean().reset_index()
        means = per_client.groupby("domain")["train_loss"].mean()
        client_sd = per_client.groupby("domain")["train_loss"].std().mean()
        round_sd = (rows["train_loss"] - rows.groupby("client")["train_loss"].transform("mean")).std()
        gap = means.iloc[-1] - means.iloc[0]
        gaps.append({"rounds": f"{start}-{start + window - 1}", "clean": means.iloc[0], "noisy": means.iloc[-1],
                     "gap": gap, "gap/client_sd": gap / client_sd, "gap/round_sd": gap / round_sd})
    snapshots = []
    for snap in matrix_snapshots(pd.read_parquet(run_dir / fn.SERVER)):
        if snap.members.size != domain.size or np.ptp(snap.affinity) <= 1e-12:
            continue  # only Alg. 2 on the whole federation, before any split
        labels = SpectralClustering(n_clusters=2, n_components=2, affinity="precomputed", random_state=0,
                                    assign_labels="cluster_qr").fit_predict(snap.affinity)
        finite = [v for v in snap.davies_bouldin if v is not None]
        snapshots.append({"round": snap.round, "min_db": min(finite) if finite else np.nan,
                          "rand_two_way": rand_score(domain[snap.members], labels), "decided": bool(snap.decided)})
    last = history[history["round"] == history["round"].max()].sort_values("client")
    return pd.DataFrame(gaps), pd.DataFrame(snapshots), rand_score(domain, last["cluster"].to_numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("loss-gap")
    a.add_argument("split_dir", type=Path)
    a.add_argument("--noise", choices=["fixed", "redrawn", "redrawn-unclipped"], default="fixed")
    a.add_argument("--rounds", type=int, default=120)
    a.add_argument("--batch", type=int, default=64)
    a.add_argument("--steps", type=int, default=7)
    a.add_argument("--lr", type=float, default=0.003)
    a.add_argument("--sampled", type=int, default=20)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    a.add_argument("--weight-decay", type=float, default=0.0)
    a.add_argument("--windows", type=int, default=4, help="windows of rounds the table is split into")
    b = sub.add_parser("mechanism")
    b.add_argument("--gap", type=float, default=1.0)
    b.add_argument("--offset", type=float, default=0.1)
    b.add_argument("--step", type=float, default=0.1)
    b.add_argument("--steps", type=int, default=7)
    b.add_argument("--clients", type=int, default=100)
    b.add_argument("--participation", type=float, default=0.1)
    b.add_argument("--rounds", type=int, default=3000)
    b.add_argument("--seeds", type=int, default=3)
    b.add_argument("--epsilon", type=float, default=1e-5, help="FedGWC's threshold on the running MSE of P")
    c = sub.add_parser("run-signal")
    c.add_argument("run_dir", type=Path)
    c.add_argument("split_dir", type=Path)
    c.add_argument("--window", type=int, default=250)
    args = ap.parse_args()
    if args.command == "run-signal":
        gaps, snapshots, final = run_signal(args.run_dir, args.split_dir, args.window)
        print(gaps.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(snapshots.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"final Rand {final:.3f}")
    elif args.command == "loss-gap":
        table = loss_gap(args.split_dir, args.noise, args.rounds, args.batch, args.steps, args.lr, args.sampled,
                         args.seed, args.optimizer, args.weight_decay, args.windows)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    else:
        for seed in range(args.seeds):
            rand, n = mechanism(seed, args.clients, args.participation, args.rounds, args.gap, args.offset,
                                args.step, args.steps, args.epsilon)
            print(f"seed {seed}: Rand {rand:.3f}, {n} clusters", flush=True)


if __name__ == "__main__":
    main()
