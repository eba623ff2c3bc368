"""``moverkit bench gpu``: pairs/s per metric and precision on a CUDA device, bert-score beside, a
100k-pair run, peak GPU memory (:mod:`moverkit.bench.gpu`)."""

from __future__ import annotations

from ..options import emit, natural_int, positive_int, progress, require_data, rounds
from .options import data_options


def register(which) -> None:
    from moverkit.bench import gpu as bench

    parser = which.add_parser(
        "gpu", help="pairs/s per metric and precision on a CUDA device, bert-score beside, a 100k-pair run"
    )
    data_options(parser)
    parser.add_argument("--limit", type=positive_int, help="use only the first N rows")
    parser.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--device", default="cuda", help="the CUDA device (default: cuda)")
    parser.add_argument("--dtypes", nargs="+", choices=bench.DTYPES, help="precisions timed (default: all three)")
    parser.add_argument("--rounds", type=rounds, default=3, help="timed calls per cell (median reported)")
    parser.add_argument(
        "--scale-pairs", type=natural_int, default=bench.SCALE_PAIRS, help="distinct pairs of the scale run (0: none)"
    )
    parser.add_argument("--scale-dtype", choices=bench.DTYPES, default="float16", help="precision of the scale run")
    parser.add_argument(
        "--check-pairs", type=positive_int, default=bench.CHECK_PAIRS, help="pairs scored on GPU and CPU to compare"
    )
    parser.set_defaults(run=run)


def run(args) -> int:
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
