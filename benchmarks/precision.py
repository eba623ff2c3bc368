"""``moverkit bench precision``: the encoder's reduced precision, per metric, on human judgments.

For each metric, ``dtype="float32"`` and ``dtype="bfloat16"`` are run in interleaved rounds (so a
change of machine load hits both alike), each round scoring every pair one group (language pair)
per call, as ``moverkit bench correlation`` does. Reported per metric: the median time of each
dtype and their ratio, the mean and max :math:`|\\Delta|` of the main output, and the average
Pearson r and Kendall tau with the human scores under each dtype. Under the table, the ISA it
ran on (:func:`~benchmarks._shared.isa_line`): the CPU's model, its bfloat16 units, the environment variables that
cap the kernels (``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``, ...), and whether bfloat16 then
is fast there (:func:`moverkit._core.base.hardware.native_bfloat16_cpu`).
"""

from __future__ import annotations

import statistics
import time
import warnings

import numpy as np

from benchmarks import MAIN_OUTPUTS, CorrelationRow
from benchmarks._shared import capped_parser, judgments, machine_isa, score_row
from moverkit.formats.options import METRICS, emit, progress
from moverkit.judgments import Judgments
from moverkit.judgments.correlation import correlate

HELP = "float32 vs bfloat16 encoder: speed, score change, correlation"

DTYPES = ("float32", "bfloat16")


def measure(metric: str, data: Judgments, rounds: int = 3) -> dict:
    """Times, score change and correlations of ``metric`` under each of :data:`DTYPES`. The
    slow-bfloat16 warning is silenced here: measuring that slowness is the point, and the table's
    ISA line says whether the CPU runs bfloat16 fast."""
    from moverkit._core.base import SlowPrecisionWarning

    rows = {dtype: CorrelationRow(dtype, metric, MAIN_OUTPUTS[metric], {"dtype": dtype}) for dtype in DTYPES}
    warm = Judgments(data.groups[:16], data.predictions[:16], data.references[:16], data.human[:16])
    times, scores = {dtype: [] for dtype in DTYPES}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPrecisionWarning)
        for row in rows.values():
            score_row(row, warm)  # model loaded, kernels warm
        for _ in range(rounds):
            for dtype, row in rows.items():
                start = time.perf_counter()
                scores[dtype] = np.array(score_row(row, data))
                times[dtype].append(time.perf_counter() - start)
    delta = np.abs(scores["float32"] - scores["bfloat16"])
    groups = data.by_group().values()
    correlations = {}
    for dtype, values in scores.items():
        per_group = [correlate(values[members].tolist(), [data.human[i] for i in members]) for members in groups]
        correlations[dtype] = tuple(float(np.mean([g[k] for g in per_group])) for k in (0, 1))
    median = {dtype: statistics.median(t) for dtype, t in times.items()}
    return {
        "metric": metric,
        "pairs": len(data.predictions),
        "rounds": rounds,
        "seconds": median,
        "speedup": median["float32"] / median["bfloat16"],
        "mean_abs_delta": float(delta.mean()),
        "max_abs_delta": float(delta.max()),
        "pearson_kendall": correlations,
    }


def format_row(row: dict) -> str:
    (r32, tau32), (r16, tau16) = (row["pearson_kendall"][d] for d in DTYPES)
    return (
        f"| {row['metric']} | {row['seconds']['float32']:.1f} | {row['seconds']['bfloat16']:.1f} "
        f"| {row['speedup']:.2f}x | {row['mean_abs_delta']:.1e} | {row['max_abs_delta']:.1e} "
        f"| {100 * r32:.2f} / {100 * tau32:.2f} | {100 * r16:.2f} / {100 * tau16:.2f} |"
    )


def format_table(rows: list[dict], isa: str | None = None) -> str:
    """The rows as a Markdown table, then a line naming the ISA they ran on (``isa``; by default
    :func:`machine_isa`, the ISA of this process)."""
    header = (
        "| metric | float32 (s) | bfloat16 (s) | speed-up | mean abs delta | max abs delta "
        "| float32 Pearson / Kendall | bfloat16 Pearson / Kendall |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    ran_on = isa if isa is not None else machine_isa()
    return "\n".join([header, *(format_row(r) for r in rows), "", ran_on])


def register(which) -> None:
    capped_parser(which, "precision", HELP, command, measured="measure", rounds_default=3)


def command(args) -> int:
    data = judgments(args)
    rows = []
    for metric in args.metrics or METRICS:
        rows.append(measure(metric, data, rounds=args.rounds))
        progress(f"done: {metric}")
    return emit(format_table(rows), args.out)
