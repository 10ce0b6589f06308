"""The per-rule benchmark table and the critical path (cflcore/report/benchmarks.py), on hand-made
Snakemake benchmark TSVs whose sums and longest chain are known."""
import csv
import os
import re
from pathlib import Path

import pytest

from cflcore.report import benchmarks as bm

REPO = Path(__file__).resolve().parents[2]
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_tsv(root: Path, rule: str, job: str, s: float, cpu="", rss=100.0, end: float | None = None,
              repeats: list[tuple[float, str, float]] | None = None) -> Path:
    path = root / rule / f"{job}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = repeats or [(s, cpu, rss)]
    path.write_text(HEADER + "".join(f"{w}\t0:00:01\t{m}\t1\t1\t1\t0\t0\t50\t{c}\n" for w, c, m in rows))
    if end is not None:
        os.utime(path, (end, end))
    return path


# prepare_dataset d (2 s) -> split d/sp/n4/s0 (1 s) -> train b (4 s) -> explain b (20 s) -> report (5 s) = 32 s
# is the longest chain. Trap: split d/sp/n4/s1 (15 s) is a string prefix of d/sp/n4/s10, but not its split;
# a naive prefix test would give d -> s1 -> train s10/a -> evaluate -> report = 2+15+12+1+5 = 35 s.
JOBS = [
    ("prepare_dataset", "d", 2.0, "1.5", 300.0),
    ("split", "d/sp/n4/s0", 1.0, "0.5", 200.0),
    ("split", "d/sp/n4/s1", 15.0, "NA", 210.0),
    ("split", "d/sp/n4/s10", 1.0, "0.75", 220.0),
    ("train", "d/sp/n4/s0/a", 10.0, "9", 900.0),
    ("train", "d/sp/n4/s0/b", 4.0, "3", 800.0),
    ("train", "d/sp/n4/s10/a", 12.0, "11", 950.0),
    ("evaluate", "d/sp/n4/s0/a", 1.0, "0.5", 150.0),
    ("evaluate", "d/sp/n4/s0/b", 1.0, "0.5", 160.0),
    ("evaluate", "d/sp/n4/s10/a", 1.0, "0.5", 170.0),
    ("explain", "d/sp/n4/s0/b", 20.0, "18", 700.0),
    ("report", "report", 5.0, "4", 500.0),
]
CRITICAL = [("prepare_dataset", "d"), ("split", "d/sp/n4/s0"), ("train", "d/sp/n4/s0/b"),
            ("explain", "d/sp/n4/s0/b"), ("report", "report")]


@pytest.fixture
def bench_root(tmp_path):
    root = tmp_path / "benchmarks"
    for i, (rule, job, s, cpu, rss) in enumerate(JOBS):
        write_tsv(root, rule, job, s, cpu, rss, end=1_000_000.0 + 10 * i)
    return root


def jobs_of(root):
    return bm.discover_jobs(root)


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_read_benchmark_repeats_and_na(tmp_path):
    path = write_tsv(tmp_path, "train", "x/y", 0, repeats=[(3.0, "2", 100.0), (5.0, "NA", 300.0)])
    rec = bm.read_benchmark(path, "train", "x/y")
    assert rec.wall_s == 4.0 and rec.cpu_s == 2.0 and rec.max_rss_mb == 300.0
    (tmp_path / "empty.tsv").write_text(HEADER)
    assert bm.read_benchmark(tmp_path / "empty.tsv", "train", "e") is None
    assert bm.read_benchmark(tmp_path / "absent.tsv", "train", "a") is None


def test_discover_jobs_keys_are_wildcard_paths(bench_root):
    jobs = jobs_of(bench_root)
    assert jobs["split"] == ["d/sp/n4/s0", "d/sp/n4/s1", "d/sp/n4/s10"]
    assert jobs["report"] == ["report"]
    assert bm.discover_jobs(bench_root / "nothing") == {}


def test_critical_path_follows_wildcards_not_string_prefixes(bench_root):
    records, missing = bm.read_benchmarks(bench_root, jobs_of(bench_root))
    assert not missing and len(records) == len(JOBS)
    path = bm.critical_path(records)
    assert [(j.rule, j.job) for j in path] == CRITICAL
    assert sum(j.wall_s for j in path) == pytest.approx(32.0)


def test_per_rule_table_sums(bench_root, tmp_path):
    out = tmp_path / "tables"
    result = bm.write_benchmark_tables(bench_root, jobs_of(bench_root), out)
    assert result["critical_path_s"] == pytest.approx(32.0) and result["jobs"] == len(JOBS)
    rows = {r["rule"]: r for r in read_csv(out / "benchmarks_by_rule.csv")}
    # upstream first, then the total
    assert list(rows) == ["prepare_dataset", "split", "train", "evaluate", "explain", "report", bm.ALL_JOBS]
    split = rows["split"]
    assert int(split["jobs"]) == 3
    assert float(split["wall_s_total"]) == pytest.approx(17.0)
    assert float(split["wall_s_mean"]) == pytest.approx(17.0 / 3, abs=1e-3)
    assert float(split["wall_s_max"]) == pytest.approx(15.0)
    assert float(split["cpu_s_total"]) == pytest.approx(1.25)  # NA left out
    assert float(split["cpu_s_mean"]) == pytest.approx(0.625)
    assert float(split["max_rss_mb"]) == pytest.approx(220.0)
    assert int(split["critical_path_jobs"]) == 1 and float(split["critical_path_s"]) == pytest.approx(1.0)
    train = rows["train"]
    assert float(train["wall_s_total"]) == pytest.approx(26.0) and float(train["cpu_s_total"]) == pytest.approx(23.0)
    assert float(train["max_rss_mb"]) == pytest.approx(950.0)
    total = rows[bm.ALL_JOBS]
    assert int(total["jobs"]) == len(JOBS)
    assert float(total["wall_s_total"]) == pytest.approx(sum(j[2] for j in JOBS))
    assert int(total["critical_path_jobs"]) == 5 and float(total["critical_path_s"]) == pytest.approx(32.0)

    chain = read_csv(out / "critical_path.csv")
    assert [(r["rule"], r["job"]) for r in chain] == CRITICAL
    assert [float(r["finish_s"]) for r in chain] == pytest.approx([2.0, 3.0, 7.0, 27.0, 32.0])
    assert float(chain[3]["start_s"]) == pytest.approx(7.0)

    summary = {r["quantity"]: r for r in read_csv(out / "benchmark_summary.csv")}
    assert float(summary["critical path"]["seconds"]) == pytest.approx(32.0)
    assert float(summary["sum of job wall times"]["seconds"]) == pytest.approx(73.0)
    # records end at 1e6 + 10 i; the first starts at 1e6 - 2 (prepare_dataset, 2 s), the last ends at 1e6 + 110
    assert float(summary["span of the records"]["seconds"]) == pytest.approx(112.0)


def test_missing_records_are_listed_not_fatal(bench_root, tmp_path):
    jobs = {**jobs_of(bench_root), "train_evaluate": ["d/sp/n4/s0/a"]}
    result = bm.write_benchmark_tables(bench_root, jobs, tmp_path / "t")
    assert result["missing"] == 1
    summary = {r["quantity"]: r for r in read_csv(tmp_path / "t" / "benchmark_summary.csv")}
    assert "train_evaluate" in summary["jobs without a record"]["note"]


def test_the_report_measures_its_own_row(bench_root, tmp_path):
    """The job writing the tables has no benchmark file yet: its row is this process, started before now."""
    jobs = {k: v for k, v in jobs_of(bench_root).items() if k != "report"}
    own = bm.current_process_record(*bm.REPORT_JOB)
    assert own is not None and own.wall_s > 0 and own.cpu_s > 0 and own.max_rss_mb > 10
    result = bm.write_benchmark_tables(bench_root, jobs, tmp_path / "t", current=bm.REPORT_JOB)
    assert result["critical_path"][-1] == "report:report"
    rows = {r["rule"]: r for r in read_csv(tmp_path / "t" / "benchmarks_by_rule.csv")}
    # the table rounds to 3 decimals, and rounding is monotone: a wall time read later never rounds below this one
    assert int(rows["report"]["jobs"]) == 1 and float(rows["report"]["wall_s_total"]) >= round(own.wall_s, 3)
    assert set(result["files"]) == {"benchmarks_by_rule", "critical_path", "benchmark_summary"}


def test_no_records_gives_empty_tables(tmp_path):
    result = bm.write_benchmark_tables(tmp_path / "none", {}, tmp_path / "t")
    assert result["jobs"] == 0 and result["critical_path"] == []
    assert read_csv(tmp_path / "t" / "critical_path.csv") == []


def test_every_rule_has_a_benchmark_in_the_layout_and_a_place_in_the_dependency_table():
    """Each rule of rules/*.smk writes results/benchmarks/<rule>/...tsv and is named in workflow_upstream() (whose
    upstream rules exist), so the table and the critical path cover the whole DAG."""
    from cflcore.report import catalogue

    text = "\n".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk")))
    # `rule <name>:`, or `use rule <other> as <name> with:` (a rule that inherits another's directives)
    heads = {m.group(1) or m.group(2): m.start() for m in re.finditer(r"^(?:rule (\w+):|use rule \w+ as (\w+) with:)", text,
                                                                      flags=re.M)}
    rules = list(heads)
    # the report's part rules are generated in a loop over the catalogue, each named by catalogue.Part.rule
    assert re.search(r"^for report_part in catalogue\.PARTS:\n\n    rule:\n        name:\n            report_part\.rule\n",
                     text, flags=re.M)
    loop = text[text.index("for report_part in catalogue.PARTS:"):text.index("rule report:")]
    assert "lay.benchmark_file(RESULTS, report_part.rule, report_part.rule)" in loop  # the path from cflcore.layout
    parts = [p.rule for p in catalogue.PARTS]
    upstream = bm.workflow_upstream()
    assert set(rules) - {"all"} | set(parts) == set(upstream)
    for rule, ups in upstream.items():
        assert set(ups) <= set(rules) | set(parts), rule
    for rule in rules:
        body = text[heads[rule]:]
        nxt = re.search(r"^(?:use )?rule \w+", body[1:], flags=re.M)
        body = body[: nxt.start() + 1] if nxt else body
        # the path is results/benchmarks/<rule>/<wildcards>.tsv, through cflcore.layout.benchmark_file or spelt out
        assert re.search(r'benchmark:\s*\n\s*(lay\.benchmark_file\(RESULTS, "' + rule + '", |f"\\{RESULTS\\}/benchmarks/' + rule + "/)", body), rule
