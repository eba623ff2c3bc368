"""Compare systems on the same segments with confidence: ``moverkit.compare`` and ``moverkit compare``.

Every system is scored by every metric in one call per metric over all systems' segments, so that
each distinct text is encoded once (the cache of token clouds is on for the comparison, so the
token metrics share their encodings) and every system is centered with the same mean. Per system
and metric: the corpus score (the mean of its segment scores) with a 95% bootstrap interval; per
pair of systems and metric: the difference with its paired-bootstrap interval, the paired-bootstrap
and approximate-randomization p-values and the share of segments where A wins; per metric: a
ranking with clusters of systems not significantly apart after Holm's correction over all pairs
(:mod:`moverkit.comparison.resampling`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from moverkit.comparison.resampling import PairedTest, bootstrap_interval, check_resampling, clusters, holm, paired_test
from moverkit.facts.ties import tie_order
from moverkit.formats.lines import table_label

ALPHA = 0.05
"""The significance level of the clusters (after Holm's correction)."""


@dataclass
class Comparison:
    """The result of :func:`compare`: ``systems`` (``{name, metric, score, ci_low, ci_high}``
    each), ``pairs`` (``{a, b, metric, delta, ci_low, ci_high, p_bootstrap, p_permutation,
    win_rate}`` each, ``delta`` positive when ``a`` is better, p-values as computed and
    ``p_holm`` adjusted), ``ranking`` (per metric, the clusters best first), ``settings`` and
    ``hashcodes`` (per metric), and the ``segments`` scores (per metric and system)."""

    systems: list[dict]
    pairs: list[dict]
    ranking: dict[str, list[list[str]]]
    settings: dict
    hashcodes: dict[str, str]
    segments: dict[str, dict[str, list[float]]] = field(repr=False)

    def to_dict(self) -> dict:
        """The JSON object: ``systems``, ``pairs``, ``ranking``, ``settings``, ``hashcodes``."""
        return {name: getattr(self, name) for name in ("systems", "pairs", "ranking", "settings", "hashcodes")}

    def to_markdown(self) -> str:
        from moverkit.comparison.report import markdown

        return markdown(self)

    def to_json(self, path) -> None:
        from moverkit.comparison.report import write_json

        write_json(self, path)

    def plot(self, path) -> None:
        """A PNG of each system's score and interval, one panel per metric."""
        from moverkit.comparison.report import write_png

        write_png(self, path)

    def to_html(self, path) -> None:
        """A self-contained HTML page: the tables and the plot (embedded)."""
        from moverkit.comparison.report import write_html

        write_html(self, path)


def compare(
    references: Sequence[str] | Sequence[Sequence[str]],
    systems: Mapping[str, Sequence[str]],
    metrics: Sequence[str] = ("centered_bertscore",),
    *,
    resamples: int = 1000,
    seed: int = 0,
    metric_kwargs: Mapping[str, Mapping] | None = None,
    combination=None,
) -> Comparison:
    """Compare ``systems`` (name -> one output per segment) against ``references`` (one string, or
    a list of strings, per segment) with each of ``metrics`` (moverkit metric names; each at its
    defaults plus ``metric_kwargs[name]``). ``resamples`` and ``seed`` drive every bootstrap and
    permutation, and are kept in ``settings``. ``combination`` (a file of ``moverkit combine``, or a
    :class:`~moverkit.combination.Combination`) adds a ``"combined"`` row: each segment's calibrated
    combination of its components (its segment level), scored over all systems in one call; ``metrics``
    may then be empty."""
    from moverkit._core.encoding import cache_enabled
    from moverkit.facts.specs import spec
    from moverkit.facts.version import __version__
    from moverkit.integrations.registry import REGISTRY

    if combination is not None:
        from moverkit.combination import Combination, load

        combination = combination if isinstance(combination, Combination) else load(combination)
        if combination.segment is None:
            raise ValueError(
                "the combination has no segment level, which compare needs (fit it with judgments of segments)"
            )
    if isinstance(metrics, str) or not _is_list(metrics) or not (len(metrics) or combination is not None):
        raise ValueError(f"metrics must be a non-empty list of metric names (such as ['twmd']), got {metrics!r}")
    metrics = list(dict.fromkeys(metrics))
    for name in metrics:
        spec(name)  # an unknown metric is an error listing the metrics
    check_resampling(resamples, seed)
    n = _check_references(references)
    _check_systems(systems, n)
    metric_kwargs = {} if metric_kwargs is None else metric_kwargs
    if not isinstance(metric_kwargs, Mapping) or not all(isinstance(v, Mapping) for v in metric_kwargs.values()):
        raise ValueError(
            f"metric_kwargs must be a mapping of metric name -> mapping of its arguments "
            f"(such as {{'twmd': {{'temperature': 0.2}}}}), got {metric_kwargs!r}"
        )
    kwargs = {name: dict(metric_kwargs.get(name, {})) for name in metrics}
    unknown = set(metric_kwargs) - set(metrics)
    if unknown:
        raise ValueError(f"metric_kwargs names metrics that are not compared: {', '.join(sorted(unknown))}")

    names = list(systems)
    predictions = [text for name in names for text in systems[name]]
    all_references = list(references) * len(names)
    with cache_enabled():  # the token metrics share one encoding of each distinct text
        segments, hashcodes = {}, {}
        for metric in metrics:
            result = REGISTRY[metric].function(predictions, all_references, **kwargs[metric])
            scores = result[spec(metric).main]
            segments[metric] = {name: scores[i * n : (i + 1) * n] for i, name in enumerate(names)}
            hashcodes[metric] = result["hashcode"]
        if combination is not None:
            from moverkit.combination import COMBINED, combined

            result = combined(predictions, all_references, combination)
            scores = result["combined"]
            segments[COMBINED] = {name: scores[i * n : (i + 1) * n] for i, name in enumerate(names)}
            hashcodes[COMBINED] = result["hashcode"]
    comparison = summarize(segments, resamples=resamples, seed=seed)
    comparison.settings.update({"metric_kwargs": kwargs, "segments": n, "version": __version__})
    if combination is not None:
        comparison.settings["combination"] = {"components": list(combination.components), "digest": combination.digest}
    comparison.hashcodes.update(hashcodes)
    return comparison


def _is_list(value) -> bool:
    """A sequence of items (a list, tuple or numpy array), not a string or a mapping."""
    return hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, (str, bytes, Mapping))


def _check_references(references) -> int:
    """The number of segments: ``references`` holds one string, or a non-empty list of strings,
    per segment; anything else is an error naming ``references[i]`` (checked here, before the
    references are repeated once per system, where a metric's message would count rows wrongly)."""
    if not _is_list(references) or not len(references):
        raise ValueError(
            f"references must be a non-empty list (one reference, or a list of them, per segment), got {references!r:.80}"
        )
    for i, ref in enumerate(references):
        group = [ref] if isinstance(ref, str) else ref
        if not _is_list(group) or not len(group) or not all(isinstance(r, str) for r in group):
            raise ValueError(f"references[{i}] must be a string or a non-empty list of strings, got {ref!r:.80}")
    return len(references)


def _check_systems(systems, n: int) -> None:
    """``systems``: a mapping of name -> one output string per segment. A name shows in table
    cells and plot labels (:func:`moverkit.formats.lines.table_label`)."""
    if not isinstance(systems, Mapping) or not systems:
        raise ValueError(
            f"systems must be a dict of name -> outputs (one per segment), with at least one system; got {type(systems).__name__}"
        )
    for name, outputs in systems.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a system name must be a non-empty string, got {name!r}")
        table_label("system name", name)
        if not _is_list(outputs):
            raise ValueError(
                f"system {name!r}: outputs must be a list of strings (one per segment), got {type(outputs).__name__}"
            )
        if len(outputs) != n:
            raise ValueError(f"system {name!r} has {len(outputs)} outputs for {n} segments")
        for i, text in enumerate(outputs):
            if not isinstance(text, str):
                raise ValueError(f"system {name!r}, segment {i}: an output must be a string, got {text!r:.80}")


def summarize(segments: Mapping[str, Mapping[str, Sequence[float]]], *, resamples: int, seed: int) -> Comparison:
    """The statistics of :class:`Comparison` from segment scores (metric -> system -> scores)."""
    from moverkit.comparison.report import higher_is_better

    systems, pairs, ranking = [], [], {}
    for metric, by_system in segments.items():
        higher = higher_is_better(metric)
        for name, scores in by_system.items():
            table_label("system name", name)  # a Comparison built from scores, not by compare(), is checked too
            score, low, high = bootstrap_interval(scores, resamples=resamples, seed=seed)
            systems.append({"name": name, "metric": metric, "score": score, "ci_low": low, "ci_high": high})
        means = {s["name"]: s["score"] for s in systems if s["metric"] == metric}
        order = tie_order(list(means), means.get, higher)  # best first; tied means in the given order
        # Pairs in ranking order: A is the better-scored system, so deltas read as margins.
        tests: dict[tuple[str, str], PairedTest] = {
            (a, b): paired_test(by_system[a], by_system[b], higher_is_better=higher, resamples=resamples, seed=seed)
            for a, b in combinations(order, 2)
        }
        adjusted = dict(zip(tests, holm([t.p_value for t in tests.values()]))) if tests else {}
        for (a, b), test in tests.items():
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "metric": metric,
                    "delta": test.delta,
                    "ci_low": test.ci_low,
                    "ci_high": test.ci_high,
                    "p_bootstrap": test.p_value,
                    "p_permutation": test.p_permutation,
                    "p_holm": adjusted[(a, b)],
                    "win_rate": test.win_rate,
                }
            )

        # (x, y): x significantly better than y, after the correction.
        significant = {
            (a, b) if test.delta > 0 else (b, a) for (a, b), test in tests.items() if adjusted[(a, b)] < ALPHA
        }
        ranking[metric] = clusters(order, lambda x, y, significant=significant: (x, y) in significant)
    settings = {"resamples": resamples, "seed": seed, "confidence": 0.95, "alpha": ALPHA, "correction": "holm"}
    return Comparison(systems, pairs, ranking, settings, {}, {m: dict(v) for m, v in segments.items()})


__all__ = ["ALPHA", "Comparison", "PairedTest", "bootstrap_interval", "compare", "paired_test", "summarize"]
