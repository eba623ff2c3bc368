r"""Baseline rescaling of BERTScore-style scores (Zhang et al., 2020, Section 4 "Baseline rescaling").

A score :math:`s` (precision, recall or F1) is mapped to

.. math::

    \hat s = \frac{s - b}{1 - b},

where :math:`b` is the mean score of random pairs of unrelated sentences with the same model,
layer and settings: 0 then means "as similar as unrelated text", 1 stays "identical". A baseline
file is bert-score's CSV format, one row per layer (``k``: the output of the k-th block, 0 the
embeddings)::

    LAYER,P,R,F
    0,0.5,0.5,0.5
    ...

:func:`moverkit.rescaling.fit_baseline` computes one for any model, layer and centering (``moverkit fit-baseline``);
the baselines of the embedded model ship with the package (:func:`default_baseline_path`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path

import torch

BASELINE_DIR = Path(__file__).resolve().parents[1] / "baselines"
"""The shipped baselines: ``<model name, / as __>.<centering>.csv``."""

HEADER = ("LAYER", "P", "R", "F")


def default_baseline_path(model: str, centering: str) -> Path:
    """The shipped baseline of ``model`` (a resolved model name) under ``centering``, or a
    ``ValueError`` that says how to make one."""
    path = BASELINE_DIR / f"{model.replace('/', '__')}.{centering}.csv"
    if not path.is_file():
        shipped = ", ".join(sorted(p.name for p in BASELINE_DIR.glob("*.csv"))) or "none"
        raise ValueError(
            f"rescale_with_baseline=True: no baseline ships for model {model!r} with centering={centering!r} "
            f"(shipped: {shipped}); make one with `moverkit fit-baseline --texts CORPUS.txt --out OUT.csv --model ... "
            f"--centering {centering}` and pass baseline_path=OUT.csv"
        )
    return path


def read_baseline(path: str | os.PathLike, layer: int) -> torch.Tensor:
    """The (P, R, F) baseline of ``layer`` from a ``LAYER,P,R,F`` file, float64.

    The whole file is checked first (a short row would otherwise apply P's baseline to R and F):
    UTF-8, the header ``LAYER,P,R,F``, at least one row, four fields per row, an integer layer
    >= 0 given once, and finite numbers below 1 (a baseline of 1 or more makes (s - b) / (1 - b)
    meaningless). Every error names ``baseline_path``, the file, the line and the field."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"baseline_path must be a path to a LAYER,P,R,F csv file, got {type(path).__name__}")
    where = f"baseline_path={str(path)!r}"
    if not os.path.isfile(path):
        raise ValueError(f"{where} is not a file")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError as err:
        raise ValueError(f"{where} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not rows or tuple(cell.strip() for cell in rows[0]) != HEADER:
        raise ValueError(f"{where}, line 1: the header must be {','.join(HEADER)} (bert-score's format)")
    table = {}
    for number, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(HEADER):
            raise ValueError(f"{where}, line {number}: {len(row)} field(s) {row}, expected 4 ({','.join(HEADER)})")
        try:
            k = int(row[0])
        except ValueError:
            raise ValueError(f"{where}, line {number}, field LAYER: {row[0]!r} is not an integer") from None
        if k < 0:
            raise ValueError(f"{where}, line {number}, field LAYER: {k} is negative")
        if k in table:
            raise ValueError(f"{where}, line {number}, field LAYER: layer {k} is given twice")
        values = []
        for name, cell in zip(HEADER[1:], row[1:]):
            try:
                value = float(cell)
            except ValueError:
                raise ValueError(f"{where}, line {number}, field {name}: {cell!r} is not a number") from None
            if not math.isfinite(value) or value >= 1:
                raise ValueError(f"{where}, line {number}, field {name}: {cell} is not a finite number below 1")
            values.append(value)
        table[k] = values
    if not table:
        raise ValueError(f"{where} has a header but no row")
    if layer not in table:
        layers = ", ".join(str(k) for k in sorted(table))
        raise ValueError(f"{where} has no row for layer {layer} (it has layers {layers})")
    return torch.tensor(table[layer], dtype=torch.float64)


def rescale(scores: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
    """``(scores - b) / (1 - b)`` row by row: ``scores`` is (3, n) precision, recall, F1."""
    return (scores - baseline[:, None]) / (1 - baseline[:, None])


def baseline_tag(baseline: torch.Tensor) -> str:
    """The baseline's values, for the hashcode."""
    return ",".join(f"{v:.6f}" for v in baseline.tolist())


def baseline_csv(rows) -> str:
    """``(layer, P, R, F)`` rows as bert-score's ``LAYER,P,R,F`` CSV text."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for layer, *values in rows:
        writer.writerow([layer, *(f"{v:.10f}" for v in values)])
    return out.getvalue()
