"""Cross-validation of a combination (:mod:`moverkit.combination`): the segment level leaving one
group out, the system level leaving one test set out; the segment-level report that ``moverkit
combine`` prints (:func:`segment_report`, :func:`format_segment`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from moverkit.combination.file import Combination, SegmentLevel
from moverkit.combination.fitting import ALPHAS, SystemFit, fit_segment, fit_system
from moverkit.combination.scoring import segment_scores, system_scores
from moverkit.judgments.correlation import correlate


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
    """System level, per test set (name -> ``(features, human)`` as
    :func:`~moverkit.combination.fit_system` takes): fit on the test sets of ``fit_on`` (default:
    all) other than this one (the shrinkage too, by leaving one of those out in turn, over
    ``alphas``), and score its systems (:func:`~moverkit.combination.system_scores`).
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


def segment_report(data, features: Mapping[str, np.ndarray], combinations: Mapping[str, Sequence[str]]) -> dict:
    """``{"rows": {label: {lp: (pearson, kendall)}}, "weights": {label: {lp: {component: w}}}}``:
    each component alone, then each combination scored on every pair by the fit on the others, and
    the same z-scores (the others' mean and std) with equal weights (``"<label>, equal weights"``)."""
    groups = data.by_group()
    human = np.asarray(data.human, dtype=float)
    rows, weights = {}, {}
    for name, values in features.items():
        rows[name] = {lp: correlate(values[i].tolist(), human[i].tolist()) for lp, i in groups.items()}
    for label, components in combinations.items():
        folds = leave_one_group_out({c: features[c] for c in components}, human, data.groups)
        rows[label] = {lp: correlate(f.scores.tolist(), human[f.index].tolist()) for lp, f in folds.items()}
        weights[label] = {lp: dict(zip(components, f.fit.weights)) for lp, f in folds.items()}
        equal = (1.0 / len(components),) * len(components)
        rows[f"{label}, equal weights"] = {}
        for lp, f in folds.items():
            level = SegmentLevel(f.fit.mean, f.fit.std, equal)
            held = segment_scores(
                Combination(tuple(components), segment=level), {c: features[c][f.index] for c in components}
            )
            rows[f"{label}, equal weights"][lp] = correlate(held.tolist(), human[f.index].tolist())
    return {"rows": rows, "weights": weights}


def format_segment(result: dict) -> str:
    """Markdown: Pearson r and Kendall tau (x100) per held-out pair and their averages."""
    rows = result["rows"]
    lps = list(next(iter(rows.values())))
    head = ["segment level", *(f"{lp} r / tau" for lp in lps), "avg r", "avg tau"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for label, by_lp in rows.items():
        cells = [f"{100 * r:.1f} / {100 * tau:.1f}" for r, tau in by_lp.values()]
        cells += [f"{100 * np.mean([r for r, _ in by_lp.values()]):.1f}"]
        cells += [f"{100 * np.mean([tau for _, tau in by_lp.values()]):.1f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
