"""``moverkit bench system-level``: does a metric order MT systems as humans do?

WMT17 to-English (newstest2017): every rated system's output against the reference, and the human
system-level DA score of each system (the WMT17 metrics task's ``DA-syslevel.csv``). By default the
bench reads the extract in the repository (:data:`moverkit.judgments.EXTRACT`, ``data/`` of a checkout: the first 500
segments of each test set, the 65 rated systems of the 7 to-English pairs, their human scores;
made by ``data/extract_wmt17_system_level.py``, provenance in ``data/README.md``). ``--wmt17``
reads the full ``WMT17/`` folder of the public repository AIPHES/ACL20-Reference-Free-MT-Evaluation
(``references/``, ``system-outputs/<lp>/``, ``DA-syslevel.csv``) instead; :mod:`moverkit.judgments`
reads both. Only WMT17 is read: the other years are kept for independent checks.

A system's score is the mean of its segment scores (one ``compute`` per language pair over all of
its systems, so every system is centered alike), BLEU and chrF are sacrebleu's corpus scores (BLEU
on the distributed, already tokenized texts). Reported per metric:

* the Pearson correlation of system scores with the human scores, per language pair;
* the pairwise accuracy (Kocmi et al., 2021, "To Ship or Not to Ship"): over every pair of systems
  of a language pair, the share the metric orders as the humans do (a tie counts as wrong);
* acc_eq, the tie-calibrated pairwise accuracy of the WMT23-25 metrics tasks
  (:func:`moverkit.judgments.correlation.acc_eq`; Deutsch, Foster and Freitag, 2023): one row per language
  pair, one tie threshold for all of them, the mean over the pairs. WMT17's human system scores
  have no ties, so it can only equal the (per-pair averaged) accuracy with metric ties wrong;
* with ``--data`` (a judgments TSV such as ``data/wmt17_seg_da_to_en.tsv``), segment-level acc_eq
  (mt-metrics-eval's ``KendallWithTiesOpt``, variant ``acc23``, every pair): one row per language
  pair of the segments (WMT23 groups by item, a source segment's translations by every system;
  WMT17 DA rates one translation per source segment, so the language pair is the group);
* among the pairs the metric calls significantly different (p < 0.05), the share ordered as the
  humans order them: for moverkit's metrics by paired bootstrap of the segment scores
  (:func:`moverkit.comparison.paired_test`), for BLEU and chrF by sacrebleu's own paired bootstrap
  resampling of its corpus statistics (``sacrebleu.significance.PairedTest``, ``test_type="bs"``,
  each system in turn the baseline of the systems after it; sacrebleu's seed, ``SACREBLEU_SEED``,
  12345 unless set).

fi-en and lv-en are not among the five pairs moverkit's defaults were fitted on (the shared WMT17
segment file): they are reported as unseen pairs as well as in the totals.

``--per-system-batch`` measures what scoring each system in its own call with ``centering="batch"``
(each system then centered with its own batch mean) changes against one call over all systems of
a language pair with ``centering="batch"`` (:func:`per_system_batch`, :func:`centering_effect`).
"""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path

from benchmarks._shared import ANCHORS, CENTERED_BY_DEFAULT, anchor_metric, anchor_scores, command_parser
from moverkit.facts.specs import spec
from moverkit.formats.options import METRICS, emit, positive_int, progress
from moverkit.judgments import UNSEEN_PAIRS, TestSet, segment_scores
from moverkit.judgments.correlation import acc_eq, pairwise, pearson

HELP = "WMT17 to-English systems: Pearson, pairwise accuracy and significant decisions"


def anchor_significant_agreement(test_set: TestSet, anchor: str, *, resamples: int) -> tuple[int, int]:
    """``(agreeing, significant)`` for BLEU or chrF by sacrebleu's own paired bootstrap resampling
    (``PairedTest(..., test_type="bs", n_samples=resamples)``, as ``sacrebleu --paired-bs``): each
    system in turn is the baseline of the systems after it (sorted by name), so every pair is
    tested once; a pair is significant when sacrebleu's p-value is below 0.05 and the two corpus
    scores differ, and agrees when the sign of their difference is the humans'."""
    from sacrebleu.significance import PairedTest

    names = sorted(test_set.outputs)
    metric = anchor_metric(anchor, test_set.references)
    agree = significant = 0
    for i, baseline in enumerate(names[:-1]):
        named = [(s, test_set.outputs[s]) for s in names[i:]]
        test = PairedTest(named, {anchor: metric}, None, test_type="bs", n_samples=resamples)
        _, results = test()
        (key,) = (k for k in results if k != "System")
        base, *others = results[key]
        for other, result in zip(names[i + 1 :], others):
            # sacrebleu gives identical scores p = 1 / (resamples + 1) (its test counts resampled
            # differences strictly above the observed one, 0): a tie orders nothing, so it is no decision.
            if result.p_value < 0.05 and result.score != base.score:
                significant += 1
                agree += (base.score - result.score) * (test_set.human[baseline] - test_set.human[other]) > 0
    return agree, significant


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
    "unseen_accuracy": (agree, total), "significant": (agree, significant)}}``; a distance's
    Pearson is sign-flipped, so that higher is better in every row. ``significant`` is by
    :func:`significant_agreement` for a metric (``resamples``, ``seed``) and by
    :func:`anchor_significant_agreement` for BLEU and chrF (``resamples``, sacrebleu's seed)."""
    table = {}
    for row, by_lp in scores.items():
        metric = row not in ANCHORS
        higher = spec(row).higher_is_better if metric else True
        pearsons, accuracy, unseen, significant = {}, [0, 0], [0, 0], [0, 0]
        rows_human, rows_metric = [], []
        for test_set in test_sets:
            values = by_lp[test_set.lp]
            systems = {s: math.fsum(v) / len(v) for s, v in values.items()} if metric else values
            names = sorted(systems)
            rows_human.append([test_set.human[s] for s in names])
            rows_metric.append([systems[s] if higher else -systems[s] for s in names])
            r = pearson([systems[s] for s in names], [test_set.human[s] for s in names])
            pearsons[test_set.lp] = r if higher else -r
            agree, total = pairwise(systems, test_set.human, higher)
            accuracy = [accuracy[0] + agree, accuracy[1] + total]
            if test_set.lp in UNSEEN_PAIRS:
                unseen = [unseen[0] + agree, unseen[1] + total]
            if metric:
                agree, n = significant_agreement(values, test_set.human, row, resamples=resamples, seed=seed)
            else:
                agree, n = anchor_significant_agreement(test_set, row, resamples=resamples)
            significant = [significant[0] + agree, significant[1] + n]
        table[row] = {
            "pearson": pearsons,
            "accuracy": tuple(accuracy),
            "unseen_accuracy": tuple(unseen),
            "significant": tuple(significant),
            "acc_eq": acc_eq(rows_human, rows_metric),
        }
    return table


def segment_acc_eq(data, metrics: list[str]) -> dict:
    """``{metric: TieCalibrated}``: segment-level acc_eq of each metric (default settings, one call
    per language pair) and of BLEU and chrF (sacrebleu's sentence scores) on ``data``
    (:class:`moverkit.judgments.Judgments`), one row per language pair (module doc)."""
    from moverkit.combination import component_scores

    groups = data.by_group()
    result = {}
    for name in [*metrics, *ANCHORS]:
        rows_human, rows_metric = [], []
        for members in groups.values():
            predictions = [data.predictions[i] for i in members]
            references = [data.references[i] for i in members]
            rows_metric.append(component_scores(predictions, references, [name])[0][name].tolist())
            rows_human.append([data.human[i] for i in members])
        result[name] = acc_eq(rows_human, rows_metric)
    return result


def format_table(table: dict[str, dict]) -> str:
    """Markdown: Pearson per language pair (distances sign-flipped, so higher is better for all),
    pairwise accuracy over all pairs and over the unseen ones, agreement of significant decisions,
    acc_eq with its threshold (and segment-level acc_eq where measured)."""
    lps = list(next(iter(table.values()))["pearson"])
    head = ["metric", *lps, "pairwise accuracy", f"unseen ({', '.join(UNSEEN_PAIRS)})", "significant pairs agreeing"]
    tied_keys = ["acc_eq", *(["segment_acc_eq"] if any("segment_acc_eq" in v for v in table.values()) else [])]
    head += [f"{key.replace('_acc', ' acc')} (eps)" for key in tied_keys]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]

    def share(pair):
        return "–" if pair is None or pair[1] == 0 else f"{100 * pair[0] / pair[1]:.1f}% ({pair[0]}/{pair[1]})"

    for row, values in table.items():
        cells = [f"{100 * values['pearson'][lp]:.1f}" for lp in lps]
        cells += [share(values["accuracy"]), share(values["unseen_accuracy"]), share(values["significant"])]
        for key in tied_keys:
            tied = values.get(key)
            cells.append("–" if tied is None else f"{100 * tied.accuracy:.1f}% ({tied.epsilon:.3g})")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# --per-system-batch

PER_SYSTEM_METRICS = CENTERED_BY_DEFAULT
"""The metrics :func:`per_system_batch` measures by default: those centered by default."""


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
    from moverkit.integrations.registry import REGISTRY

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


def register(which) -> None:
    system = command_parser(which, "system-level", HELP, command, data=None)
    system.add_argument(
        "--wmt17",
        type=Path,
        help="read the full WMT17/ folder of AIPHES/ACL20-Reference-Free-MT-Evaluation (references/, "
        "system-outputs/, DA-syslevel.csv) instead of the extract in data/ (its first 500 segments)",
    )
    system.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        help=f"metrics to score (default: all five; with --per-system-batch: {' and '.join(PER_SYSTEM_METRICS)})",
    )
    system.add_argument(
        "--segments",
        type=positive_int,
        help="score only the first N segments of each test set (default: all the data holds: 500 in the extract)",
    )
    system.add_argument(
        "--data",
        type=Path,
        help="also segment-level acc_eq (KendallWithTiesOpt) on this judgments TSV (lp, hypothesis, reference, "
        "human), e.g. data/wmt17_seg_da_to_en.tsv",
    )
    system.add_argument("--resamples", type=positive_int, default=1000, help="paired bootstrap resamples")
    system.add_argument("--seed", type=int, default=0, help="seed of moverkit's bootstrap (default: 0)")
    system.add_argument(
        "--per-system-batch",
        action="store_true",
        help='instead of the table: centering="batch" in one call per system against one call per language pair '
        "(system scores, Pearson, pairwise accuracy)",
    )
    system.add_argument("--out", type=Path, help="also write the table here (Markdown)")


def command(args) -> int:
    from moverkit.formats.lines import check_out
    from moverkit.judgments import read_extract, read_judgments, read_wmt17

    check_out(args.out, [] if args.data is None else [args.data])
    if args.wmt17 is None:
        test_sets = read_extract(segments=args.segments)
        source = "the extract in data/"
    else:
        test_sets = read_wmt17(args.wmt17, segments=args.segments)
        source = str(args.wmt17)
    n = {len(t.references) for t in test_sets}
    header = (
        f"WMT17 to-English ({source}), {sum(len(t.outputs) for t in test_sets)} systems, "
        f"{'all' if args.segments is None and args.wmt17 is not None else f'the first {max(n)}'} segments of each test set"
    )
    if args.per_system_batch:
        metrics = list(args.metrics or PER_SYSTEM_METRICS)
        runs = per_system_batch(test_sets, metrics, log=progress)
        report = format_centering_effect(centering_effect(runs, test_sets))
        return emit(f"{header}\n\n{report}", args.out)
    scores = score_test_sets(test_sets, list(args.metrics or METRICS))
    table = system_level(scores, test_sets, resamples=args.resamples, seed=args.seed)
    if args.data is not None:
        for row, tied in segment_acc_eq(read_judgments(args.data), list(args.metrics or METRICS)).items():
            table[row]["segment_acc_eq"] = tied
    return emit(f"{header}\n\n{format_table(table)}", args.out)
