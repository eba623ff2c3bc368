"""Scoring with a combination (:mod:`moverkit.combination`): the components' oriented scores of texts
(moverkit's metrics, sacrebleu's chrF and BLEU), and the combined segment and system scores."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from moverkit.combination.components import ANCHORS, _check_component, orientation
from moverkit.combination.file import Combination, _check_path, load
from moverkit.combination.fitting import _matrix, _z
from moverkit.facts.specs import spec
from moverkit.judgments import TestSet


def segment_scores(combination: Combination, features: Mapping[str, Sequence[float]]) -> np.ndarray:
    """``sum_m w_m (o_m - mean_m) / std_m`` per segment, from oriented component scores."""
    level = _level(combination, "segment")
    x = _matrix({name: _feature(features, name) for name in combination.components}, len(_any(features)))
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite((x - np.array(level.mean)) / np.array(level.std) @ np.array(level.weights))


def system_scores(combination: Combination, systems: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``sum_m w_m z_jm`` of each system of ONE test set (``{system: {component: oriented system
    score}}``, at least two systems), every component z-normalized over these systems (package doc):
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
    (``std_m`` the training sets' pooled std, standing in for its test set's: package doc)."""
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


def _any(features: Mapping):
    if not features:
        raise ValueError("no component scores")
    return next(iter(features.values()))


def anchor(name: str, sentence: bool):
    """sacrebleu's metric object for component ``name`` (package doc: the tokenization)."""
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
    from moverkit._core.encoding import cache_enabled
    from moverkit.integrations.registry import REGISTRY

    _check_texts(predictions, references)
    passthrough = {k: v for k, v in (("batch_size", batch_size), ("device", device)) if v is not None}
    scores, hashcodes = {}, {}
    with cache_enabled():
        for name in components:
            _check_component(name)
            if name in ANCHORS:
                metric = anchor(name, sentence=True)
                values = [metric.sentence_score(p, [r]).score for p, r in zip(predictions, references)]
            else:
                kwargs = {**(metric_kwargs or {}).get(name, {}), **passthrough}
                result = REGISTRY[name].function(list(predictions), list(references), **kwargs)
                values, hashcodes[name] = result[spec(name).main], result["hashcode"]
            scores[name] = orientation(name) * np.asarray(values, dtype=float) + 0.0  # no -0.0
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
    (package doc). A moverkit metric's default ``centering`` may depend on the texts of the call:
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


def system_features(
    test_set: TestSet, components: Sequence[str], segments: Mapping[str, Mapping[str, Mapping[str, list[float]]]]
) -> dict[str, dict[str, float]]:
    """One test set's oriented system scores of each component (``{component: {system: score}}``),
    by :func:`moverkit.combination.corpus_features`, as a combination computes them, from
    ``segments`` (:func:`system_segment_scores`; chrF and BLEU need no segment scores there)."""
    by_system = {}
    for system, outputs in test_set.outputs.items():
        oriented = {
            name: [] if name in ANCHORS else orientation(name) * np.asarray(segments[name][test_set.lp][system])
            for name in components
        }
        by_system[system] = corpus_features(oriented, outputs, test_set.references)
    return {name: {system: features[name] for system, features in by_system.items()} for name in components}
