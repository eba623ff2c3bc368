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
  :math:`p = \min(1, 2 \min(1 + \#\{\bar d^* \le 0\}, 1 + \#\{\bar d^* \ge 0\}) / (1 + R))`:
  twice the share of resampled differences on the far side of 0, counted as the permutation
  p-value is (a Monte Carlo p-value is never 0), and at least :math:`2^{1-n}`: with :math:`n`
  segments no paired test of the sign of :math:`\bar d` can be surer (there are :math:`2^n`
  sign assignments), so one segment, or a handful, never makes a difference significant.
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

from moverkit.facts.ties import tie_width


@dataclass(frozen=True)
class PairedTest:
    """A against B on the same segments: ``delta`` (mean of A minus mean of B, signed so that
    positive means A is better), its bootstrap interval, and the two p-values."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float  # paired bootstrap
    p_permutation: float
    win_rate: float  # the share of segments where A is better by more than float32 noise


def _scores(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) == 0:
        raise ValueError(f"{name} must be a non-empty list of segment scores")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds a score that is not finite")
    return array


MAX_RESAMPLES = 1_000_000
"""The most resamples a call takes: Monte Carlo error of a p-value near 0.05 is 2e-4 there
(sacrebleu and COMET default to 1,000)."""
_BLOCK_ENTRIES = 2**22
"""Resampled indices drawn at a time (32 MB of int64), so memory does not grow with ``resamples``."""


def check_resampling(resamples, seed) -> None:
    """``resamples`` an int in [1, :data:`MAX_RESAMPLES`], ``seed`` an int >= 0 (numpy's seeds)."""
    if isinstance(resamples, bool) or not isinstance(resamples, int) or not 1 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be an int from 1 to {MAX_RESAMPLES:,}, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")


def resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The means of ``values`` over ``resamples`` resamples of its entries with replacement
    (``numpy.random.default_rng(seed)``), drawn block by block: the same numbers as one
    ``(resamples, n)`` draw, in bounded memory."""
    check_resampling(resamples, seed)
    n = len(values)
    rng = np.random.default_rng(seed)
    rows = max(1, _BLOCK_ENTRIES // max(n, 1))
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        means[start:stop] = values[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    return means


def bootstrap_interval(
    scores: Sequence[float], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``scores`` and its percentile bootstrap interval."""
    x = _scores(scores, "scores")
    means = resampled_means(x, resamples, seed)
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
    d = segment_differences(x, y, higher_is_better)
    observed = float(d.mean())
    means = resampled_means(d, resamples, seed)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    far_side = min(int((means <= 0).sum()), int((means >= 0).sum()))
    p_bootstrap = min(1.0, max(2 * (1 + far_side) / (1 + resamples), 2.0 ** (1 - len(d))))
    extreme = _randomization_extremes(d, observed, resamples, seed + 1)
    return PairedTest(
        delta=observed,
        ci_low=float(low),
        ci_high=float(high),
        p_value=p_bootstrap,
        p_permutation=(1 + extreme) / (1 + resamples),
        win_rate=float((d > 0).mean()),
    )


def segment_differences(x: np.ndarray, y: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """:math:`d_i = s(a_i - b_i)`, with a difference within float32 noise
    (:func:`~moverkit.facts.ties.tied`) set to 0: a segment the two systems score the same in
    exact arithmetic is a tie, not a win for whichever the CPU's last bit favours."""
    d = (x - y) if higher_is_better else (y - x)
    width = tie_width(np.maximum(np.abs(x), np.abs(y)))
    return np.where(np.abs(d) <= width, 0.0, d)


def _randomization_extremes(d: np.ndarray, observed: float, resamples: int, seed: int) -> int:
    """How many of ``resamples`` random sign flips of ``d`` give a mean at least as far from 0 as
    ``observed`` (block by block, bounded memory)."""
    rng = np.random.default_rng(seed)
    signs = np.array([-1.0, 1.0])
    rows = max(1, _BLOCK_ENTRIES // max(len(d), 1))
    # A permuted mean tied with the observed one (the same sum in another order) counts as extreme.
    bound = abs(observed) - tie_width(observed)
    extreme = 0
    for start in range(0, resamples, rows):
        flips = rng.choice(signs, size=(min(rows, resamples - start), len(d)))
        extreme += int((np.abs((flips * d).mean(axis=1)) >= bound).sum())
    return extreme


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
