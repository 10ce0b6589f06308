"""Re-verdict the home checks whose per-seed values docs/results.md quotes, under issue 67's rule and, beside it, the
rule of 86306b5 (the claims' earlier version): the report's own claims (cflcore.report.papers.home) on runs frames
built from the quoted values. No Parquet is read and nothing is retrained; a study whose per-seed values are not
quoted needs its report re-made from its results folder (docs/results.md, "Verdicts under issue 67's rules").

Where docs/results.md quotes only the misses of an 18-seed study (the seeds below 0.9 with their ARIs, the others
"at 1.00" or consistent with the quoted mean only at 1.00), the others are set at 1.00; the share rule reads only how
many seeds reach 0.9.

    PYTHONPATH=. python benchmarks/reverdict_quoted.py
"""
from __future__ import annotations

import pandas as pd

from cflcore.report.papers import base as cl
from cflcore.report.papers import home

QUOTED = {  # (study, its docs/results.md table): (variant, split, clients, per-seed final ARI)
    "IFCA home check, 6 seeds (048349f)": (home.IFCA_VARIANT, home.IFCA_SPLIT, 40,
                                           [1.00, 0.70, 1.00, 0.65, 1.00, 1.00]),
    "IFCA, 40 clients a group, 6 seeds (d6a5781)": (home.IFCA_VARIANT, home.IFCA_SPLIT, 160,
                                                    [1.00, 1.00, 1.00, 1.00, 0.69, 1.00]),
    "IFCA home check at 18 seeds (5a37ce4)": (home.IFCA_VARIANT, home.IFCA_SPLIT, 40,
                                              [1.00, 0.70, 1.00, 0.65, 1.00, 1.00] + [1.00] * 6
                                              + [0.68, 1.00, 1.00, 0.70, 0.62, 1.00]),
    "IFCA, 40 clients a group, 18 seeds (5a37ce4)": (home.IFCA_VARIANT, home.IFCA_SPLIT, 160,
                                                     [1.00] * 4 + [0.69] + [1.00] * 13),
    "SCL home check, 6 seeds (586e593)": (home.SCL_VARIANT, home.SCL_SPLIT, 10, [0.00, 1.00, 0.72, 1.00, 1.00, 0.00]),
    "SCL, 2 local epochs, 6 seeds (f33f995)": (home.SCL_VARIANT, home.SCL_SPLIT, 10, [1.00] * 6),
    "SCL, 2 local epochs, issue 67's rerun at c3b7635": (home.SCL_VARIANT, home.SCL_SPLIT, 10,
                                                         [1.00, 1.00, 0.72, 0.72, 1.00, 1.00]),
}
FESEM_ACC = ([0.045, 0.091, 0.118, 0.148, 0.115, 0.106], [0.052, 0.097, 0.121, 0.142, 0.115, 0.106])
"""FeSEM's and FedAvg's local accuracy per seed, docs/results.md "FeSEM on its home ground" (102b741)."""


def runs(variant: str, split: str, clients: int, aris: list[float]) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "mnist5k", "clients": clients, "seed": s, "algorithm": variant,
                          "algorithm_base": variant, "split": split, "split_base": split, "ari": a,
                          "n_clusters": 2.0, "local_acc": 0.9} for s, a in enumerate(aris)])


def fesem_runs() -> pd.DataFrame:
    frames = [runs(v, home.FESEM_SPLIT, 30, [0.0] * 6).assign(local_acc=acc)
              for v, acc in zip((home.FESEM_VARIANT, home.FEDAVG_VARIANT), FESEM_ACC)]
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    cases = [(name, runs(*args)) for name, args in QUOTED.items()]
    cases.append(("FeSEM home check, 6 seeds (102b741)", fesem_runs()))
    for name, frame in cases:
        rows = cl.check_claims([home.PAPER], cl.ClaimData(frame)).set_index("claim_id")
        row = rows[rows["holds"] != "n/a"].iloc[0]
        print(f"{name}: {row.name}: {row['holds']} (lean {row['lean']}; seeds to decide: "
              f"{row['seeds_to_decide'] or '–'}) | earlier: {row['earlier']}")


if __name__ == "__main__":
    main()
