"""Checking predictions and references, and the many-references bookkeeping every metric shares."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_texts(values, name: str) -> list[str]:
    """``values`` as a list of strings, or a ``ValueError``/``TypeError`` that names the argument."""
    if values is None:
        raise ValueError(f"{name} is None; pass a list of strings")
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(values).__name__}")
    for i, value in enumerate(values):
        if value is None:
            raise ValueError(f"{name}[{i}] is None; every item must be a string (use '' for an empty text)")
        if not isinstance(value, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(value).__name__}: {value!r}")
    return list(values)


def check_inputs(predictions, references) -> tuple[list[str], list[list[str]]]:
    """Validate the two inputs; references become one list of references per prediction.

    ``references`` is either one string per prediction or a list of strings per prediction
    (several references: each prediction is scored against each, the best kept).
    """
    predictions = check_texts(predictions, "predictions")
    if references is None:
        raise ValueError("references is None; pass one reference (or a list of references) per prediction")
    if isinstance(references, str) or not isinstance(references, Sequence):
        raise TypeError(f"references must be a list, got {type(references).__name__}")
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references differ in length: {len(predictions)} predictions, {len(references)} references"
        )
    grouped = []
    for i, ref in enumerate(references):
        if isinstance(ref, str):
            grouped.append([ref])
            continue
        if ref is None:
            raise ValueError(f"references[{i}] is None; give a string or a non-empty list of strings")
        if not isinstance(ref, Sequence):
            raise TypeError(f"references[{i}] must be a string or a list of strings, got {type(ref).__name__}")
        if len(ref) == 0:
            raise ValueError(f"references[{i}] is an empty list; give at least one reference per prediction")
        grouped.append(check_texts(ref, f"references[{i}]"))
    return predictions, grouped


def flatten_pairs(predictions: list[str], references: list[list[str]]):
    """One (prediction, reference) pair per reference; ``group[k]`` is the prediction of pair ``k``."""
    pair_predictions, pair_references, group = [], [], []
    for i, (prediction, refs) in enumerate(zip(predictions, references)):
        for ref in refs:
            pair_predictions.append(prediction)
            pair_references.append(ref)
            group.append(i)
    return pair_predictions, pair_references, torch.tensor(group, dtype=torch.long)


def best_per_group(values: torch.Tensor, group: torch.Tensor, n_groups: int, lower_is_better: bool = False):
    """Reduce per-pair ``values`` to one per prediction: the max (or the min for a distance),
    and the index of the pair that gave it."""
    values = values.detach().cpu().double()
    group = group.cpu()
    sign = -1.0 if lower_is_better else 1.0
    best = torch.full((n_groups,), float("-inf"), dtype=torch.float64)
    best.scatter_reduce_(0, group, sign * values, reduce="amax")
    is_best = (sign * values) == best[group]
    first = torch.full((n_groups,), len(values), dtype=torch.long)
    first.scatter_reduce_(0, group[is_best], torch.nonzero(is_best).flatten(), reduce="amin")
    return sign * best, first
