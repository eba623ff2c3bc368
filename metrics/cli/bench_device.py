"""``moverkit bench overhead`` and ``moverkit bench gpu``: the benches of the GPU regime, where a
metric's own pipeline, not its encoder, bounds its speed (:mod:`moverkit.bench.overhead`,
:mod:`moverkit.bench.gpu`). Registered by :mod:`moverkit.cli.bench`."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .options import METRICS, emit, positive_int, progress, require_data


def _data_options(parser) -> None:
    parser.add_argument("--data", type=Path, help="TSV with columns lp, hypothesis, reference, human (required)")
    parser.add_argument("--out", type=Path, help="also write the report here (Markdown)")


def overhead(which) -> None:
    from .bench import _cap_options

    parser = which.add_parser(
        "overhead", help="each metric's time over a tokenize+forward floor, with a tiny random encoder (CPU proxy)"
    )
    _data_options(parser)
    parser.add_argument("--limit", type=positive_int, help="use only the first N rows")
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help="metrics to time (default: all five)")
    parser.add_argument("--rounds", type=positive_int, default=5, help="interleaved timed rounds (median reported)")
    _cap_options(parser)
    parser.set_defaults(run=run_overhead)


def run_overhead(args) -> int:
    from moverkit.bench import overhead as bench
    from moverkit.bench.precision import machine_isa, run_capped
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    from .bench import _caps

    require_data(args)
    caps = _caps(args)
    if caps:
        argv = ["bench", "overhead", "--data", str(args.data), "--rounds", str(args.rounds)]
        argv += ["--limit", str(args.limit)] if args.limit else []
        argv += ["--metrics", *args.metrics] if args.metrics else []
        argv += ["--out", str(args.out)] if args.out else []
        return run_capped(argv, caps)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    metrics = args.metrics or list(bench.RUNS)
    with tempfile.TemporaryDirectory(prefix="moverkit-tiny-bert-") as folder:
        report = bench.measure(data.predictions, data.references, metrics, args.rounds, folder)
    progress("done: overhead")
    return emit(bench.format_report(report, machine_isa()), args.out)
