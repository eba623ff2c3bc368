"""``moverkit bench system-level``: WMT17 to-English systems: Pearson, pairwise accuracy and
significant decisions (:mod:`moverkit.bench.system_level`)."""

from __future__ import annotations

from pathlib import Path

from ..options import METRICS, emit, positive_int, progress


def register(which) -> None:
    system = which.add_parser(
        "system-level", help="WMT17 to-English systems: Pearson, pairwise accuracy and significant decisions"
    )
    system.add_argument(
        "--wmt17",
        type=Path,
        help="read the full WMT17/ folder of AIPHES/ACL20-Reference-Free-MT-Evaluation (references/, "
        "system-outputs/, DA-syslevel.csv) instead of the shipped extract (its first 500 segments)",
    )
    system.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        help="metrics to score (default: all five; with --per-system-batch: centered_bertscore and twmd)",
    )
    system.add_argument(
        "--segments",
        type=positive_int,
        help="score only the first N segments of each test set (default: all the data holds: 500 in the shipped extract)",
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
    system.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import system_level as bench
    from moverkit.judgments import read_judgments, read_shipped, read_wmt17
    from moverkit.lines import check_out

    check_out(args.out, [] if args.data is None else [args.data])
    if args.wmt17 is None:
        test_sets = read_shipped(segments=args.segments)
        source = "the shipped extract"
    else:
        test_sets = read_wmt17(args.wmt17, segments=args.segments)
        source = str(args.wmt17)
    n = {len(t.references) for t in test_sets}
    header = (
        f"WMT17 to-English ({source}), {sum(len(t.outputs) for t in test_sets)} systems, "
        f"{'all' if args.segments is None and args.wmt17 is not None else f'the first {max(n)}'} segments of each test set"
    )
    if args.per_system_batch:
        from moverkit.bench import per_system

        metrics = list(args.metrics or per_system.PER_SYSTEM_METRICS)
        runs = per_system.per_system_batch(test_sets, metrics, log=progress)
        report = per_system.format_centering_effect(per_system.centering_effect(runs, test_sets))
        return emit(f"{header}\n\n{report}", args.out)
    scores = bench.score_test_sets(test_sets, list(args.metrics or METRICS))
    table = bench.system_level(scores, test_sets, resamples=args.resamples, seed=args.seed)
    if args.data is not None:
        for row, tied in bench.segment_acc_eq(read_judgments(args.data), list(args.metrics or METRICS)).items():
            table[row]["segment_acc_eq"] = tied
    return emit(f"{header}\n\n{bench.format_table(table)}", args.out)
