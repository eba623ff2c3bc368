"""The metric maths the metrics share, apart from what a call runs on: cosines between token
clouds, BERTScore's greedy matching and its F-measure (Zhang et al., 2020, Eqs. 3-5). Imports
nothing of moverkit: kept out of ``base``, which holds the process's ground (checks, warnings,
devices, the heap, padding)."""

from moverkit._core.maths.matching import cosine_matrix, f_measure, greedy_match, self_cosine_one

__all__ = ["cosine_matrix", "f_measure", "greedy_match", "self_cosine_one"]
