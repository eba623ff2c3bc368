"""Fitting a combination (the package doc of :mod:`moverkit.combination`): the segment level by NNLS, the
system level by NNLS shrunk towards equal weights as far as leaving one test set out shows it helps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from moverkit.combination.file import Combination, SegmentLevel, SystemLevel

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""The shrinkage grid of the system level: the share ``a`` of the NNLS weights beside equal ones (package doc)."""


def fit_segment(features: Mapping[str, Sequence[float]], human: Sequence[float]) -> SegmentLevel:
    """Fit the segment level (package doc) on oriented component scores ``features`` (name -> one
    score per segment) and the segments' ``human`` scores; the result follows ``features``' order.
    A constant component (std 0) is an error naming it, and so is a fit where every weight is 0
    (no component agrees with the humans)."""
    from scipy.optimize import nnls

    names = list(features)
    if len(human) < 2:
        raise ValueError(f"fitting needs at least two segments, got {len(human)}")
    x = _matrix(features, len(human))
    mean, std = x.mean(axis=0), x.std(axis=0)
    for name, s in zip(names, std):
        if not s > 0:
            raise ValueError(f"component {name!r} is constant on the training segments (std 0): it cannot be scaled")
    h = np.asarray(human, dtype=float)
    if not np.isfinite(h).all():
        raise ValueError("a human score is not finite")
    weights, _ = nnls((x - mean) / std, h - h.mean())
    _check_not_all_zero(weights, names)
    return SegmentLevel(_floats(mean), _floats(std), _floats(weights))


class SystemFit(NamedTuple):
    """:func:`fit_system`'s result: the components (the first test set's order), the fit, the
    shrinkage ``alpha`` chosen, and ``held_out``: per ``a`` of the grid, ``(agreeing, total)``
    system pairs of the training sets left out one at a time (empty with one test set: ``alpha``
    is then 0)."""

    components: tuple[str, ...]
    level: SystemLevel
    alpha: float
    held_out: dict[float, tuple[int, int]]


def fit_system(
    test_sets: Sequence[tuple[Mapping[str, Mapping[str, float]], Mapping[str, float]]],
    alphas: Sequence[float] = ALPHAS,
) -> SystemFit:
    """Fit the system level (package doc) on ``test_sets``: each a pair ``(features, human)`` with
    ``features`` component name -> {system: oriented system score} and ``human`` {system: human
    score}; every test set has the same components and scores the systems of its ``human``, at
    least two of them, whose human scores are not all equal."""
    if not test_sets:
        raise ValueError("fit_system needs at least one test set")
    names = tuple(test_sets[0][0])
    scores, humans = [], []
    for t, (features, human) in enumerate(test_sets):
        if tuple(features) != names:
            raise ValueError(f"test set {t}: components {list(features)}, the first test set's are {list(names)}")
        systems = sorted(human)
        for name in names:
            if sorted(features[name]) != systems:
                raise ValueError(f"test set {t}: component {name!r} does not score exactly the systems of the humans")
        x = np.array([[features[name][s] for name in names] for s in systems], dtype=float).reshape(-1, len(names))
        h = np.array([human[s] for s in systems], dtype=float)
        if not (np.isfinite(x).all() and np.isfinite(h).all()):
            raise ValueError(f"test set {t}: a score is not finite")
        if len(h) < 2 or not h.std() > 0:
            raise ValueError(f"test set {t}: {len(h)} system(s) whose human scores are all equal: it orders nothing")
        scores.append(x)
        humans.append(h)
    centred = np.concatenate([x - x.mean(axis=0) for x in scores])
    std = np.sqrt((centred**2).sum(axis=0) / (len(centred) - len(scores)))
    for name, s in zip(names, std):
        if not s > 0:
            raise ValueError(f"component {name!r} gives every system of every test set the same score (std 0)")
    z = [_z(x) for x in scores]
    zh = [_z(h[:, None])[:, 0] for h in humans]
    held_out = {}
    for alpha in alphas if len(z) > 1 else ():
        agree = total = 0
        for t in range(len(z)):
            rest = [k for k in range(len(z)) if k != t]
            w = _shrunk(_nnls([z[k] for k in rest], [zh[k] for k in rest]), alpha)
            a, n = _pairwise_array(z[t] @ w, zh[t])
            agree, total = agree + a, total + n
        held_out[float(alpha)] = (agree, total)
    alpha = max(held_out, key=lambda a: (held_out[a][0], -a)) if held_out else 0.0
    weights = _shrunk(_nnls(z, zh), alpha)
    return SystemFit(names, SystemLevel(_floats(std), _floats(weights)), alpha, held_out)


def _z(x: np.ndarray) -> np.ndarray:
    """Columns z-normalized (ddof 0); a constant column is 0."""
    std = x.std(axis=0)
    return np.divide(x - x.mean(axis=0), std, out=np.zeros_like(x), where=std > 0)


def _nnls(z: Sequence[np.ndarray], zh: Sequence[np.ndarray]) -> np.ndarray:
    from scipy.optimize import nnls

    return nnls(np.concatenate(z), np.concatenate(zh))[0]


def _shrunk(v: np.ndarray, alpha: float) -> np.ndarray:
    """``w(a) = (1 - a) e + a v / sum(v)``; equal weights where NNLS gave every component 0."""
    equal = np.full(len(v), 1.0 / len(v))
    return equal if not v.sum() > 0 else (1 - alpha) * equal + alpha * v / v.sum()


def _pairwise_array(scores: np.ndarray, human: np.ndarray) -> tuple[int, int]:
    from moverkit.judgments.correlation import pairwise

    return pairwise(dict(enumerate(scores)), dict(enumerate(human)), True)


def _matrix(features: Mapping[str, Sequence[float]], n: int) -> np.ndarray:
    """Segments x components, every column ``n`` finite numbers."""
    if not features:
        raise ValueError("no components: features is empty")
    columns = []
    for name, values in features.items():
        column = np.asarray(values, dtype=float)
        if column.shape != (n,):
            raise ValueError(f"component {name!r} has {column.size} scores for {n} segments")
        if not np.isfinite(column).all():
            raise ValueError(f"component {name!r} has a score that is not finite")
        columns.append(column)
    return np.stack(columns, axis=1)


def _check_not_all_zero(weights: np.ndarray, names) -> None:
    if not (weights > 0).any():
        raise ValueError(f"every weight is 0: none of {', '.join(names)} agrees with the human scores on this data")


def _floats(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def fit(
    segment: tuple[Mapping[str, Sequence[float]], Sequence[float]] | None = None,
    system: Sequence[tuple[Mapping[str, Mapping[str, float]], Mapping[str, float]]] | None = None,
    *,
    metric_kwargs: Mapping[str, Mapping] | None = None,
    fitted_on: Mapping | None = None,
) -> Combination:
    """A :class:`Combination` from ``segment`` = ``(features, human)`` (:func:`fit_segment`)
    and/or ``system`` = test sets (:func:`fit_system`), with the same components in the same order.
    ``fitted_on["system"]`` gets the shrinkage chosen (``alpha``) and its held-out pairs per ``a``."""
    if segment is None and system is None:
        raise ValueError("fit: give segment data, system data or both")
    components, segment_fit, system_fit = None, None, None
    fitted_on = dict(fitted_on or {})
    if segment is not None:
        components = tuple(segment[0])
        segment_fit = fit_segment(*segment)
    if system is not None:
        chosen = fit_system(system)
        if components is not None and chosen.components != components:
            raise ValueError(f"fit: segment components {list(components)}, system components {list(chosen.components)}")
        components, system_fit = chosen.components, chosen.level
        fitted_on["system"] = {
            **fitted_on.get("system", {}),
            "alpha": chosen.alpha,
            "held_out_pairs": {str(a): list(pair) for a, pair in chosen.held_out.items()},
        }
    return Combination(components, dict(metric_kwargs or {}), segment_fit, system_fit, fitted_on)
