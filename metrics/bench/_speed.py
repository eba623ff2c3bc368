"""``moverkit bench speed``: contenders timed side by side, interleaved, in one process."""

from __future__ import annotations

import statistics
import time

from . import SpeedSuite


def run_suite(suite: SpeedSuite, predictions: list[str], references: list[str], repeats: int = 3) -> dict:
    """Set every contender up, then time them ``repeats`` rounds, each round running each
    contender once in turn (so drift in machine load hits all alike). Medians in seconds."""
    if suite.inputs is not None:
        predictions, references = suite.inputs(predictions, references)
    runs = {label: factory(predictions, references) for label, factory in suite.contenders.items()}
    times = {label: [] for label in runs}
    for _ in range(repeats):
        for label, run in runs.items():
            start = time.perf_counter()
            run()
            times[label].append(time.perf_counter() - start)
    medians = {label: statistics.median(t) for label, t in times.items()}
    ratios = [(num, den, medians[num] / medians[den], target) for num, den, target in suite.ratios]
    return {"suite": suite.name, "n_pairs": len(predictions), "seconds": medians, "ratios": ratios}


def meets(ratio: float, target: str) -> bool:
    """Whether ``ratio`` satisfies a bound written ``">= x"`` or ``"<= x"``."""
    op, value = target.split()
    if op not in (">=", "<="):
        raise ValueError(f"a speed target is '>= x' or '<= x', got {target!r}")
    return ratio >= float(value) if op == ">=" else ratio <= float(value)


def format_report(report: dict) -> str:
    lines = [f"## {report['suite']} ({report['n_pairs']} pairs; median seconds)"]
    lines += [f"- {label}: {seconds:.2f} s" for label, seconds in report["seconds"].items()]
    for numerator, denominator, ratio, target in report["ratios"]:
        verdict = "" if target is None else f" (target {target}: {'met' if meets(ratio, target) else 'NOT met'})"
        lines.append(f"- {numerator} / {denominator} = {ratio:.2f}{verdict}")
    return "\n".join(lines)
