r"""Resampling statistics for comparing systems on the same segments (numpy; one matrix of
resampled segment indices per call, seeded).

For segment scores :math:`x_1..x_n` of a system, the corpus score is the mean
:math:`\bar x`. For two systems A and B on the same segments, :math:`d_i = s(a_i - b_i)` with
:math:`s = +1` when higher is better and :math:`-1` for a distance, so a positive
:math:`\bar d` always means "A is better".

* **Bootstrap interval** (Efron and Tibshirani, 1993; percentile method, as
  ``scipy.stats.bootstrap(method="percentile")``): :math:`R` resamples of the segments with
  replacement; the interval is the 2.5th and 97.5th percentiles of the resampled means.
* **Paired bootstrap** (Koehn, 2004; sacrebleu's ``paired_bs``): the same resampled segment indices
  for both systems; the interval of :math:`\bar d` as above, and the two-sided p-value
  :math:`p = \min(1, 2 \min(P^*(\bar d^* \le 0), P^*(\bar d^* \ge 0)))`: twice the share of
  resampled differences on the far side of 0.
* **Paired approximate randomization** (Noreen, 1989; Riezler and Maxwell, 2005): under the null
  hypothesis the two scores of a segment are exchangeable, so each :math:`d_i` keeps or flips its
  sign with probability 1/2; :math:`p = (1 + \#\{|\bar d^\pi| \ge |\bar d|\}) / (1 + R)`.
* **Holm's step-down correction** of the p-values of all pairs of a metric (family-wise error
  rate), and **clusters** of systems not significantly apart: walking down the ranking, a system
  opens a new cluster when it is significantly worse (adjusted p < alpha) than the best system of
  the current cluster, as WMT's ranking clusters group systems.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairedTest:
    """A against B on the same segments: ``delta`` (mean of A minus mean of B, signed so that
    positive means A is better), its bootstrap interval, and the two p-values."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float  # paired bootstrap
    p_permutation: float
    win_rate: float  # the share of segments where A is strictly better


def _scores(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) == 0:
        raise ValueError(f"{name} must be a non-empty list of segment scores")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds a score that is not finite")
    return array


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` segment indices drawn with replacement (``numpy.random.default_rng(seed)``)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def bootstrap_interval(
    scores: Sequence[float], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``scores`` and its percentile bootstrap interval."""
    x = _scores(scores, "scores")
    means = x[resample_indices(len(x), resamples, seed)].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(x.mean()), float(low), float(high)


def paired_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    higher_is_better: bool = True,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedTest:
    """Paired bootstrap and approximate randomization of A against B (see the module doc)."""
    x, y = _scores(a, "a"), _scores(b, "b")
    if len(x) != len(y):
        raise ValueError(f"a and b must score the same segments: {len(x)} and {len(y)} scores")
    d = (x - y) if higher_is_better else (y - x)
    observed = float(d.mean())
    means = d[resample_indices(len(d), resamples, seed)].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    p_bootstrap = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    signs = np.random.default_rng(seed + 1).choice(np.array([-1.0, 1.0]), size=(resamples, len(d)))
    permuted = np.abs((signs * d).mean(axis=1))
    # A tolerance for floating-point ties (identical systems give exactly equal means).
    extreme = int((permuted >= abs(observed) - 1e-12 * max(1.0, abs(observed))).sum())
    return PairedTest(
        delta=observed,
        ci_low=float(low),
        ci_high=float(high),
        p_value=p_bootstrap,
        p_permutation=(1 + extreme) / (1 + resamples),
        win_rate=float((d > 0).mean()),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (each at most 1, monotone in the sorted order)."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def clusters(ranking: Sequence[str], significantly_better: Callable[[str, str], bool]) -> list[list[str]]:
    """Groups of ``ranking`` (best first) not significantly apart: a system opens a new group when
    the best system of the current group is significantly better than it."""
    groups: list[list[str]] = []
    for name in ranking:
        if groups and not significantly_better(groups[-1][0], name):
            groups[-1].append(name)
        else:
            groups.append([name])
    return groups
