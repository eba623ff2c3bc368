"""Checking predictions and references, and the many-references bookkeeping every metric shares."""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch

from moverkit.facts.ties import tie_width


def check_texts(values, name: str) -> list[str]:
    """``values`` as a list of strings, or a ``ValueError``/``TypeError`` that names the argument
    and the item. A string must be text: one holding a lone surrogate (``"\\ud800"``, what
    ``errors="surrogateescape"`` makes of undecodable bytes) is refused, since no tokenizer takes it."""
    if values is None:
        raise ValueError(f"{name} is None; pass a list of strings")
    values = from_numpy(values)
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(values).__name__}")
    for i, value in enumerate(values):
        if value is None:
            raise ValueError(f"{name}[{i}] is None; every item must be a string (use '' for an empty text)")
        if not isinstance(value, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(value).__name__}: {value!r}")
        if not value.isascii():
            _check_unicode(value, f"{name}[{i}]")
    return list(values)


def check_text(value, name: str) -> str:
    """One text, checked as :func:`check_texts` checks each item, or a ``ValueError``/``TypeError``
    that names it ``name`` (a column and a row, say). A missing value is refused in every form a
    table holds it (``None``, NaN, pandas' ``NA``), and so is anything but a string: a value is
    never made text with ``str()`` (``None`` is not the text "None", nor ``12345`` "12345")."""
    if is_missing(value):
        what = "NaN" if isinstance(value, numbers.Real) else type(value).__name__.removesuffix("Type")  # NA, NaT
        what = "None" if value is None else f"{what} (a missing value)"
        raise ValueError(f"{name} is {what}; it must be a string (use '' for an empty text)")
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}: {value!r}")
    if not value.isascii():
        _check_unicode(value, name)
    return value


def is_missing(value) -> bool:
    """Whether ``value`` is a missing value as Python or a table holds it: ``None``, a float NaN
    (numpy's too), pandas' ``NA`` or ``NaT``."""
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def from_numpy(values):
    """A numpy array of strings (as a Trainer or ``datasets`` gives) as nested lists of ``str``,
    as evaluate's bertscore accepts it; anything else unchanged."""
    if type(values).__module__ == "numpy" and hasattr(values, "tolist"):
        return values.tolist()
    return values


def _check_unicode(value: str, name: str) -> None:
    """A ``ValueError`` naming ``name`` if ``value`` is not valid Unicode text (a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{name} holds a lone surrogate {value[err.start]!r} at character {err.start}, which is not text "
            "(undecodable bytes read with errors='surrogateescape'?); decode the input as UTF-8, or remove it"
        ) from None


def check_inputs(predictions, references) -> tuple[list[str], list[list[str]]]:
    """Validate the two inputs; references become one list of references per prediction.

    ``references`` is either one string per prediction or a list of strings per prediction
    (several references: each prediction is scored against each, the best kept).
    """
    predictions = check_texts(predictions, "predictions")
    if references is None:
        raise ValueError("references is None; pass one reference (or a list of references) per prediction")
    references = from_numpy(references)
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


@dataclass(frozen=True)
class CallTexts:
    """The texts of one ``compute`` call, checked: every (prediction, reference) pair, and each
    distinct text once with how often it occurs (a prediction once, a reference once per pair)."""

    predictions: list[str]
    pair_predictions: list[str]
    pair_references: list[str]
    group: torch.Tensor  # group[k] = the prediction of pair k
    occurrences: Counter  # distinct text -> occurrences, in order of first appearance

    @cached_property
    def unique(self) -> list[str]:
        return list(self.occurrences)

    @cached_property
    def position(self) -> dict[str, int]:
        """Index of each distinct text in :attr:`unique`."""
        return {text: i for i, text in enumerate(self.occurrences)}

    def counts(self) -> torch.Tensor:
        """Occurrences of each text of :attr:`unique`, float64: its weight in a batch mean."""
        return torch.tensor(list(self.occurrences.values()), dtype=torch.float64)

    def chunk(self, start: int, end: int) -> CallTexts:
        """The texts of predictions ``start`` to ``end`` (and their pairs), as :func:`call_texts`
        gives them for those predictions alone, without checking them again."""
        first, last = torch.searchsorted(self.group, torch.tensor([start, end])).tolist()
        predictions = self.predictions[start:end]
        pair_references = self.pair_references[first:last]
        occurrences = Counter(predictions)
        occurrences.update(pair_references)
        group = self.group[first:last] - start
        return CallTexts(predictions, self.pair_predictions[first:last], pair_references, group, occurrences)

    def pair_indices(self, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The prediction and the reference of every pair, as indices into :attr:`unique`."""
        return tuple(
            torch.tensor([self.position[t] for t in side], dtype=torch.long, device=device)
            for side in (self.pair_predictions, self.pair_references)
        )


def call_texts(predictions, references) -> CallTexts:
    """:func:`check_inputs`, then :func:`flatten_pairs`, then each distinct text counted."""
    predictions, references = check_inputs(predictions, references)
    pair_predictions, pair_references, group = flatten_pairs(predictions, references)
    occurrences = Counter(predictions)
    occurrences.update(pair_references)
    return CallTexts(predictions, pair_predictions, pair_references, group, occurrences)


def best_per_group(values: torch.Tensor, group: torch.Tensor, n_groups: int, lower_is_better: bool = False):
    """Reduce per-pair ``values`` to one per prediction: the max (or the min for a distance),
    and the index of the pair kept: the first of the prediction's references whose value ties
    with the best (:func:`~moverkit.facts.ties.tied`: equal up to float32 noise), so that the same
    reference is kept on every CPU (two references equal in exact arithmetic differ in their last
    bits by the CPU's kernels)."""
    values = values.detach().cpu().double()
    group = group.cpu()
    sign = -1.0 if lower_is_better else 1.0
    best = torch.full((n_groups,), float("-inf"), dtype=torch.float64)
    best.scatter_reduce_(0, group, sign * values, reduce="amax")
    width = torch.where(best.isfinite(), tie_width(best), 0.0)  # an infinite best ties with itself only
    is_best = (sign * values) >= (best - width)[group]
    first = torch.full((n_groups,), len(values), dtype=torch.long)
    first.scatter_reduce_(0, group[is_best], torch.nonzero(is_best).flatten(), reduce="amin")
    return sign * best, first


def reference_index(pair: torch.Tensor, group: torch.Tensor) -> list[int]:
    """For the kept pair of each prediction (``pair``, the second value of :func:`best_per_group`),
    the position of its reference among that prediction's references: the pairs of a prediction
    are consecutive, in the order of its references (:func:`flatten_pairs`)."""
    pair, group = pair.cpu(), group.cpu()
    first = torch.full((len(pair),), len(group), dtype=torch.long)
    first.scatter_reduce_(0, group, torch.arange(len(group)), reduce="amin")
    return (pair - first).tolist()
