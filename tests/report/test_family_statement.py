"""The report says once how many claims a study tests and at what level each (issue 67, cflcore.report.front_page and
cflcore.report.statistics.rules.family_statement)."""
import pandas as pd

from cflcore.report.front_page import claims_checks
from cflcore.report.statistics import rules


def test_the_family_is_stated_once_before_the_first_papers_claims():
    rows = pd.DataFrame([{"paper": p, "claim_id": f"{p}-{i}", "where": "", "claim": "", "ours": "", "holds": h,
                          "lean": "none", "reason": "", "seeds_to_decide": "", "kind": k, "version": "v1",
                          "earlier": "", "note": ""}
                         for p, i, h, k in (("002", 1, "holds", "evidence"), ("002", 2, "n/a", "evidence"),
                                            ("004", 1, "inconclusive", "sanity"), ("004", 2, "contradicted", "evidence"))])
    checks = claims_checks(rows)
    family = rules.family_statement(3, 1)
    assert checks[0].text.startswith(family) and all(family not in c.text for c in checks[1:])
    assert "tests 3 claims (1 of them sanity checks), each at one-sided 2.5% per side" in family
    assert "about 0.1 would hold by chance, and at least one with probability 7%" in family
