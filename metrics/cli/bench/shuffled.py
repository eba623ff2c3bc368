"""``moverkit bench shuffled``: share of pairs where each metric scores the true reference above
another pair's (:mod:`moverkit.bench.shuffled`)."""

from __future__ import annotations

from ..options import emit, positive_int, require_data
from .options import data_options


def register(which) -> None:
    shuffled = which.add_parser(
        "shuffled", help="share of pairs where each metric scores the true reference above another pair's"
    )
    data_options(shuffled)
    shuffled.add_argument("--pairs", type=positive_int, default=400, help="pairs drawn at random (default: 400)")
    shuffled.add_argument("--seed", type=int, default=0, help="seed of the draw and of the shuffle (default: 0)")
    shuffled.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import shuffled
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    rows = shuffled.run(read_judgments(args.data), pairs=args.pairs, seed=args.seed)
    header = (
        f"True reference against another pair's (a derangement, seed {args.seed}) on {args.pairs} pairs of "
        f"{args.data.name}, each metric with its default arguments"
    )
    return emit(f"{header}\n\n{shuffled.format_table(rows)}", args.out)
