"""``moverkit bench compare-cost``: moverkit.compare against encoding its distinct texts once, side by
side (:mod:`moverkit.bench.compare_cost`)."""

from __future__ import annotations

import os
from pathlib import Path

from ..options import METRICS, emit, positive_int, progress, rounds


def register(which) -> None:
    cost = which.add_parser(
        "compare-cost", help="moverkit.compare against encoding its distinct texts once, side by side"
    )
    cost.add_argument(
        "--metrics", nargs="+", choices=METRICS, help="metrics to time (default: centered_bertscore and twmd)"
    )
    cost.add_argument("--systems", type=positive_int, default=10, help="systems compared (default: 10)")
    cost.add_argument("--segments", type=positive_int, default=500, help="segments of each system (default: 500)")
    cost.add_argument("--resamples", type=positive_int, default=1000, help="compare's resamples (default: 1000)")
    cost.add_argument("--rounds", type=rounds, default=3, help="interleaved timed rounds (median reported)")
    cost.add_argument(
        "--threads", type=positive_int, default=1, help="torch threads (default: 1, as the published figures)"
    )
    cost.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    cost.set_defaults(run=run)


def run(args) -> int:
    import torch

    from moverkit.bench import compare_cost
    from moverkit.judgments import read_shipped
    from moverkit.lines import check_out

    check_out(args.out, [])
    cores = os.cpu_count() or 1
    if args.threads > cores:  # torch.set_num_threads(999999) crashed the process
        raise ValueError(f"--threads {args.threads}: this machine has {cores} cores")
    torch.set_num_threads(args.threads)
    workload = compare_cost.pick_workload(read_shipped(), systems=args.systems, segments=args.segments)
    rows = []
    for metric in args.metrics or ("centered_bertscore", "twmd"):
        rows.append(compare_cost.measure(metric, workload, rounds=args.rounds, resamples=args.resamples))
        progress(f"done: {metric}")
    return emit(compare_cost.format_table(rows, workload, resamples=args.resamples), args.out)
