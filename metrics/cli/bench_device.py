"""``moverkit bench overhead`` and ``moverkit bench gpu``: the benches of the GPU regime, where a
metric's own pipeline, not its encoder, bounds its speed (:mod:`moverkit.bench.overhead`,
:mod:`moverkit.bench.gpu`). Registered by :mod:`moverkit.cli.bench`."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .options import METRICS, emit, natural_int, positive_int, progress, require_data


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


def gpu(which) -> None:
    from moverkit.bench import gpu as bench

    parser = which.add_parser(
        "gpu", help="pairs/s per metric and precision on a CUDA device, bert-score beside, a 100k-pair run"
    )
    _data_options(parser)
    parser.add_argument("--limit", type=positive_int, help="use only the first N rows")
    parser.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--device", default="cuda", help="the CUDA device (default: cuda)")
    parser.add_argument("--dtypes", nargs="+", choices=bench.DTYPES, help="precisions timed (default: all three)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="timed calls per cell (median reported)")
    parser.add_argument(
        "--scale-pairs", type=natural_int, default=bench.SCALE_PAIRS, help="distinct pairs of the scale run (0: none)"
    )
    parser.add_argument("--scale-dtype", choices=bench.DTYPES, default="float16", help="precision of the scale run")
    parser.add_argument(
        "--check-pairs", type=positive_int, default=bench.CHECK_PAIRS, help="pairs scored on GPU and CPU to compare"
    )
    parser.set_defaults(run=run_gpu)


def run_gpu(args) -> int:
    from moverkit.bench import gpu as bench
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    bench.require_cuda()
    require_data(args)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    every = read_judgments(args.data)  # the scale run's texts come from every segment, whatever --limit
    segments = every.predictions + every.references
    report = bench.measure(
        data.predictions,
        data.references,
        segments,
        model_type=args.model,
        device=args.device,
        dtypes=args.dtypes or bench.DTYPES,
        rounds=args.rounds,
        scale_pairs=args.scale_pairs,
        scale_dtype=args.scale_dtype,
        check_pairs=args.check_pairs,
        log=progress,
    )
    return emit(bench.format_report(report), args.out)
