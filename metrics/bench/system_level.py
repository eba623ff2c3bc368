"""``moverkit bench system-level``: does a metric order MT systems as humans do?

WMT17 to-English (newstest2017): every system's full output against the reference, and the human
system-level DA score of each system (the WMT17 metrics task's ``DA-syslevel.csv``). The files are
read from the ``WMT17/`` folder of the public repository AIPHES/ACL20-Reference-Free-MT-Evaluation
(``references/``, ``system-outputs/<lp>/``, ``DA-syslevel.csv``); nothing is copied into moverkit.
Only WMT17 is read: the other years are kept for independent checks.

A system's score is the mean of its segment scores (one ``compute`` per language pair over all of
its systems, so every system is centered alike), BLEU and chrF are sacrebleu's corpus scores (BLEU on the distributed, already tokenized texts).
Reported per metric:

* the Pearson correlation of system scores with the human scores, per language pair;
* the pairwise accuracy (Kocmi et al., 2021, "To Ship or Not to Ship"): over every pair of systems
  of a language pair, the share the metric orders as the humans do (a tie counts as wrong);
* for moverkit's metrics, among the pairs the metric calls significantly different (paired
  bootstrap of the segment scores, :func:`moverkit.comparison.paired_test`, p < 0.05), the share
  ordered as the humans order them.

fi-en and lv-en are not among the five pairs moverkit's defaults were fitted on (the shared WMT17
segment file): they are reported as unseen pairs as well as in the totals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from moverkit.lines import read_lines
from moverkit.specs import spec

UNSEEN_PAIRS = ("fi-en", "lv-en")
"""Language pairs outside the five that moverkit's shipped statistics were fitted on."""

ANCHORS = ("BLEU", "chrF")
"""sacrebleu's corpus scores, beside the metrics: the anchors users know."""


@dataclass(frozen=True)
class TestSet:
    """One language pair: the references and, aligned with them, each system's output and its
    human system-level score."""

    lp: str
    references: list[str]
    outputs: dict[str, list[str]]
    human: dict[str, float]


def read_wmt17(folder: str | Path, segments: int | None = None) -> list[TestSet]:
    """The to-English test sets of a ``WMT17/`` folder (see the module doc), each cut to its first
    ``segments`` segments when given (the same segments for every system). Systems without a human
    score are left out; an output whose length is not the reference's is an error naming it."""
    folder = Path(folder)
    human: dict[str, dict[str, float]] = {}
    for line in read_lines(folder / "DA-syslevel.csv")[1:]:
        if not line.strip():
            continue
        lp, score, system = line.split()
        if lp.endswith("-en"):
            human.setdefault(lp, {})[system] = float(score)
    sets = []
    for lp in sorted(human):
        source = lp.split("-")[0]
        references = read_lines(folder / "references" / f"newstest2017-{source}en-ref.en")
        outputs = {}
        for path in sorted((folder / "system-outputs" / lp).glob(f"newstest2017.*.{lp}")):
            system = path.name[len("newstest2017.") : -len(f".{lp}")]
            if system not in human[lp]:
                continue
            lines = read_lines(path)
            if len(lines) != len(references):
                raise ValueError(f"{path} has {len(lines)} lines, the references {len(references)}")
            outputs[system] = lines[:segments]
        missing = sorted(set(human[lp]) - set(outputs))
        if missing:
            raise ValueError(f"{lp}: no system output for {', '.join(missing)} in {folder / 'system-outputs' / lp}")
        sets.append(TestSet(lp, references[:segments], outputs, {s: human[lp][s] for s in outputs}))
    return sets


def segment_scores(test_set: TestSet, metric: str, **kwargs) -> dict[str, list[float]]:
    """Each system's segment scores (the metric's main output): one call over all systems."""
    from moverkit import functional

    systems = list(test_set.outputs)
    predictions = [text for s in systems for text in test_set.outputs[s]]
    references = test_set.references * len(systems)
    scores = getattr(functional, metric)(predictions, references, **kwargs)[spec(metric).main]
    n = len(test_set.references)
    return {s: scores[i * n : (i + 1) * n] for i, s in enumerate(systems)}


def anchor_scores(test_set: TestSet, anchor: str) -> dict[str, float]:
    """sacrebleu's corpus BLEU or chrF of each system."""
    import sacrebleu

    # The texts come tokenized (as distributed): BLEU splits on their spaces only.
    if anchor == "BLEU":
        metric = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    else:
        metric = sacrebleu.metrics.CHRF()
    return {s: metric.corpus_score(out, [test_set.references]).score for s, out in test_set.outputs.items()}


def pearson(xs: list[float], ys: list[float]) -> float:
    from scipy import stats

    return float(stats.pearsonr(xs, ys)[0]) if len(xs) > 2 else math.nan


def pairwise(system_scores: dict[str, float], human: dict[str, float], higher_is_better: bool) -> tuple[int, int]:
    """``(agreeing, total)`` over the system pairs of one test set (Kocmi et al., 2021)."""
    sign = 1.0 if higher_is_better else -1.0
    agree = total = 0
    for a, b in combinations(sorted(system_scores), 2):
        total += 1
        agree += (sign * (system_scores[a] - system_scores[b])) * (human[a] - human[b]) > 0
    return agree, total


def significant_agreement(
    segments: dict[str, list[float]], human: dict[str, float], metric: str, *, resamples: int, seed: int
) -> tuple[int, int]:
    """``(agreeing, significant)``: the system pairs whose paired-bootstrap p-value is below 0.05,
    and how many of those the metric orders as the humans do."""
    from moverkit.comparison import paired_test

    higher = spec(metric).higher_is_better
    agree = significant = 0
    for a, b in combinations(sorted(segments), 2):
        test = paired_test(segments[a], segments[b], higher_is_better=higher, resamples=resamples, seed=seed)
        if test.p_value < 0.05:
            significant += 1
            agree += test.delta * (human[a] - human[b]) > 0
    return agree, significant


def score_test_sets(test_sets: list[TestSet], metrics: list[str], **kwargs) -> dict[str, dict[str, dict]]:
    """``{row: {lp: {system: segment scores (a list) for a metric, the corpus score for BLEU and
    chrF}}}``, each metric at its default settings plus ``kwargs``."""
    scores = {row: {} for row in [*metrics, *ANCHORS]}
    for test_set in test_sets:
        for metric in metrics:
            scores[metric][test_set.lp] = segment_scores(test_set, metric, **kwargs)
        for anchor in ANCHORS:
            scores[anchor][test_set.lp] = anchor_scores(test_set, anchor)
    return scores


def system_level(
    scores: dict[str, dict[str, dict]], test_sets: list[TestSet], *, resamples: int = 1000, seed: int = 0
) -> dict[str, dict]:
    """From :func:`score_test_sets`: ``{row: {"pearson": {lp: r}, "accuracy": (agree, total),
    "unseen_accuracy": (agree, total), "significant": (agree, significant) or None}}``; a
    distance's Pearson is sign-flipped, so that higher is better in every row."""
    table = {}
    for row, by_lp in scores.items():
        metric = row not in ANCHORS
        higher = spec(row).higher_is_better if metric else True
        pearsons, accuracy, unseen, significant = {}, [0, 0], [0, 0], [0, 0] if metric else None
        for test_set in test_sets:
            values = by_lp[test_set.lp]
            systems = {s: math.fsum(v) / len(v) for s, v in values.items()} if metric else values
            names = sorted(systems)
            r = pearson([systems[s] for s in names], [test_set.human[s] for s in names])
            pearsons[test_set.lp] = r if higher else -r
            agree, total = pairwise(systems, test_set.human, higher)
            accuracy = [accuracy[0] + agree, accuracy[1] + total]
            if test_set.lp in UNSEEN_PAIRS:
                unseen = [unseen[0] + agree, unseen[1] + total]
            if metric:
                agree, n = significant_agreement(values, test_set.human, row, resamples=resamples, seed=seed)
                significant = [significant[0] + agree, significant[1] + n]
        table[row] = {
            "pearson": pearsons,
            "accuracy": tuple(accuracy),
            "unseen_accuracy": tuple(unseen),
            "significant": None if significant is None else tuple(significant),
        }
    return table


def format_table(table: dict[str, dict]) -> str:
    """Markdown: Pearson per language pair (distances sign-flipped, so higher is better for all),
    pairwise accuracy over all pairs and over the unseen ones, agreement of significant decisions."""
    lps = list(next(iter(table.values()))["pearson"])
    head = ["metric", *lps, "pairwise accuracy", f"unseen ({', '.join(UNSEEN_PAIRS)})", "significant pairs agreeing"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]

    def share(pair):
        return "–" if pair is None or pair[1] == 0 else f"{100 * pair[0] / pair[1]:.1f}% ({pair[0]}/{pair[1]})"

    for row, values in table.items():
        cells = [f"{100 * values['pearson'][lp]:.1f}" for lp in lps]
        cells += [share(values["accuracy"]), share(values["unseen_accuracy"]), share(values["significant"])]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
