"""The paper checks as plug-ins, one module per paper (docs/architecture.md §10): each registers a
:class:`.base.Paper` with ``@register_paper("<id>")`` and its claims with ``@claim("<id>", "<claim id>")``. The
registry (:data:`.base.PAPERS`) finds them in this package: a lookup by id imports the one module that declares it,
so adding a paper is one new file. The contract and the claims framework: :mod:`.base`; the statistics they use:
:mod:`cflcore.report.statistics.verdicts`."""
