"""A calibrated combination of metrics: one score from several moverkit metrics and sacrebleu's chrF
and BLEU, with its normalization statistics and weights fitted on human judgments.

Components are the metrics of :data:`moverkit.METRICS` (each judged on its main output,
:attr:`moverkit.specs.MetricSpec.main`) and :data:`ANCHORS`. Each is **oriented** so that higher
is better: ``o_m = x_m`` for a similarity, ``o_m = -x_m`` for a distance (``lazy_emd``).

Segment level (one score per prediction), fitted on segments with human scores ``h_i``::

    z_im = (o_im - mean_m) / std_m                 mean_m, std_m (ddof 0): of the training segments
    w    = argmin_{w >= 0} || (h - mean(h)) - Z w ||^2     (non-negative least squares)
    combined_i = sum_m w_m z_im

System level (one score per system's corpus), on test sets ``t`` (a language pair: one set of
references and the systems translating it), with ``s_tjm`` the component's system score of system
``j`` (a moverkit metric's: the mean of its oriented segment scores; chrF's and BLEU's: sacrebleu's
corpus score) and ``H_tj`` the human system score. Every component is z-normalized **within each
test set** (centred and scaled by that set's own systems, std with ddof 0; a component constant on
a test set scores 0 there), and the human scores alike::

    z_tjm = (s_tjm - mean_j s_tjm) / std_j s_tjm
    system score_tj = sum_m w_m z_tjm                 (:func:`system_scores`: all systems of one test set)
    e     = (1/M, ..., 1/M)                           equal weights of the M components
    v     = argmin_{v >= 0} || Z_H - Z v ||^2,  v <- v / sum(v)      (non-negative least squares)
    w(a)  = (1 - a) e + a v,   a in ALPHAS = (0, .25, .5, .75, 1)

The shipped default is equal weights, ``a = 0``. The fit moves towards NNLS only as far as
leaving one test set out shows it helps: for each ``a``, each training test set is scored by
``w(a)`` with ``v`` fitted on the other training sets, and ``a`` is the one whose held-out system
pairs are ordered as the humans order them most often (:func:`moverkit.correlation.pairwise`,
pooled over the sets); a tie goes to the smaller ``a``. The reason: weights fitted on about 48
WMT17 systems did not transfer. On WMT18 to-English (386 system pairs, checked outside this
repository), twmd + chrF fitted by NNLS ordered 93.5% of the pairs, chrF alone 94.0%, and the same
two z-normalized with equal weights, unfitted, 95.1%. Equal weights of z-scores need no data; the
fit must earn every step away from them on test sets it did not see.

A system score means something only beside another system's on the same references: only
differences within a test set are defined, so no offset is fitted. :func:`system_score` scores one
system alone (``combined``'s ``"system"``): ``sum_m w_m s_m / std_m``, with ``std_m`` the pooled
within-test-set std of the training sets, ``sqrt( sum_tj (s_tjm - mean_j s_tjm)^2 / (N - T) )``
(N systems, T sets), standing in for the std of the test set it belongs to.

The weights are non-negative because every component is oriented higher-is-better: a negative
weight would use a metric against its meaning. Metrics are strongly collinear, and unconstrained
least squares then gives them large opposite-signed weights that fit the training pairs' noise and
do not transfer to a new language pair. A component that does not help gets weight 0.

Tokenization: chrF is sacrebleu's default (``CHRF()``, character n-grams, whitespace ignored);
BLEU is sacrebleu's default ``13a`` tokenization at both levels (``BLEU(effective_order=True)`` for
a sentence, ``BLEU()`` for a corpus; ``force=True``, so already tokenized text such as WMT's
distributed files passes without sacrebleu's warning): text is tokenized the same way at fitting
and at scoring time.

A :class:`Combination` is saved as a JSON object (:data:`FORMAT`, :data:`VERSION`) with a
:attr:`Combination.digest` of everything that changes a score; :func:`combined` scores texts
with one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from moverkit.specs import SPECS, spec

FORMAT = "moverkit-combination"
"""The ``format`` key of a combination file."""

VERSION = 2
"""The ``version`` key of a combination file; :func:`load` refuses any other. Version 2 (moverkit
0.x, issue 32): system-level weights are of z-scores within each test set, shrunk towards equal
weights; version 1's were NNLS weights of pooled-std-scaled scores and mean something else."""

STD_LIMITS = (1e-9, 1e9)
"""The range a file's ``std`` must lie in, and :data:`MAGNITUDE_LIMIT` bounds ``|mean|`` and the
weights: a fitted file lies far inside both (scores of order 1 to 100), and with them a combined
score stays finite for any finite component score below about 1e290; beyond, :func:`combined`
refuses (never returns inf or NaN)."""

MAGNITUDE_LIMIT = 1e9
"""See :data:`STD_LIMITS`."""

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""The shrinkage grid of the system level: the share ``a`` of the NNLS weights beside equal ones (module doc)."""

ANCHORS = ("chrF", "BLEU")
"""sacrebleu's components beside moverkit's metrics."""

COMBINED = "combined"
"""The name of a combination's scores beside the metrics' (``moverkit compare``, ``moverkit score``)."""

COMPONENTS = (*sorted(SPECS), *ANCHORS)
"""Every possible component name."""


def orientation(name: str) -> float:
    """``+1`` for a component where higher is better, ``-1`` for a distance (``lazy_emd``)."""
    _check_component(name)
    return 1.0 if name in ANCHORS or spec(name).higher_is_better else -1.0


def _check_component(name) -> None:
    if name not in COMPONENTS:
        raise ValueError(f"unknown component {name!r}; the components are {', '.join(COMPONENTS)}")


# ---------------------------------------------------------------------------------------------
# Fitting


@dataclass(frozen=True)
class SegmentLevel:
    """The segment-level fit: per component (in the combination's order), the training mean and
    std of its oriented scores and its weight: ``combined = sum_m w_m (o_m - mean_m) / std_m``."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class SystemLevel:
    """The system-level fit: per component, the pooled within-test-set std of its system scores
    (for one system alone, :func:`system_score`) and its weight of z-scores within a test set
    (:func:`system_scores`); the weights sum to 1."""

    std: tuple[float, ...]
    weights: tuple[float, ...]


def fit_segment(features: Mapping[str, Sequence[float]], human: Sequence[float]) -> SegmentLevel:
    """Fit the segment level (module doc) on oriented component scores ``features`` (name -> one
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
    """Fit the system level (module doc) on ``test_sets``: each a pair ``(features, human)`` with
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
    from moverkit.correlation import pairwise

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


# ---------------------------------------------------------------------------------------------
# The combination and its file


@dataclass(frozen=True)
class Combination:
    """Components, the moverkit metrics' keyword arguments (``metric_kwargs``: name -> kwargs, as
    fitted), a :class:`SegmentLevel` and/or a :class:`SystemLevel` (``None`` where not fitted),
    and ``fitted_on`` (a JSON-able description of the training data, not part of the digest).
    Checked when made: known components without duplicates, lengths matching, finite numbers,
    ``std`` within :data:`STD_LIMITS`, ``|mean|`` and weights at most :data:`MAGNITUDE_LIMIT`,
    weights ``>= 0`` and not all 0."""

    components: tuple[str, ...]
    metric_kwargs: dict = field(default_factory=dict)
    segment: SegmentLevel | None = None
    system: SystemLevel | None = None
    fitted_on: dict = field(default_factory=dict)

    def __post_init__(self):
        components = self.components
        if isinstance(components, str) or not isinstance(components, (tuple, list)) or not components:
            raise ValueError(f"components: a non-empty list of names, got {components!r}")
        for name in components:
            _check_component(name)
        duplicates = sorted({n for n in components if components.count(n) > 1})
        if duplicates:
            raise ValueError(f"components: {', '.join(duplicates)} given twice")
        object.__setattr__(self, "components", tuple(components))
        if not isinstance(self.metric_kwargs, Mapping):
            raise ValueError("metric_kwargs: an object of metric name -> keyword arguments")
        for name, kwargs in self.metric_kwargs.items():
            if name not in components or name in ANCHORS:
                raise ValueError(f"metric_kwargs: {name!r} is not a moverkit metric among the components")
            if not isinstance(kwargs, Mapping):
                raise ValueError(f"metric_kwargs.{name}: an object of keyword arguments, got {kwargs!r}")
            try:
                json.dumps(dict(kwargs), allow_nan=False)
            except (TypeError, ValueError) as err:
                raise ValueError(f"metric_kwargs.{name}: not JSON-able ({err})") from None
        if self.segment is None and self.system is None:
            raise ValueError("segment, system: neither level is fitted")
        for level, fit in (("segment", self.segment), ("system", self.system)):
            if fit is None:
                continue
            for key in ("mean", "std", "weights") if level == "segment" else ("std", "weights"):
                values = getattr(fit, key)
                if len(values) != len(components):
                    raise ValueError(f"{level}.{key}: {len(values)} values for {len(components)} components")
                for name, v in zip(components, values):
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                        raise ValueError(f"{level}.{key} of {name}: not a finite number: {v!r}")
                    if key == "std" and not STD_LIMITS[0] <= v <= STD_LIMITS[1]:
                        raise ValueError(
                            f"{level}.std of {name}: {v} is outside [{STD_LIMITS[0]:g}, {STD_LIMITS[1]:g}] "
                            "(a fitted std lies far inside; beyond, a combined score could overflow)"
                        )
                    if key != "std" and abs(v) > MAGNITUDE_LIMIT:
                        raise ValueError(
                            f"{level}.{key} of {name}: {v} is beyond +-{MAGNITUDE_LIMIT:g} "
                            "(a fitted value lies far inside; beyond, a combined score could overflow)"
                        )
                    if key == "weights" and v < 0:
                        raise ValueError(f"{level}.weights of {name}: {v} is negative")
            if not any(w > 0 for w in fit.weights):
                raise ValueError(f"{level}.weights: all 0")

    def scored(self) -> dict:
        """Everything that changes a score, as a JSON-able object (what :attr:`digest` hashes)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "components": list(self.components),
            "metric_kwargs": {name: dict(kwargs) for name, kwargs in self.metric_kwargs.items()},
            "segment": None if self.segment is None else _level_dict(self.segment),
            "system": None if self.system is None else _level_dict(self.system),
        }

    @property
    def digest(self) -> str:
        """sha256 (hex) of :meth:`scored` as canonical JSON (sorted keys, no spaces, floats by
        their shortest exact repr): equal digests give equal scores; ``fitted_on`` is left out."""
        canonical = json.dumps(self.scored(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def save(self, path: str | Path) -> None:
        """Write the JSON file (:meth:`scored`, ``fitted_on`` and ``digest``) whole or not at all."""
        from moverkit.lines import write_atomic

        data = {**self.scored(), "fitted_on": self.fitted_on, "digest": self.digest}
        write_atomic(Path(path), json.dumps(data, indent=2, allow_nan=False) + "\n")


def _level_dict(level) -> dict:
    return {key: list(getattr(level, key)) for key in level.__dataclass_fields__}


def load(path: str | Path) -> Combination:
    """A :class:`Combination` from a file written by :meth:`Combination.save`. Every field is
    checked (as :class:`Combination` checks, plus: a JSON object of :data:`FORMAT` and
    :data:`VERSION`, no field missing or unknown, ``digest`` matching the numbers); an error is a
    ``ValueError`` naming the file and the field."""
    from moverkit._core.jsonfile import loads

    _check_path(path, "path")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a JSON file ({err})") from None
    data = loads(text, str(path))
    try:
        return _from_dict(data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _from_dict(data) -> Combination:
    if not isinstance(data, dict):
        raise ValueError(f"not a combination: a JSON object is expected, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ValueError(f"format: {data.get('format')!r}, not {FORMAT!r}")
    if data.get("version") == 1:
        raise ValueError(
            "version 1: written by an older moverkit, whose system-level weights meant something else "
            f"(version {VERSION}: z-scores within each test set, shrunk towards equal weights); "
            "fit it again with moverkit combine"
        )
    if data.get("version") != VERSION:
        raise ValueError(f"version: {data.get('version')!r}; this moverkit reads version {VERSION} only")
    fields = {"format", "version", "components", "metric_kwargs", "segment", "system", "fitted_on", "digest"}
    missing, unknown = sorted(fields - set(data)), sorted(set(data) - fields)
    if missing or unknown:
        raise ValueError("; ".join([*(f"{k}: missing" for k in missing), *(f"{k}: unknown field" for k in unknown)]))
    levels = {}
    for level, keys, kind in (
        ("segment", ("mean", "std", "weights"), SegmentLevel),
        ("system", ("std", "weights"), SystemLevel),
    ):
        value = data[level]
        if value is None:
            levels[level] = None
            continue
        if not isinstance(value, dict) or sorted(value) != sorted(keys):
            raise ValueError(f"{level}: an object with exactly {', '.join(keys)} (or null)")
        for key in keys:
            if not isinstance(value[key], list):
                raise ValueError(f"{level}.{key}: a list of numbers")
        levels[level] = kind(*(tuple(value[key]) for key in keys))
    if not isinstance(data["components"], list):
        raise ValueError("components: a list of names")
    if not isinstance(data["fitted_on"], dict):
        raise ValueError("fitted_on: an object")
    combination = Combination(
        components=tuple(data["components"]),
        metric_kwargs=data["metric_kwargs"],
        segment=levels["segment"],
        system=levels["system"],
        fitted_on=data["fitted_on"],
    )
    if data["digest"] != combination.digest:
        raise ValueError("digest: does not match the numbers (the file was edited or damaged)")
    return combination


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


# ---------------------------------------------------------------------------------------------
# Applying


def segment_scores(combination: Combination, features: Mapping[str, Sequence[float]]) -> np.ndarray:
    """``sum_m w_m (o_m - mean_m) / std_m`` per segment, from oriented component scores."""
    level = _level(combination, "segment")
    x = _matrix({name: _feature(features, name) for name in combination.components}, len(_any(features)))
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite((x - np.array(level.mean)) / np.array(level.std) @ np.array(level.weights))


def system_scores(combination: Combination, systems: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``sum_m w_m z_jm`` of each system of ONE test set (``{system: {component: oriented system
    score}}``, at least two systems), every component z-normalized over these systems (module doc):
    the system level as defined and fitted."""
    level = _level(combination, "system")
    if len(systems) < 2:
        raise ValueError(f"system_scores: {len(systems)} system(s); z-scores within a test set need at least two")
    names = list(systems)
    x = _matrix({c: [_feature(systems[s], c) for s in names] for c in combination.components}, len(names))
    with np.errstate(over="ignore", invalid="ignore"):
        scores = _finite(_z(x) @ np.array(level.weights))
    return dict(zip(names, scores.tolist()))


def system_score(combination: Combination, system_features: Mapping[str, float]) -> float:
    """``sum_m w_m s_m / std_m`` of one system alone, from its oriented component system scores
    (``std_m`` the training sets' pooled std, standing in for its test set's: module doc)."""
    level = _level(combination, "system")
    s = _matrix({name: [_feature(system_features, name)] for name in combination.components}, 1)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        return float(_finite(np.array([s / np.array(level.std) @ np.array(level.weights)]))[0])


def _finite(scores: np.ndarray) -> np.ndarray:
    """Refuse a combined score that overflowed (a component score near the float range): a
    combination never returns inf or NaN."""
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        raise ValueError(
            f"the combined score of item {bad[0]} overflows (not finite): a component score is too large to combine"
        )
    return scores


def _level(combination: Combination, level: str):
    fit = getattr(combination, level)
    if fit is None:
        raise ValueError(f"this combination has no {level} level (it was fitted without it)")
    return fit


def _feature(features: Mapping, name: str):
    if name not in features:
        raise ValueError(f"no scores of component {name!r}")
    return features[name]


def _check_path(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name}: a combination file's path (str or Path), got {value!r}")


def _any(features: Mapping):
    if not features:
        raise ValueError("no component scores")
    return next(iter(features.values()))


def anchor(name: str, sentence: bool):
    """sacrebleu's metric object for component ``name`` (module doc: the tokenization)."""
    import sacrebleu

    if name == "chrF":
        return sacrebleu.metrics.CHRF()
    if name == "BLEU":
        # force: no warning about tokenized input; the tokenization rule is the same on any text.
        return sacrebleu.metrics.BLEU(effective_order=sentence, force=True)
    raise ValueError(f"no anchor {name!r}; the anchors are {', '.join(ANCHORS)}")


def component_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    components: Sequence[str],
    metric_kwargs: Mapping[str, Mapping] | None = None,
    *,
    batch_size: int | None = None,
    device: str | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Oriented segment scores of each component (name -> array) and the moverkit metrics'
    hashcodes (name -> str). A moverkit metric is ``moverkit.functional.<name>`` at its defaults
    plus ``metric_kwargs[name]`` (the cache of token clouds is on meanwhile, so the token metrics
    encode each text once); chrF and BLEU are sacrebleu's sentence scores."""
    from moverkit import functional
    from moverkit._core.cache import cache_info, set_cache

    _check_texts(predictions, references)
    passthrough = {k: v for k, v in (("batch_size", batch_size), ("device", device)) if v is not None}
    scores, hashcodes = {}, {}
    was_cached = cache_info()["max_bytes"] > 0
    if not was_cached:
        set_cache()
    try:
        for name in components:
            _check_component(name)
            if name in ANCHORS:
                metric = anchor(name, sentence=True)
                values = [metric.sentence_score(p, [r]).score for p, r in zip(predictions, references)]
            else:
                kwargs = {**(metric_kwargs or {}).get(name, {}), **passthrough}
                result = getattr(functional, name)(list(predictions), list(references), **kwargs)
                values, hashcodes[name] = result[spec(name).main], result["hashcode"]
            scores[name] = orientation(name) * np.asarray(values, dtype=float) + 0.0  # no -0.0
    finally:
        if not was_cached:
            set_cache(0)
    return scores, hashcodes


def corpus_features(
    segment: Mapping[str, Sequence[float]], predictions: Sequence[str], references: Sequence[str]
) -> dict[str, float]:
    """One corpus's oriented system scores from its oriented segment scores: a moverkit metric's
    is their mean, chrF's and BLEU's sacrebleu's corpus score of the texts."""
    return {
        name: anchor(name, sentence=False).corpus_score(list(predictions), [list(references)]).score
        if name in ANCHORS
        else math.fsum(values) / len(values)
        for name, values in segment.items()
    }


def _check_texts(predictions, references) -> None:
    for what, texts in (("predictions", predictions), ("references", references)):
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise ValueError(f"{what}: a list of strings, got {type(texts).__name__}")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError("no predictions to score")
    for i, (p, r) in enumerate(zip(predictions, references)):
        if not isinstance(r, str):
            raise ValueError(
                f"references[{i}]: a combination takes one reference string per prediction, got {type(r).__name__}"
            )
        if not isinstance(p, str):
            raise ValueError(f"predictions[{i}]: a string, got {type(p).__name__}")


def combined(
    predictions: Sequence[str],
    references: Sequence[str],
    combination: Combination | str | Path,
    *,
    batch_size: int | None = None,
    device: str | None = None,
) -> dict:
    """Score ``predictions`` against ``references`` (one string each) with ``combination`` (a
    :class:`Combination` or the path of its file). Returns::

        {"combined": [segment score, ...],          # None each if the combination has no segment level
         "system": float | None,                    # the corpus's system score; None without a system level
         "components": {name: [oriented segment score, ...]},
         "hashcode": "combination:<digest[:16]>|<hashcode of each moverkit metric, in order>"}

    The combined segment scores have mean about 0 on the training data; their unit is the human
    scores'. A system score means something only beside another system's on the same references
    (module doc). A moverkit metric's default ``centering`` may depend on the texts of the call:
    score systems you compare in one call each over the same references, or use ``"corpus"``."""
    if not isinstance(combination, Combination):
        _check_path(combination, "combination")
        combination = load(combination)
    features, hashcodes = component_scores(
        predictions, references, combination.components, combination.metric_kwargs, batch_size=batch_size, device=device
    )
    segment = segment_scores(combination, features) if combination.segment is not None else None
    system = None
    if combination.system is not None:
        system = system_score(combination, corpus_features(features, predictions, references))
    hashcode = "|".join([f"combination:{combination.digest[:16]}", *hashcodes.values()])
    return {
        "combined": [None] * len(predictions) if segment is None else segment.tolist(),
        "system": system,
        "components": {name: values.tolist() for name, values in features.items()},
        "hashcode": hashcode,
    }


# ---------------------------------------------------------------------------------------------
# Cross-validation


class Fold(NamedTuple):
    """One held-out group: the fit on the other groups, and its held-out segments' positions
    (``index``, in input order) and combined scores."""

    fit: SegmentLevel
    index: np.ndarray
    scores: np.ndarray


def leave_one_group_out(
    features: Mapping[str, Sequence[float]], human: Sequence[float], groups: Sequence[str]
) -> dict[str, Fold]:
    """Segment level, per group (a language pair): fit on every other group's segments, score the
    group's. The held-out segments' statistics are never used: ``mean``/``std`` are the training
    groups'."""
    groups = np.asarray(groups)
    features = {name: np.asarray(values, dtype=float) for name, values in features.items()}
    human = np.asarray(human, dtype=float)
    folds = {}
    for group in dict.fromkeys(groups.tolist()):
        held = groups == group
        level = fit_segment({n: v[~held] for n, v in features.items()}, human[~held])
        combination = Combination(tuple(features), segment=level)
        index = np.flatnonzero(held)
        folds[group] = Fold(level, index, segment_scores(combination, {n: v[held] for n, v in features.items()}))
    return folds


def leave_one_test_set_out(
    test_sets: Mapping[str, tuple[Mapping[str, Mapping[str, float]], Mapping[str, float]]],
    fit_on: Sequence[str] | None = None,
    alphas: Sequence[float] = ALPHAS,
) -> dict[str, tuple[SystemFit, dict[str, float]]]:
    """System level, per test set (name -> ``(features, human)`` as :func:`fit_system` takes):
    fit on the test sets of ``fit_on`` (default: all) other than this one (the shrinkage too, by
    leaving one of those out in turn, over ``alphas``), and score its systems (:func:`system_scores`).
    Returns name -> (the fit, {system: combined system score})."""
    fit_on = list(test_sets) if fit_on is None else list(fit_on)
    folds = {}
    for name, (features, _) in test_sets.items():
        chosen = fit_system([test_sets[t] for t in fit_on if t != name], alphas)
        combination = Combination(chosen.components, system=chosen.level)
        systems = next(iter(features.values()))
        folds[name] = (
            chosen,
            system_scores(combination, {s: {m: features[m][s] for m in chosen.components} for s in systems}),
        )
    return folds
