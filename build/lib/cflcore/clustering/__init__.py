"""Clustering helpers of the CFL strategies: divergence / temperature (000 Def. 5–7), clusterers
(one class each, registry ``CLUSTERERS``), community detection, and partition bookkeeping."""
