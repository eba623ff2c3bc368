"""The data of a fine-tuning run (:mod:`moverkit.finetune`): human judgments read from a TSV or a
``datasets.Dataset``, checked, standardized into training targets, and split for validation."""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Sequence

import numpy as np

from moverkit._core import checks
from moverkit._core.base import warn_user
from moverkit.judgments import Judgments, read_judgments

STANDARDIZATIONS = ("group", "global", "none")

TARGET_RANGE = (-1.0, 1.0)
"""Where ``target_mean`` must lie: the range of Sim (Eq. 1; :func:`moverkit.functional.twmd.score_range`).
The targets ask Sim to be ``target_mean`` on average, so a mean outside asks for scores no
encoder can give (and one such as 1e308 swallows ``target_std * z``, leaving every target equal)."""


def load_judgments(data, prediction: str, reference: str, score: str, group: str | None) -> Judgments:
    """(group, prediction, reference, human score) rows from a TSV path or a ``datasets.Dataset``."""
    if isinstance(data, (str, os.PathLike)):
        if group is None:
            raise ValueError("a TSV needs a group column (group_column), e.g. the language pair")
        return read_judgments(data, group=group, prediction=prediction, reference=reference, human=score)
    import datasets

    if not isinstance(data, datasets.Dataset):
        raise TypeError(f"data must be a TSV path or a datasets.Dataset, got {type(data).__name__}")
    wanted = [c for c in (prediction, reference, score, group) if c is not None]
    missing = [c for c in dict.fromkeys(wanted) if c not in data.column_names]
    if missing:
        raise ValueError(
            f"the dataset lacks the column(s) {', '.join(map(repr, missing))}; it has {', '.join(data.column_names)}"
        )
    groups = [str(g) for g in data[group]] if group is not None else ["all"] * len(data)
    return Judgments(
        groups,
        [_dataset_text(value, row, prediction) for row, value in enumerate(data[prediction])],
        [_dataset_text(value, row, reference) for row, value in enumerate(data[reference])],
        [_dataset_score(value, row, score) for row, value in enumerate(data[score])],
    )


def _dataset_text(value, row: int, column: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"datasets.Dataset row {row}: column {column!r} is not a text: {value!r}")
    return value


def _dataset_score(value, row: int, column: str) -> float:
    """A human score of a dataset row: a real number, or a text that reads as one; finite."""
    where = f"datasets.Dataset row {row}: column {column!r}"
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{where} is not a number: {value!r}") from None
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
    else:
        raise ValueError(f"{where} is not a number: {value!r}")
    if not math.isfinite(number):
        raise ValueError(f"{where} is not a finite number: {value!r}")
    return number


def _without_empty(judged: Judgments, source: str = "the data") -> Judgments:
    """The rows whose prediction and reference both hold text; ``source`` names the data in errors."""
    if not judged.human:
        raise ValueError(
            f"{source} has no row of data (a header only?); fine-tuning needs at least 2 "
            "(prediction, reference, human score) rows"
        )
    keep = [i for i, (p, r) in enumerate(zip(judged.predictions, judged.references)) if p.strip() and r.strip()]
    if len(keep) < 2:
        raise ValueError(
            f"fine-tuning needs at least 2 pairs with non-empty texts; {source} has {len(keep)} "
            f"of its {len(judged.human)} rows"
        )
    if any(not math.isfinite(judged.human[i]) for i in keep):
        raise ValueError("every human score must be a finite number")
    return Judgments(*([column[i] for i in keep] for column in dataclasses.astuple(judged)))


def _target_mean(value) -> float:
    """``target_mean``, a finite number in :data:`TARGET_RANGE`."""
    low, high = TARGET_RANGE
    what = f"a finite number in [{low:g}, {high:g}] (the range of Sim, Eq. 1, which the targets ask it to average)"
    value = checks.real("target_mean", value, what=what)
    if not low <= value <= high:  # NaN fails too
        raise ValueError(f"target_mean must be {what}, got {value!r}")
    return value


def _with_spread(judged: Judgments, standardize: str) -> tuple[Judgments, list[str]]:
    """The rows whose human scores can teach, and the groups left out. Scores that are all equal
    are refused (no target to learn, and validation correlations would be NaN). With ``group``
    standardization a group whose scores are all equal has z = 0 throughout, nothing to learn
    within it: it is left out with a warning, and refused when no group is left."""
    values = np.asarray(judged.human, dtype=np.float64)
    if values.min() == values.max():
        raise ValueError(
            f"the human scores have no spread: all {len(values)} are {values[0]:g}; fine-tuning fits the "
            "metric to how they vary (and a correlation with constant scores is undefined)"
        )
    if standardize != "group":
        return judged, []
    by_group = judged.by_group()
    constant = sorted(g for g, rows in by_group.items() if values[rows].min() == values[rows].max())
    if len(constant) == len(by_group):
        shown = ", ".join(constant[:10]) + (f" and {len(constant) - 10} more" if len(constant) > 10 else "")
        raise ValueError(
            f"no group has human scores with spread (in each of {shown} they are all equal): "
            "standardize='group' compares scores within a group only; use standardize='global' if the "
            "scores are comparable across groups"
        )
    if not constant:
        return judged, []
    keep = [i for i, g in enumerate(judged.groups) if g not in set(constant)]
    warn_user(
        f"fine-tuning leaves out the group(s) {', '.join(constant)} ({len(judged.groups) - len(keep)} pairs): "
        "their human scores are all equal, so standardize='group' gives them nothing to learn"
    )
    return Judgments(*([column[i] for i in keep] for column in dataclasses.astuple(judged))), constant


def _check_validation(targets: np.ndarray, groups: Sequence[str]) -> None:
    """Refuse a validation split whose Pearson r (:func:`~moverkit.finetune.trainer.correlations`:
    the mean over its groups of at least 3 pairs, else over all pairs) is undefined whatever the
    scores: no such group, or the pairs, with targets that vary."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    sets = [rows for rows in by_group.values() if len(rows) >= 3] or [list(range(len(targets)))]
    if all(np.ptp(targets[rows]) == 0 for rows in sets):
        where = "in no group of 3 or more of them" if len(sets) > 1 or len(sets[0]) < len(targets) else "among them"
        raise ValueError(
            f"the {len(targets)} validation pairs have no human scores that vary {where}, so the validation "
            "Pearson r is undefined: change validation_split (0: no validation) or the seed"
        )


def standardized(scores: Sequence[float], groups: Sequence[str], how: str) -> np.ndarray:
    r""":math:`z = (s - \bar s) / \sigma_s` within each group (``group``), over all rows
    (``global``), or the scores as given (``none``); a constant group gets 0."""
    values = np.asarray(scores, dtype=np.float64)
    if how == "none":
        return values
    keys = np.asarray(groups) if how == "group" else np.zeros(len(values))
    z = np.zeros_like(values)
    for key in np.unique(keys):
        members = keys == key
        spread = values[members].std()
        z[members] = (values[members] - values[members].mean()) / spread if spread > 0 else 0.0
    return z


def split_rows(n: int, validation_split: float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded random split of ``range(n)`` into training and validation rows."""
    order = np.random.default_rng(seed).permutation(n)
    n_valid = int(round(validation_split * n))
    if n - n_valid < 1:
        raise ValueError(f"validation_split={validation_split} leaves no training pair of {n}")
    return sorted(order[n_valid:].tolist()), sorted(order[:n_valid].tolist())
