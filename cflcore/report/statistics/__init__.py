"""The report's statistics, one package that the paper plug-ins, the cross-paper comparison and the explain figures
import: the seeds' summaries (:mod:`.seed_stats`: mean ± sample std, the seeds that found the groups), the verdict
framework of the paper checks (:mod:`.verdicts`: parts, their t-tests with the floored standard error, Holm over a
claim's parts, the verdict, its lean and reason) and the ranks and critical-difference analysis (:mod:`.cd`: Friedman,
Wilcoxon–Holm, Nemenyi, Demšar 2006, and its diagram)."""
