"""``moverkit bench speed``: contenders timed side by side, interleaved, in one process."""

from __future__ import annotations

import statistics

from benchmarks import SpeedSuite, rows_and_suites
from benchmarks._shared import PeerUnavailable, command_parser, interleaved, judgments
from moverkit.formats.options import emit, rounds

HELP = "time metrics side by side against the encoder and peers"


def run_suite(suite: SpeedSuite, predictions: list[str], references: list[str], repeats: int = 3) -> dict:
    """Set every contender up, then time them ``repeats`` rounds, each round running each
    contender once in turn (so drift in machine load hits all alike). Medians in seconds.
    A peer whose package is not installed is skipped (named in ``"skipped"``), with the ratios
    that need it."""
    if suite.inputs is not None:
        predictions, references = suite.inputs(predictions, references)
    runs, skipped = {}, {}
    for label, factory in suite.contenders.items():
        try:
            runs[label] = factory(predictions, references)
        except PeerUnavailable as err:
            skipped[label] = str(err)
        except ImportError as err:
            skipped[label] = f"needs {err.name or err} (pip install 'moverkit[test]' installs the peers)"
    times = interleaved(runs, repeats)
    medians = {label: statistics.median(t) for label, t in times.items()}
    ratios = [
        (num, den, medians[num] / medians[den], target)
        for num, den, target in suite.ratios
        if num in medians and den in medians
    ]
    return {"suite": suite.name, "n_pairs": len(predictions), "seconds": medians, "ratios": ratios, "skipped": skipped}


def meets(ratio: float, target: str) -> bool:
    """Whether ``ratio`` satisfies a bound written ``">= x"`` or ``"<= x"``."""
    op, value = target.split()
    if op not in (">=", "<="):
        raise ValueError(f"a speed target is '>= x' or '<= x', got {target!r}")
    return ratio >= float(value) if op == ">=" else ratio <= float(value)


def format_report(report: dict) -> str:
    lines = [f"## {report['suite']} ({report['n_pairs']} pairs; median seconds)"]
    lines += [f"- {label}: {seconds:.2f} s" for label, seconds in report["seconds"].items()]
    lines += [f"- {label}: skipped, {why}" for label, why in report.get("skipped", {}).items()]
    for numerator, denominator, ratio, target in report["ratios"]:
        verdict = "" if target is None else f" (target {target}: {'met' if meets(ratio, target) else 'NOT met'})"
        lines.append(f"- {numerator} / {denominator} = {ratio:.2f}{verdict}")
    return "\n".join(lines)


def register(which) -> None:
    speed = command_parser(which, "speed", HELP, command, limit=True)
    speed.add_argument("--suite", nargs="*", help="run only these suites, by key (--list shows the keys)")
    speed.add_argument("--repeats", type=rounds, default=3, help="timed rounds (median reported)")
    speed.add_argument("--list", action="store_true", help="list the suites and their contenders and exit")


def command(args) -> int:
    _, suites = rows_and_suites()
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
    data = judgments(args)
    reports = [format_report(run_suite(s, data.predictions, data.references, args.repeats)) for s in suites]
    return emit("\n\n".join(reports), args.out)
