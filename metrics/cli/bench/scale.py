"""``moverkit bench scale``: wall time and peak RSS of one call at growing numbers of distinct pairs
(:mod:`moverkit.bench.scale`)."""

from __future__ import annotations

from ..options import emit, positive_int, progress, require_data
from .options import data_options


def register(which) -> None:
    scale = which.add_parser("scale", help="wall time and peak RSS of one call at growing numbers of distinct pairs")
    data_options(scale, "TSV of judgments whose segments make the texts (required)")
    scale.add_argument("--sizes", type=positive_int, nargs="+", help="numbers of pairs (default: 1000 10000 100000)")
    scale.add_argument(
        "--runs",
        nargs="+",
        help="METRIC:CENTERING runs (default: centered_bertscore and twmd, each with batch and corpus centering)",
    )
    scale.add_argument("--memory-budget", help="moverkit.set_memory_budget for the runs (default: the default)")
    scale.set_defaults(run=run)


def run(args) -> int:
    from moverkit._core.base import parse_size
    from moverkit.bench import scale
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    if not args.data.is_file():
        raise ValueError(f"--data {args.data}: no such file")
    if args.memory_budget is not None:
        parse_size(args.memory_budget, "--memory-budget")  # before a child process is started
    runs = scale.RUNS if not args.runs else tuple(scale.parse_run(run) for run in args.runs)
    rows = scale.run(args.data, tuple(args.sizes or scale.SIZES), runs, memory_budget=args.memory_budget, log=progress)
    return emit(scale.format_table(rows), args.out)
