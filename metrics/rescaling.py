"""Fitting rescaling baselines (Zhang et al., 2020, Section 4 "Baseline rescaling"): the mean
score of random pairs of unrelated texts, bert-score's method, for any model, layer and centering.
Reading, writing and applying them is :mod:`moverkit._core.baseline`; fitting scores pairs with
the metric itself, so it lives above the metrics, not in the core."""

from __future__ import annotations

import random
from collections.abc import Sequence


def random_pairs(texts: Sequence[str], n_pairs: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n_pairs`` pairs of two different texts drawn at random from ``texts`` (bert-score's
    baselines pair sentences of a corpus at random, so they are unrelated)."""
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ValueError(f"the number of pairs must be an int >= 1, got {n_pairs!r}")
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
    ``centering``; ``"corpus"`` uses the statistic shipped for the model (the embedded model's),
    as the default of centered_bertscore does."""
    from moverkit._core.encoder import get_encoder
    from moverkit.functional import centered_bertscore

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
