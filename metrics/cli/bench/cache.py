"""``moverkit bench cache``: an evaluation loop (fixed references, new predictions) with the cache on
(:mod:`moverkit.bench.cache_loop`)."""

from __future__ import annotations

from ..options import METRICS, emit, positive_int, require_data, rounds
from .options import data_options


def register(which) -> None:
    cache = which.add_parser("cache", help="an evaluation loop (fixed references, new predictions) with the cache on")
    data_options(cache)
    cache.add_argument("--metric", choices=METRICS, default="centered_bertscore", help="(default: centered_bertscore)")
    cache.add_argument(
        "--references", type=positive_int, default=1000, help="references of every evaluation (default: 1000)"
    )
    cache.add_argument("--evaluations", type=positive_int, default=5, help="evaluations in the loop (default: 5)")
    cache.add_argument("--rounds", type=rounds, default=1, help="times the loop runs (median per evaluation reported)")
    cache.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import cache_loop
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    report = cache_loop.run(read_judgments(args.data), args.metric, args.references, args.evaluations, args.rounds)
    return emit(cache_loop.format_report(report), args.out)
