"""``moverkit bench scale``: wall time and peak memory of one call as the number of pairs grows.

Each (metric, centering, size) runs in a fresh Python process (so its peak resident set size is
its own: ``ru_maxrss`` of that process) on ``size`` pairs of distinct texts, made from the segments
of a judgments TSV (:func:`~benchmarks._shared.distinct_texts`): every text is the first half
of one segment's words followed by the second half of another's, drawn without repeats, so the
texts stay sentence-length and no two are equal.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._shared import CENTERED_BY_DEFAULT, child_environment, command_parser, distinct_texts, peak_rss_bytes
from moverkit.facts.specs import spec
from moverkit.formats.options import emit, positive_int, progress, require_data
from moverkit.judgments import read_judgments

HELP = "wall time and peak RSS of one call at growing numbers of distinct pairs"

SIZES = (1_000, 10_000, 100_000)
RUNS = tuple((name, centering) for name in CENTERED_BY_DEFAULT for centering in ("batch", "corpus"))
"""The default runs: each metric centered by default, with batch and with corpus centering."""
STATS_TEXTS = 1_000
"""Segments the ``corpus`` statistic is fitted on (before the timed call)."""


def parse_run(run: str) -> tuple[str, str]:
    """``"METRIC:CENTERING"`` (as on the command line) as a pair of :data:`RUNS`' kind; an unknown
    metric is the spec's error, which lists the metrics."""
    metric, _, centering = run.partition(":")
    if centering not in ("batch", "corpus", "none", "dim", "sentence"):
        raise ValueError(f"a scale run is a metric, a colon and a centering mode, got {run!r}")
    spec(metric)
    return metric, centering


def measure(data: Path, metric: str, centering: str, size: int, memory_budget: str | None = None) -> dict:
    """One timed call in this process; ``wall_s`` is the call itself (the model loaded before),
    ``cpu_s`` its user + system CPU time (less sensitive than wall time to other jobs)."""
    import moverkit
    from moverkit.integrations.registry import REGISTRY

    judgments = read_judgments(data)
    segments = judgments.predictions + judgments.references
    texts = distinct_texts(segments, 2 * size)
    kwargs = {"centering": centering}
    moverkit.set_memory_budget(memory_budget)
    if centering == "corpus":
        kwargs["centering_stats"] = moverkit.fit_centering(segments[:STATS_TEXTS])
    function = REGISTRY[metric].function
    function(["warm up"], ["the model loads"], **kwargs)
    start, cpu_start = time.perf_counter(), time.process_time()
    result = function(texts[:size], texts[size:], **kwargs)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert len(next(v for v in result.values() if isinstance(v, list))) == size
    return {
        "metric": metric,
        "centering": centering,
        "pairs": size,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": peak_rss_bytes() / 2**20,
    }


def run(
    data: Path, sizes=SIZES, runs=RUNS, memory_budget: str | None = None, log=print, timeout: float | None = None
) -> list[dict]:
    """:func:`measure` each run at each size, each in a fresh process; ``log`` gets each row as it ends."""
    rows = []
    for metric, centering in runs:
        for size in sizes:
            command = [sys.executable, "-m", "benchmarks.scale", str(data), metric, centering, str(size)]
            command += [memory_budget] if memory_budget else []
            out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=child_environment())
            if out.returncode != 0:  # the child's own message, not a CalledProcessError
                last = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
                raise ValueError(f"bench scale: the {metric}:{centering} run of {size} pairs failed: {last}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            log(format_row(row))
    return rows


def format_row(row: dict) -> str:
    per_pair, cpu_per_pair = (1000 * row[key] / row["pairs"] for key in ("wall_s", "cpu_s"))
    return (
        f"| {row['metric']} | {row['centering']} | {row['pairs']:,} | {row['wall_s']:.1f} | {per_pair:.2f} "
        f"| {cpu_per_pair:.2f} | {row['peak_rss_mb']:,.0f} |"
    )


def format_table(rows: list[dict]) -> str:
    header = (
        "| metric | centering | pairs | wall (s) | ms / pair | CPU ms / pair | peak RSS (MB) |\n"
        "|---|---|---:|---:|---:|---:|---:|"
    )
    return "\n".join([header] + [format_row(r) for r in rows])


def register(which) -> None:
    parser = command_parser(
        which, "scale", HELP, command, data="TSV of judgments whose segments make the texts (required)"
    )
    parser.add_argument("--sizes", type=positive_int, nargs="+", help="numbers of pairs (default: 1000 10000 100000)")
    parser.add_argument(
        "--runs",
        nargs="+",
        help=f"METRIC:CENTERING runs (default: {' and '.join(CENTERED_BY_DEFAULT)}, those centered by default, each "
        "with batch and with corpus centering)",
    )
    parser.add_argument("--memory-budget", help="moverkit.set_memory_budget for the runs (default: the default)")


def command(args) -> int:
    from moverkit._core.base import parse_size
    from moverkit.formats.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    if not args.data.is_file():
        raise ValueError(f"--data {args.data}: no such file")
    if args.memory_budget is not None:
        parse_size(args.memory_budget, "--memory-budget")  # before a child process is started
    runs = RUNS if not args.runs else tuple(parse_run(run) for run in args.runs)
    rows = run(args.data, tuple(args.sizes or SIZES), runs, memory_budget=args.memory_budget, log=progress)
    return emit(format_table(rows), args.out)


if __name__ == "__main__":  # one measurement, in the fresh process run() starts
    path, name, mode, n = sys.argv[1:5]
    print(json.dumps(measure(Path(path), name, mode, int(n), sys.argv[5] if len(sys.argv) > 5 else None)))
