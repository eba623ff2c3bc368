"""``moverkit bench cache``: an evaluation loop with the cross-call cache of token clouds.

A training loop evaluates on the same references again and again with new predictions. Here:
``evaluations`` calls of a metric on the first ``n`` references of the judgments, each call with
``n`` predictions never scored before (evaluation ``e`` takes hypotheses ``e*n`` onwards, each
without its ``e``-th word), the model loaded and warm before the first, the cache on (the default
budget, :func:`~moverkit._core.encoding.cache.cache_enabled`: back as it was after the loop) and empty at
the start of the loop. The loop runs ``rounds`` times (the cache emptied before each). Reported: each evaluation's median wall time over the rounds and
its speed-up over the first's, the same in CPU time (user + system of this process: with one torch
thread, what other jobs on the machine change least), and the largest difference from the same
loop with the cache off.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from benchmarks import MAIN_OUTPUTS
from benchmarks._shared import command_parser, judgments
from moverkit.formats.options import METRICS, emit, positive_int, rounds
from moverkit.judgments import Judgments

HELP = "an evaluation loop (fixed references, new predictions) with the cache on"


def new_prediction(text: str, k: int) -> str:
    """``text`` without its ``k``-th word (modulo its length): a prediction not seen before."""
    words = text.split()
    if len(words) < 2:
        return f"{text} {k}"
    k %= len(words)
    return " ".join(words[:k] + words[k + 1 :])


def loop_inputs(data: Judgments, n: int, evaluations: int) -> tuple[list[str], list[list[str]]]:
    """The fixed references and each evaluation's predictions (see the module doc)."""
    pool = data.predictions
    references = data.references[:n]
    predictions = [[new_prediction(pool[(e * n + i) % len(pool)], e) for i in range(n)] for e in range(evaluations)]
    return references, predictions


def run(
    data: Judgments, metric: str = "centered_bertscore", n: int = 1000, evaluations: int = 5, rounds: int = 1
) -> dict:
    import moverkit
    from moverkit._core.encoding import DEFAULT_MAX_BYTES, cache_enabled, clear_cache

    references, predictions = loop_inputs(data, n, evaluations)
    module = moverkit.load(metric)
    output = MAIN_OUTPUTS[metric]
    module.compute(predictions=predictions[0][:16], references=references[:16])  # model loaded, warm
    uncached = [module.compute(predictions=p, references=references)[output] for p in predictions]
    rounds_times = []
    with cache_enabled(DEFAULT_MAX_BYTES):
        for _ in range(rounds):
            clear_cache()
            times, cached = [], []
            for p in predictions:
                start, cpu_start = time.perf_counter(), time.process_time()
                cached.append(module.compute(predictions=p, references=references)[output])
                times.append((time.perf_counter() - start, time.process_time() - cpu_start))
            rounds_times.append(times)
    times = [statistics.median(wall for wall, _ in t) for t in zip(*rounds_times)]
    cpu_times = [statistics.median(cpu for _, cpu in t) for t in zip(*rounds_times)]
    delta = max(float(np.abs(np.array(a) - np.array(b)).max()) for a, b in zip(cached, uncached))
    return {
        "metric": metric,
        "references": n,
        "distinct_references": len(set(references)),
        "rounds": rounds,
        "seconds": times,
        "speedups": [times[0] / t for t in times],
        "cpu_seconds": cpu_times,
        "cpu_speedups": [cpu_times[0] / t for t in cpu_times],
        "max_abs_delta_vs_uncached": delta,
    }


def format_report(report: dict) -> str:
    lines = [
        f"## {report['metric']}: {len(report['seconds'])} evaluations, the same {report['references']:,} references "
        f"({report['distinct_references']:,} distinct), new predictions each time, cache on; "
        f"median of {report['rounds']} round(s)",
        "",
        "| evaluation | seconds | speed-up over the first |",
        "|---:|---:|---:|",
    ]
    lines += [
        f"| {e + 1} | {t:.2f} | {s:.2f}x |" for e, (t, s) in enumerate(zip(report["seconds"], report["speedups"]))
    ]
    lines += ["", f"max |delta| from the same loop uncached: {report['max_abs_delta_vs_uncached']:.1e}"]
    return "\n".join(lines)


def register(which) -> None:
    cache = command_parser(which, "cache", HELP, command)
    cache.add_argument("--metric", choices=METRICS, default="centered_bertscore", help="(default: centered_bertscore)")
    cache.add_argument(
        "--references", type=positive_int, default=1000, help="references of every evaluation (default: 1000)"
    )
    cache.add_argument("--evaluations", type=positive_int, default=5, help="evaluations in the loop (default: 5)")
    cache.add_argument("--rounds", type=rounds, default=1, help="times the loop runs (median per evaluation reported)")


def command(args) -> int:
    report = run(judgments(args), args.metric, args.references, args.evaluations, args.rounds)
    return emit(format_report(report), args.out)
