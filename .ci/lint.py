#!/usr/bin/env python3
"""`snakemake --lint` for CI: print every finding, and fail on any finding not in ALLOWED.

Snakemake's linter has no switch to accept a finding, and its exit status is 1 whenever it finds anything, so CI
reads the text report instead (rule and snakefile blocks, one `* <title>:` line per finding).

    python .ci/lint.py [snakemake arguments...]     # default: --configfile config/tiny.yaml
"""
from __future__ import annotations

import re
import subprocess
import sys

# finding title -> why it stays
ALLOWED = {
    "Specify a conda environment or container for each rule.":
        "every rule runs the same pip-installed package (cflcore, pyproject.toml) in one venv; a conda env or "
        "container per rule would install that same package again for each rule",
}
HEADER = re.compile(r"^Lints for (.+):$")
FINDING = re.compile(r"^\s+\* (.+?):?$")


def findings(report: str) -> list[tuple[str, str]]:
    """(where, title) of every finding in snakemake's text lint report."""
    out, where = [], None
    for line in report.splitlines():
        if m := HEADER.match(line):
            where = m.group(1)
        elif where and (m := FINDING.match(line)):
            out.append((where, m.group(1).rstrip(":")))
    return out


def main(argv: list[str]) -> int:
    args = argv or ["--configfile", "config/tiny.yaml"]
    p = subprocess.run([sys.executable, "-m", "snakemake", "--lint", *args], capture_output=True, text=True)
    report = p.stdout + p.stderr
    found = findings(report)
    if p.returncode not in (0, 1) or (p.returncode == 1 and not found):
        print(report, file=sys.stderr)
        print(f"lint: snakemake --lint failed (exit {p.returncode}) without a lint report", file=sys.stderr)
        return 2
    new = [(where, title) for where, title in found if title not in ALLOWED]
    for title, reason in ALLOWED.items():
        n = sum(t == title for _, t in found)
        if n:
            print(f"lint: allowed, {n}x: {title} ({reason})")
    for where, title in new:
        print(f"lint: NEW FINDING in {where}: {title}", file=sys.stderr)
    if new:
        print(report, file=sys.stderr)
        return 1
    print(f"lint: OK ({len(found)} allowed findings, no other)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
