"""``moverkit bench overhead``: each metric's time over a tokenize+forward floor with a tiny random
encoder, the CPU proxy of the GPU regime (:mod:`moverkit.bench.overhead`)."""

from __future__ import annotations

import tempfile

from ..options import METRICS, emit, positive_int, progress, require_data, rounds
from .options import cap_options, data_options, environment_caps, rerun_capped


def register(which) -> None:
    parser = which.add_parser(
        "overhead", help="each metric's time over a tokenize+forward floor, with a tiny random encoder (CPU proxy)"
    )
    data_options(parser)
    parser.add_argument("--limit", type=positive_int, help="use only the first N rows")
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help="metrics to time (default: all five)")
    parser.add_argument("--rounds", type=rounds, default=5, help="interleaved timed rounds (median reported)")
    cap_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import overhead as bench
    from moverkit.bench.precision import machine_isa
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    caps = environment_caps(args)
    if caps:
        return rerun_capped("overhead", args, caps)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    metrics = args.metrics or list(bench.RUNS)
    with tempfile.TemporaryDirectory(prefix="moverkit-tiny-bert-") as folder:
        report = bench.measure(data.predictions, data.references, metrics, args.rounds, folder)
    progress("done: overhead")
    return emit(bench.format_report(report, machine_isa()), args.out)
