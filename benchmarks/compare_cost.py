"""``moverkit bench compare-cost``: what :func:`moverkit.compare` costs against encoding its texts once.

The workload is the one the issue names: 10 systems of 500 segments, taken from the shipped WMT17
system-level extract (:data:`moverkit.judgments.EXTRACT`): the first language pair (by
name) with at least that many rated systems, its first systems by name, the first segments. Per
metric, two contenders are timed side by side in interleaved rounds (each round runs each
contender once in turn, so drift in machine load hits both alike; medians reported):

* ``encode``: the metric's encoder (the same request: model and layer; for sbertscore the sentence
  encoder on the distinct sentences, split untimed) on the distinct texts of the comparison, once;
* ``compare``: ``moverkit.compare(references, systems, metrics=[metric], resamples=1000)``, all of
  it: scoring (which encodes each distinct text once) and the statistics (bootstrap intervals,
  paired bootstrap and permutation tests of every pair, clusters).

The ratio ``compare / encode`` is the overhead a comparison adds to the floor no embedding metric
can beat; the issue's bar is at most 1.2. The statistics alone (:func:`moverkit.comparison.summarize`
on the segment scores of the last ``compare``) are timed too, to show where the rest goes.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks._shared import (
    CENTERED_BY_DEFAULT,
    command_parser,
    encoder_floor,
    interleaved,
    sentence_encoder_floor,
)
from moverkit.facts.specs import spec
from moverkit.formats.options import METRICS, emit, positive_int, progress, rounds

HELP = "moverkit.compare against encoding its distinct texts once, side by side"

BAR = 1.2
"""The issue's bar: a comparison costs at most this many times the encoding of its distinct texts."""


@dataclass(frozen=True)
class Workload:
    """One language pair's references and, aligned with them, the outputs of the systems compared."""

    lp: str
    references: list[str]
    systems: dict[str, list[str]]

    @property
    def distinct_texts(self) -> int:
        return len(dict.fromkeys([*self.references, *(t for out in self.systems.values() for t in out)]))


def pick_workload(test_sets: Sequence, systems: int = 10, segments: int = 500) -> Workload:
    """The first test set (by language pair) with at least ``systems`` systems and ``segments``
    segments: its first ``systems`` systems by name, cut to the first ``segments`` segments.
    ``test_sets`` are :class:`~moverkit.judgments.TestSet` objects (or alike)."""
    for test_set in sorted(test_sets, key=lambda t: t.lp):
        if len(test_set.outputs) >= systems and len(test_set.references) >= segments:
            names = sorted(test_set.outputs)[:systems]
            return Workload(
                test_set.lp,
                list(test_set.references[:segments]),
                {name: list(test_set.outputs[name][:segments]) for name in names},
            )
    sizes = ", ".join(f"{t.lp}: {len(t.outputs)} systems of {len(t.references)} segments" for t in test_sets)
    raise ValueError(f"no language pair has {systems} systems of {segments} segments ({sizes})")


def encode_floor(metric: str, workload: Workload) -> Callable[[], object]:
    """A warmed-up function encoding the distinct texts of ``workload`` as ``metric`` does by
    default (its model and layer; a sentence-level metric: its sentence encoder on the distinct
    sentences)."""
    predictions = [text for outputs in workload.systems.values() for text in outputs]
    if spec(metric).level == "sentence":
        return sentence_encoder_floor(predictions, workload.references)
    # The metric's default layer (its spec's): the model's default layer, or the last (moverscore's, as the releases).
    return encoder_floor(predictions, workload.references, num_layers=spec(metric).default_layer)


def compare_run(metric: str, workload: Workload, resamples: int = 1000) -> Callable[[], object]:
    """A warmed-up function running ``moverkit.compare`` on ``workload`` with ``metric`` alone."""
    import moverkit

    warm = {name: outputs[:16] for name, outputs in list(workload.systems.items())[:2]}
    moverkit.compare(workload.references[:16], warm, metrics=[metric], resamples=10)
    return lambda: moverkit.compare(workload.references, workload.systems, metrics=[metric], resamples=resamples)


def summary(metric: str, times: Mapping[str, Sequence[float]], statistics_seconds: float | None = None) -> dict:
    """A row of :func:`format_table`: the median seconds of ``encode`` and ``compare``, their ratio,
    and the seconds of the statistics alone when measured."""
    encode = statistics.median(times["encode"])
    compare = statistics.median(times["compare"])
    return {
        "metric": metric,
        "encode": encode,
        "compare": compare,
        "ratio": compare / encode,
        "statistics": statistics_seconds,
        "rounds": len(times["compare"]),
    }


def measure(metric: str, workload: Workload, *, rounds: int = 3, resamples: int = 1000) -> dict:
    """Time ``encode`` and ``compare`` for ``metric`` side by side (:func:`interleaved`), then the
    statistics alone once; a row of :func:`format_table`."""
    from moverkit.comparison import summarize

    last = {}
    run = compare_run(metric, workload, resamples)

    def compare():
        last["result"] = run()

    times = interleaved({"encode": encode_floor(metric, workload), "compare": compare}, rounds)
    start = time.perf_counter()
    summarize(last["result"].segments, resamples=resamples, seed=0)
    return summary(metric, times, time.perf_counter() - start)


def format_table(
    rows: Sequence[dict], workload: Workload | None = None, *, bar: float = BAR, resamples: int = 1000
) -> str:
    """Markdown: per metric the median seconds of each contender, the ratio and whether it meets ``bar``."""
    lines = []
    if workload is not None:
        n = len(workload.references)
        lines += [
            f"{len(workload.systems)} systems of {n} segments ({workload.lp}, {workload.distinct_texts:,} distinct "
            f"texts); compare with resamples={resamples}; median of {rows[0]['rounds'] if rows else 0} interleaved rounds",
            "",
        ]
    lines += [
        "| metric | encode distinct texts (s) | compare (s) | of which statistics (s) | compare / encode | "
        f"at most {bar}x |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        stats = "–" if row.get("statistics") is None else f"{row['statistics']:.2f}"
        verdict = "yes" if row["ratio"] <= bar else "no"
        lines.append(
            f"| {row['metric']} | {row['encode']:.2f} | {row['compare']:.2f} | {stats} | {row['ratio']:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def register(which) -> None:
    cost = command_parser(which, "compare-cost", HELP, command, data=None)
    cost.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        help=f"metrics to time (default: {' and '.join(CENTERED_BY_DEFAULT)}, those centered by default)",
    )
    cost.add_argument("--systems", type=positive_int, default=10, help="systems compared (default: 10)")
    cost.add_argument("--segments", type=positive_int, default=500, help="segments of each system (default: 500)")
    cost.add_argument("--resamples", type=positive_int, default=1000, help="compare's resamples (default: 1000)")
    cost.add_argument("--rounds", type=rounds, default=3, help="interleaved timed rounds (median reported)")
    cost.add_argument(
        "--threads", type=positive_int, default=1, help="torch threads (default: 1, as the published figures)"
    )
    cost.add_argument("--out", type=Path, help="also write the table here (Markdown)")


def command(args) -> int:
    import torch

    from moverkit.formats.lines import check_out
    from moverkit.judgments import read_extract

    check_out(args.out, [])
    cores = os.cpu_count() or 1
    if args.threads > cores:  # torch.set_num_threads(999999) crashed the process
        raise ValueError(f"--threads {args.threads}: this machine has {cores} cores")
    torch.set_num_threads(args.threads)
    workload = pick_workload(read_extract(), systems=args.systems, segments=args.segments)
    rows = []
    for metric in args.metrics or CENTERED_BY_DEFAULT:
        rows.append(measure(metric, workload, rounds=args.rounds, resamples=args.resamples))
        progress(f"done: {metric}")
    return emit(format_table(rows, workload, resamples=args.resamples), args.out)
