"""Agreement of metric scores with human scores: every correlation and rank statistic moverkit's
benchmarks, fitting and fine-tuning report, in one place.

* :func:`pearson`, :func:`kendall` (tau-b) and :func:`correlate` (both) of one group;
* :func:`pairwise`: the pairwise accuracy of system scores (Kocmi et al., 2021, "To Ship or Not to
  Ship"), a tie counting as wrong;
* :func:`acc_eq`: tie-calibrated pairwise accuracy (Deutsch, Foster and Freitag, 2023, "Ties
  Matter: Meta-Evaluating Modern Metrics with Pairwise Accuracy and Tie Calibration"), as
  google-research/mt-metrics-eval computes it (``stats.KendallWithTiesOpt``, variant ``acc23``),
  the segment-level measure of the WMT23-25 metrics tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import NamedTuple

import numpy as np

from moverkit.facts.ties import first_best


def pearson(scores: Sequence[float], human: Sequence[float]) -> float:
    """Pearson r; NaN with fewer than three values (two points always correlate +-1) or a constant side."""
    from scipy import stats

    if len(scores) < 3 or len(set(scores)) < 2 or len(set(human)) < 2:
        return math.nan
    return float(stats.pearsonr(scores, human)[0])


def kendall(scores: Sequence[float], human: Sequence[float]) -> float:
    """Kendall tau-b (scipy's): NaN with a constant side."""
    from scipy import stats

    return float(stats.kendalltau(scores, human)[0])


def correlate(scores: Sequence[float], human: Sequence[float]) -> tuple[float, float]:
    """Pearson r and Kendall tau-b of one group."""
    return pearson(scores, human), kendall(scores, human)


def pairwise(system_scores: Mapping[str, float], human: Mapping[str, float], higher_is_better: bool) -> tuple[int, int]:
    """``(agreeing, total)`` over the system pairs of one test set (Kocmi et al., 2021): a pair
    agrees when the metric orders it strictly as the humans do (a tie on either side is wrong)."""
    sign = 1.0 if higher_is_better else -1.0
    agree = total = 0
    for a, b in combinations(sorted(system_scores), 2):
        total += 1
        agree += bool((sign * (system_scores[a] - system_scores[b])) * (human[a] - human[b]) > 0)
    return agree, total


class TieCalibrated(NamedTuple):
    """:func:`acc_eq`'s result: the accuracy at the best threshold, the threshold, and the rows averaged."""

    accuracy: float
    epsilon: float
    rows: int


def acc_eq(human: Sequence[Sequence[float]], metric: Sequence[Sequence[float]]) -> TieCalibrated:
    """Tie-calibrated pairwise accuracy, acc_eq (Deutsch, Foster and Freitag, 2023, Eq. 4 and Sec. 5).

    ``human`` and ``metric`` are rows of aligned scores (higher is better on both): a row is a group
    whose items are compared with each other (a language pair's systems, or one segment's
    translations by every system: mt-metrics-eval's ``average_by="item"``); rows may differ in length.

    For a threshold ``eps >= 0``, the metric ties two items when ``|m_i - m_j| <= eps``. Over the
    pairs ``i < j`` of a row, with ``C`` the pairs both sides order strictly the same way and ``T``
    the pairs both sides tie (humans exactly, the metric within ``eps``)::

        acc_eq(row, eps) = (C + T) / (number of pairs of the row)

    A pair the humans tie counts as right only if the metric ties it too; a pair only the metric
    ties counts as wrong. ``acc_eq(eps)`` is the mean over the rows that have a pair (a row of one
    item is left out), and the result is its maximum over the candidate thresholds: 0 and every
    ``|m_i - m_j|`` of a pair of any row (one threshold for all rows). Among equal maxima (equal
    within 1e-12, the float noise of the running sum) the smallest threshold wins.

    This is mt-metrics-eval's ``stats.KendallWithTiesOpt(variant="acc23", sample_rate=1.0)`` (its
    ``tau_optimization``): every pair is used, as the WMT23-25 tasks do (``sample_rate=1.0``; the
    function's default, 0.1, samples pairs at random). Without human ties, no threshold above 0
    can help (a new metric tie is always wrong): acc_eq is then the share of pairs ordered strictly
    alike, exact metric ties counting as wrong. An empty input (no row with a pair) is a ValueError.
    """
    if len(human) != len(metric):
        raise ValueError(f"acc_eq: {len(human)} rows of human scores, {len(metric)} of metric scores")
    gains, losses, diffs, weights = [], [], [], []
    rows = 0
    for k, (h, m) in enumerate(zip(human, metric)):
        h, m = np.asarray(h, dtype=float), np.asarray(m, dtype=float)
        if h.shape != m.shape or h.ndim != 1:
            raise ValueError(f"acc_eq: row {k} has {h.size} human scores and {m.size} metric scores")
        if not (np.isfinite(h).all() and np.isfinite(m).all()):
            raise ValueError(f"acc_eq: row {k} holds a score that is not finite")
        if h.size < 2:
            continue
        rows += 1
        i, j = np.triu_indices(h.size, 1)
        dh, dm = h[i] - h[j], m[i] - m[j]
        right = ((dh == 0) & (dm == 0)) | (dh * dm > 0)  # at eps = 0
        right_if_tied = dh == 0  # once the metric ties the pair
        gains.append(right_if_tied.astype(float) - right)
        losses.append(right)
        diffs.append(np.abs(dm))
        weights.append(np.full(dh.size, 1.0 / dh.size))
    if rows == 0:
        raise ValueError("acc_eq: no row has two items to compare")
    gain, right, diff, weight = (np.concatenate(v) for v in (gains, losses, diffs, weights))
    base = float(right @ weight) / rows
    order = np.argsort(diff, kind="stable")
    diff = diff[order]
    running = base + np.cumsum(gain[order] * weight[order]) / rows
    last = np.r_[diff[1:] != diff[:-1], True]  # the last pair of each distinct |m_i - m_j|
    thresholds = np.r_[0.0, diff[last]]
    values = np.r_[base, running[last]]
    if diff[0] == 0:  # pairs the metric already ties exactly: the threshold 0 is their value
        thresholds, values = thresholds[1:], values[1:]
    best = first_best(values)  # the smallest threshold of the best accuracy, up to float noise
    return TieCalibrated(float(values[best]), float(thresholds[best]), rows)
