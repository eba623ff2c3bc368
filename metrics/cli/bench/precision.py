"""``moverkit bench precision``: float32 vs bfloat16 encoder: speed, score change, correlation
(:mod:`moverkit.bench.precision`)."""

from __future__ import annotations

from ..options import METRICS, emit, positive_int, progress, require_data, rounds
from .options import cap_options, data_options, environment_caps, rerun_capped


def register(which) -> None:
    precision = which.add_parser("precision", help="float32 vs bfloat16 encoder: speed, score change, correlation")
    data_options(precision)
    precision.add_argument("--limit", type=positive_int, help="use only the first N rows")
    precision.add_argument("--metrics", nargs="*", choices=METRICS, help="metrics to measure (default: all five)")
    precision.add_argument("--rounds", type=rounds, default=3, help="interleaved timed rounds (median reported)")
    cap_options(precision)
    precision.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import precision
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    caps = environment_caps(args)
    if caps:
        return rerun_capped("precision", args, caps)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    rows = []
    for metric in args.metrics or METRICS:
        rows.append(precision.measure(metric, data, rounds=args.rounds))
        progress(f"done: {metric}")
    return emit(precision.format_table(rows), args.out)
