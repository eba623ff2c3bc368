"""``moverkit bench tune``: tuned settings (moverkit tune) against the defaults, leaving one language
pair out (:mod:`moverkit.bench.tuning`)."""

from __future__ import annotations

from pathlib import Path

from ..options import METRICS, emit, positive_int, progress, require_data, rounds
from .options import data_options


def register(which) -> None:
    tune = which.add_parser(
        "tune", help="tuned settings (moverkit tune) against the defaults, leaving one language pair out"
    )
    data_options(tune)
    tune.add_argument(
        "--metrics", nargs="+", choices=METRICS, default=list(METRICS), help="metrics to tune (default: all five)"
    )
    tune.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    tune.add_argument(
        "--system-level",
        action="store_true",
        help="also score the shipped WMT17 system-level extract with each pair's held-out settings",
    )
    tune.add_argument(
        "--segments",
        type=positive_int,
        help="with --system-level: the first N segments of each test set (default: all)",
    )
    tune.add_argument(
        "--cost",
        action="store_true",
        help="also time a tuning run against one scoring pass of the same texts, side by side (each metric)",
    )
    tune.add_argument("--rounds", type=rounds, default=2, help="with --cost: interleaved rounds (median)")
    tune.add_argument("--json", type=Path, help="also write every setting's per-pair correlations here (JSON)")
    tune.set_defaults(run=run)


def run(args) -> int:
    import json

    from moverkit.bench import tuning as bench
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out, write_atomic

    require_data(args)
    check_out(args.out, [args.data])
    check_out(args.json, [args.data, args.out], "--json")
    data = read_judgments(args.data)
    tunings = {}
    for metric in args.metrics:
        tunings.update(bench.segment_level(data, [metric], model_type=args.model))
        progress(f"{metric}: {len(tunings[metric].settings)} settings tuned")
    report = [
        f"Segment level: {args.data.name}, each language pair scored with the settings chosen on the others "
        "(Pearson r x 100)",
        bench.format_segment(tunings),
        "Mean Pearson r x 100 of each layer, the other arguments at their defaults:",
        bench.format_layers(tunings),
    ]
    record = {"segment": {metric: tuning.to_dict() for metric, tuning in tunings.items()}}
    if args.system_level:
        from moverkit.judgments import read_shipped

        test_sets = read_shipped(segments=args.segments)
        system = bench.system_level(tunings, test_sets, model_type=args.model)
        report += [
            "System level: the shipped WMT17 extract, each pair with its held-out settings",
            bench.format_system(system),
        ]
        record["system"] = system
    if args.cost:
        costs = {metric: bench.cost(data, metric, rounds=args.rounds, model_type=args.model) for metric in args.metrics}
        lines = ["| metric | settings | one scoring pass (s) | tuning run (s) | ratio |", "|---|---:|---:|---:|---:|"]
        for metric, c in costs.items():
            lines.append(
                f"| {metric} | {c['settings']} | {c['one scoring pass']:.1f} | {c['tuning run']:.1f} | {c['ratio']:.2f}x |"
            )
        report += [f"Cost, medians of {args.rounds} interleaved rounds:", "\n".join(lines)]
        record["cost"] = costs
    if args.json:
        write_atomic(args.json, json.dumps(record, indent=1) + "\n")
    return emit("\n\n".join(report), args.out)
