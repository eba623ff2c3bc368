"""``moverkit bench speed``: time metrics side by side against the encoder and peers
(:mod:`moverkit.bench.speed`)."""

from __future__ import annotations

from ..options import emit, positive_int, require_data, rounds
from .options import data_options


def register(which) -> None:
    speed = which.add_parser("speed", help="time metrics side by side against the encoder and peers")
    data_options(speed)
    speed.add_argument("--limit", type=positive_int, help="use only the first N rows")
    speed.add_argument("--suite", nargs="*", help="run only these suites, by key (--list shows the keys)")
    speed.add_argument("--repeats", type=rounds, default=3, help="timed rounds (median reported)")
    speed.add_argument("--list", action="store_true", help="list the suites and their contenders and exit")
    speed.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import registry
    from moverkit.bench.speed import format_report, run_suite
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    _, suites = registry()
    if args.suite:
        unknown = sorted(set(args.suite) - {s.key for s in suites})
        if unknown:
            raise ValueError(
                f"--suite: no suite {', '.join(unknown)}; the suites are {', '.join(s.key for s in suites)}"
            )
        suites = [s for s in suites if s.key in args.suite]
    if args.list:
        print("\n".join(f"{s.key}\t{s.name}\t{', '.join(s.contenders)}" for s in suites))
        return 0
    require_data(args)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    reports = [format_report(run_suite(s, data.predictions, data.references, args.repeats)) for s in suites]
    return emit("\n\n".join(reports), args.out)
