"""``moverkit bench system-level --per-system-batch``: what scoring each system in its own call with
``centering="batch"`` (each system then centered with its own batch mean) changes against one call
over all systems of a language pair with ``centering="batch"``, on WMT17's to-English test sets
(:class:`moverkit.judgments.TestSet`)."""

from __future__ import annotations

import math
from itertools import combinations

from moverkit.correlation import pairwise, pearson
from moverkit.judgments import TestSet, segment_scores
from moverkit.specs import spec

PER_SYSTEM_METRICS = ("centered_bertscore", "twmd")
"""The metrics :func:`per_system_batch` measures by default: the two centered by default."""


def per_system_batch(
    test_sets: list[TestSet], metrics: list[str], *, cache_bytes: str = "2GB", log=None, **kwargs
) -> dict[str, dict[str, dict]]:
    """``{"pooled": {metric: {lp: {system: segment scores}}}, "per_system": {...}}``: each metric
    with ``centering="batch"`` (plus ``kwargs``), once in one call over all systems of a language
    pair (every system centered with one mean, as :func:`moverkit.judgments.segment_scores`) and
    once in one call per system (each system centered with the mean of its own outputs and the
    references, as a user who scores one system at a time gets). The cache of token clouds is on (``cache_bytes``, emptied
    after each language pair), so both ways use the same vectors: the difference is the centering."""
    from moverkit._core.encoding import cache_enabled, clear_cache
    from moverkit.registry import REGISTRY

    kwargs = {**kwargs, "centering": "batch"}
    runs = {"pooled": {m: {} for m in metrics}, "per_system": {m: {} for m in metrics}}
    with cache_enabled(cache_bytes):
        for test_set in test_sets:
            for metric in metrics:
                runs["pooled"][metric][test_set.lp] = segment_scores(test_set, metric, **kwargs)
                main = spec(metric).main
                runs["per_system"][metric][test_set.lp] = {
                    system: REGISTRY[metric].function(outputs, test_set.references, **kwargs)[main]
                    for system, outputs in test_set.outputs.items()
                }
                if log is not None:
                    log(f"done: {test_set.lp} {metric}")
            clear_cache()
    return runs


def centering_effect(runs: dict[str, dict[str, dict]], test_sets: list[TestSet]) -> dict[str, dict]:
    """From :func:`per_system_batch`, per metric: for each way (``"pooled"``, ``"per_system"``)
    the Pearson per language pair (a distance sign-flipped) and the pairwise accuracy
    ``(agree, total)``; and how the system scores move from the pooled way to the per-system way:
    ``mean_shift`` and ``max_shift`` (absolute change of a system score), ``mean_gap`` (the mean
    absolute difference between two systems of one language pair, pooled: the scale the shifts
    compare to) and ``reordered`` ``(pairs ordered differently, pairs)``."""
    effect = {}
    for metric in runs["pooled"]:
        higher = spec(metric).higher_is_better
        row = {}
        systems = {}
        for way in ("pooled", "per_system"):
            pearsons, accuracy = {}, [0, 0]
            systems[way] = {}
            for test_set in test_sets:
                values = runs[way][metric][test_set.lp]
                means = {s: math.fsum(v) / len(v) for s, v in values.items()}
                systems[way][test_set.lp] = means
                names = sorted(means)
                r = pearson([means[s] for s in names], [test_set.human[s] for s in names])
                pearsons[test_set.lp] = r if higher else -r
                agree, total = pairwise(means, test_set.human, higher)
                accuracy = [accuracy[0] + agree, accuracy[1] + total]
            row[way] = {"pearson": pearsons, "accuracy": tuple(accuracy)}
        shifts, gaps, reordered, pairs = [], [], 0, 0
        for test_set in test_sets:
            pooled, alone = systems["pooled"][test_set.lp], systems["per_system"][test_set.lp]
            shifts += [abs(alone[s] - pooled[s]) for s in pooled]
            for a, b in combinations(sorted(pooled), 2):
                gaps.append(abs(pooled[a] - pooled[b]))
                pairs += 1
                reordered += (pooled[a] - pooled[b]) * (alone[a] - alone[b]) <= 0
        row.update(
            mean_shift=math.fsum(shifts) / len(shifts),
            max_shift=max(shifts),
            mean_gap=math.fsum(gaps) / len(gaps) if gaps else math.nan,
            reordered=(reordered, pairs),
        )
        effect[metric] = row
    return effect


def format_centering_effect(effect: dict[str, dict]) -> str:
    """Markdown: per metric and way, Pearson per language pair, its average and the pairwise
    accuracy; then per metric the shifts of system scores and the pairs reordered."""
    lps = list(next(iter(effect.values()))["pooled"]["pearson"])
    head = ['metric (centering="batch")', *lps, "avg r", "pairwise accuracy"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    ways = {"pooled": "one call per language pair", "per_system": "one call per system"}
    for metric, row in effect.items():
        for way, label in ways.items():
            r = row[way]["pearson"]
            agree, total = row[way]["accuracy"]
            cells = [f"{100 * r[lp]:.1f}" for lp in lps]
            cells += [f"{100 * math.fsum(r.values()) / len(r):.1f}", f"{100 * agree / total:.1f}% ({agree}/{total})"]
            lines.append(f"| {metric}, {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| metric | mean shift of a system score | max shift | mean gap between two systems | pairs reordered |",
    ]
    lines.append("|---|---:|---:|---:|---:|")
    for metric, row in effect.items():
        moved, pairs = row["reordered"]
        lines.append(
            f"| {metric} | {row['mean_shift']:.4f} | {row['max_shift']:.4f} | {row['mean_gap']:.4f} | {moved}/{pairs} |"
        )
    return "\n".join(lines)
