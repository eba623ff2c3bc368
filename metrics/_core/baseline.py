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

:func:`fit_baseline` computes one for any model, layer and centering (``moverkit fit-baseline``);
the baselines of the embedded model ship with the package (:func:`default_baseline_path`).
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Sequence
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
        # fit_baseline refuses "corpus" (a baseline is fitted on its pairs' own batch): point to "batch"
        fitted_as = "batch" if centering == "corpus" else centering
        raise ValueError(
            f"rescale_with_baseline=True: no baseline ships for model {model!r} with centering={centering!r} "
            f"(shipped: {shipped}); make one with `moverkit fit-baseline --texts CORPUS.txt --out OUT.csv --model ... "
            f"--centering {fitted_as}` and pass baseline_path=OUT.csv"
        )
    return path


def read_baseline(path: str | os.PathLike, layer: int) -> torch.Tensor:
    """The (P, R, F) baseline of ``layer`` from a ``LAYER,P,R,F`` file, float64."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"baseline_path must be a path to a LAYER,P,R,F csv file, got {type(path).__name__}")
    if not os.path.isfile(path):
        raise ValueError(f"baseline_path={str(path)!r} is not a file")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows or tuple(cell.strip() for cell in rows[0]) != HEADER:
        raise ValueError(f"baseline_path={str(path)!r}: the first line must be {','.join(HEADER)}")
    for row in rows[1:]:
        if row and int(row[0]) == layer:
            values = torch.tensor([float(v) for v in row[1:4]], dtype=torch.float64)
            if not (torch.isfinite(values).all() and (values < 1).all()):
                raise ValueError(f"baseline_path={str(path)!r}: layer {layer} needs finite values below 1, got {row}")
            return values
    layers = [row[0] for row in rows[1:] if row]
    raise ValueError(f"baseline_path={str(path)!r} has no row for layer {layer} (it has layers {', '.join(layers)})")


def rescale(scores: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
    """``(scores - b) / (1 - b)`` row by row: ``scores`` is (3, n) precision, recall, F1."""
    return (scores - baseline[:, None]) / (1 - baseline[:, None])


def baseline_tag(baseline: torch.Tensor) -> str:
    """The baseline's values, for the hashcode."""
    return ",".join(f"{v:.6f}" for v in baseline.tolist())


def random_pairs(texts: Sequence[str], n_pairs: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n_pairs`` pairs of two different texts drawn at random from ``texts`` (bert-score's
    baselines pair sentences of a corpus at random, so they are unrelated)."""
    texts = [t for t in dict.fromkeys(texts) if t.strip()]
    if len(texts) < 2:
        raise ValueError("fit a baseline on at least 2 distinct non-empty texts")
    rng = random.Random(seed)
    pairs = [rng.sample(texts, 2) for _ in range(n_pairs)]
    return [p for p, _ in pairs], [r for _, r in pairs]


def fit_baseline(
    texts: Sequence[str],
    *,
    model_type: str | None = None,
    layers: Sequence[int] | None = None,
    centering: str = "none",
    n_pairs: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
    device: str | None = None,
) -> list[tuple[int, float, float, float]]:
    """``(layer, P, R, F)`` rows: the mean centered_bertscore of ``n_pairs`` random pairs of
    ``texts`` (no IDF) at each of ``layers`` (default: every layer, 0 to the last), with
    ``centering`` (``"corpus"`` is not offered: fit on the pairs' own batch instead)."""
    from ..functional.centered_bertscore import centered_bertscore
    from .encoder import get_encoder

    if centering == "corpus":
        raise ValueError('fit_baseline takes centering "none", "dim", "sentence" or "batch"')
    predictions, references = random_pairs(texts, n_pairs, seed)
    if layers is None:
        n_layers = int(get_encoder(model_type, num_layers=-1, device=device).layer)
        layers = range(n_layers + 1)
    rows = []
    for layer in layers:
        result = centered_bertscore(
            predictions,
            references,
            model_type=model_type,
            num_layers=layer,
            batch_size=batch_size,
            device=device,
            centering=centering,
        )
        means = [sum(result[key]) / len(result[key]) for key in ("precision", "recall", "f1")]
        rows.append((int(layer), *means))
    return rows


def write_baseline(rows, path: str | os.PathLike) -> None:
    """Write ``(layer, P, R, F)`` rows in bert-score's ``LAYER,P,R,F`` format."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        for layer, *values in rows:
            writer.writerow([layer, *(f"{v:.10f}" for v in values)])
