"""Bench suite of the encoder's reduced precision: every metric with ``dtype="float32"`` and
``dtype="bfloat16"``, side by side (``moverkit bench speed --suite bfloat16``)."""

from __future__ import annotations

from . import SpeedSuite
from ._peers import metric_run

_METRICS = ("centered_bertscore", "twmd", "moverscore", "lazy_emd", "sbertscore")

SPEED_SUITES = [
    SpeedSuite(
        "bfloat16 vs float32 (the encoder's dtype)",
        {f"{name} ({dtype})": metric_run(name, dtype=dtype) for name in _METRICS for dtype in ("float32", "bfloat16")},
        [
            (f"{name} (float32)", f"{name} (bfloat16)", ">= 2" if name == "centered_bertscore" else ">= 1")
            for name in _METRICS
        ],
    )
]
