"""``moverkit bench correlation``: Pearson and Kendall per group with human judgments
(:mod:`moverkit.bench.correlation`)."""

from __future__ import annotations

from ..options import emit, positive_int, progress, require_data
from .options import data_options


def register(which) -> None:
    corr = which.add_parser("correlation", help="Pearson and Kendall per group with human judgments")
    data_options(corr)
    corr.add_argument("--limit", type=positive_int, help="use only the first N rows")
    corr.add_argument("--rows", nargs="*", help="row labels to run (default: all; see --list)")
    corr.add_argument("--list", action="store_true", help="list the row labels and exit")
    corr.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import registry
    from moverkit.bench.correlation import correlation_table, format_table
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    rows, _ = registry()
    if args.list:
        print("\n".join(f"{r.label}\t{r.metric}.{r.output} {r.kwargs}" for r in rows))
        return 0
    require_data(args)
    check_out(args.out, [args.data])
    if args.rows:
        missing = sorted(set(args.rows) - {r.label for r in rows})
        if missing:
            raise ValueError(f"unknown row(s) {', '.join(missing)}; see 'moverkit bench correlation --list'")
        rows = [r for r in rows if r.label in args.rows]
    data = read_judgments(args.data, limit=args.limit)
    report = format_table(correlation_table(rows, data, log=progress), rows)
    header = f"Kendall tau / Pearson r (x100) with human judgments of {args.data.name} ({len(data.human)} segments)"
    return emit(f"{header}\n\n{report}", args.out)
