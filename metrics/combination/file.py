"""A :class:`Combination` (:mod:`moverkit.combination`): its levels, the checks made when one is
made, its digest, and its JSON file (written whole; read as untrusted, every field checked)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from moverkit.combination.components import ANCHORS, _check_component
from moverkit.formats.jsonfile import check_format, digest, read_file

FORMAT = "moverkit-combination"
"""The ``format`` key of a combination file."""

VERSION = 2
"""The ``version`` key of a combination file; :func:`load` refuses any other. Version 2 (moverkit
0.x, issue 32): system-level weights are of z-scores within each test set, shrunk towards equal
weights; version 1's were NNLS weights of pooled-std-scaled scores and mean something else."""

STD_LIMITS = (1e-9, 1e9)
"""The range a file's ``std`` must lie in, and :data:`MAGNITUDE_LIMIT` bounds ``|mean|`` and the
weights: a fitted file lies far inside both (scores of order 1 to 100), and with them a combined
score stays finite for any finite component score below about 1e290; beyond,
:func:`~moverkit.combination.combined` refuses (never returns inf or NaN)."""

MAGNITUDE_LIMIT = 1e9
"""See :data:`STD_LIMITS`."""


@dataclass(frozen=True)
class SegmentLevel:
    """The segment-level fit: per component (in the combination's order), the training mean and
    std of its oriented scores and its weight: ``combined = sum_m w_m (o_m - mean_m) / std_m``."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class SystemLevel:
    """The system-level fit: per component, the pooled within-test-set std of its system scores
    (for one system alone, :func:`~moverkit.combination.system_score`) and its weight of z-scores
    within a test set (:func:`~moverkit.combination.system_scores`); the weights sum to 1."""

    std: tuple[float, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class Combination:
    """Components, the moverkit metrics' keyword arguments (``metric_kwargs``: name -> kwargs, as
    fitted), a :class:`SegmentLevel` and/or a :class:`SystemLevel` (``None`` where not fitted),
    and ``fitted_on`` (a JSON-able description of the training data, not part of the digest).
    Checked when made: known components without duplicates, lengths matching, finite numbers,
    ``std`` within :data:`STD_LIMITS`, ``|mean|`` and weights at most :data:`MAGNITUDE_LIMIT`,
    weights ``>= 0`` and not all 0."""

    components: tuple[str, ...]
    metric_kwargs: dict = field(default_factory=dict)
    segment: SegmentLevel | None = None
    system: SystemLevel | None = None
    fitted_on: dict = field(default_factory=dict)

    def __post_init__(self):
        components = self.components
        if isinstance(components, str) or not isinstance(components, (tuple, list)) or not components:
            raise ValueError(f"components: a non-empty list of names, got {components!r}")
        for name in components:
            _check_component(name)
        duplicates = sorted({n for n in components if components.count(n) > 1})
        if duplicates:
            raise ValueError(f"components: {', '.join(duplicates)} given twice")
        object.__setattr__(self, "components", tuple(components))
        if not isinstance(self.metric_kwargs, Mapping):
            raise ValueError("metric_kwargs: an object of metric name -> keyword arguments")
        for name, kwargs in self.metric_kwargs.items():
            if name not in components or name in ANCHORS:
                raise ValueError(f"metric_kwargs: {name!r} is not a moverkit metric among the components")
            if not isinstance(kwargs, Mapping):
                raise ValueError(f"metric_kwargs.{name}: an object of keyword arguments, got {kwargs!r}")
            try:
                json.dumps(dict(kwargs), allow_nan=False)
            except (TypeError, ValueError) as err:
                raise ValueError(f"metric_kwargs.{name}: not JSON-able ({err})") from None
        if self.segment is None and self.system is None:
            raise ValueError("segment, system: neither level is fitted")
        for level, fit in (("segment", self.segment), ("system", self.system)):
            if fit is None:
                continue
            for key in ("mean", "std", "weights") if level == "segment" else ("std", "weights"):
                values = getattr(fit, key)
                if len(values) != len(components):
                    raise ValueError(f"{level}.{key}: {len(values)} values for {len(components)} components")
                for name, v in zip(components, values):
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                        raise ValueError(f"{level}.{key} of {name}: not a finite number: {v!r}")
                    if key == "std" and not STD_LIMITS[0] <= v <= STD_LIMITS[1]:
                        raise ValueError(
                            f"{level}.std of {name}: {v} is outside [{STD_LIMITS[0]:g}, {STD_LIMITS[1]:g}] "
                            "(a fitted std lies far inside; beyond, a combined score could overflow)"
                        )
                    if key != "std" and abs(v) > MAGNITUDE_LIMIT:
                        raise ValueError(
                            f"{level}.{key} of {name}: {v} is beyond +-{MAGNITUDE_LIMIT:g} "
                            "(a fitted value lies far inside; beyond, a combined score could overflow)"
                        )
                    if key == "weights" and v < 0:
                        raise ValueError(f"{level}.weights of {name}: {v} is negative")
            if not any(w > 0 for w in fit.weights):
                raise ValueError(f"{level}.weights: all 0")

    def scored(self) -> dict:
        """Everything that changes a score, as a JSON-able object (what :attr:`digest` hashes)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "components": list(self.components),
            "metric_kwargs": {name: dict(kwargs) for name, kwargs in self.metric_kwargs.items()},
            "segment": None if self.segment is None else _level_dict(self.segment),
            "system": None if self.system is None else _level_dict(self.system),
        }

    @property
    def digest(self) -> str:
        """sha256 (hex) of :meth:`scored` as canonical JSON (sorted keys, no spaces, floats by
        their shortest exact repr): equal digests give equal scores; ``fitted_on`` is left out."""
        return digest(self.scored())

    def save(self, path: str | Path) -> None:
        """Write the JSON file (:meth:`scored`, ``fitted_on`` and ``digest``) whole or not at all."""
        from moverkit.formats.lines import write_atomic

        data = {**self.scored(), "fitted_on": self.fitted_on, "digest": self.digest}
        write_atomic(Path(path), json.dumps(data, indent=2, allow_nan=False) + "\n")


def _level_dict(level) -> dict:
    return {key: list(getattr(level, key)) for key in level.__dataclass_fields__}


def load(path: str | Path) -> Combination:
    """A :class:`Combination` from a file written by :meth:`Combination.save`. Every field is
    checked (as :class:`Combination` checks, plus: a JSON object of :data:`FORMAT` and
    :data:`VERSION`, no field missing or unknown, ``digest`` matching the numbers); an error is a
    ``ValueError`` naming the file and the field."""
    _check_path(path, "path")
    data = read_file(path, str(path))
    if isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") == 1:
        raise ValueError(
            f"{path}: version 1: written by an older moverkit, whose system-level weights meant something else "
            f"(version {VERSION}: z-scores within each test set, shrunk towards equal weights); "
            "fit it again with moverkit combine"
        )
    check_format(data, str(path), kind=FORMAT, version=VERSION)
    try:
        return _from_dict(data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _from_dict(data: dict) -> Combination:
    fields = {"format", "version", "components", "metric_kwargs", "segment", "system", "fitted_on", "digest"}
    missing, unknown = sorted(fields - set(data)), sorted(set(data) - fields)
    if missing or unknown:
        raise ValueError("; ".join([*(f"{k}: missing" for k in missing), *(f"{k}: unknown field" for k in unknown)]))
    levels = {}
    for level, keys, kind in (
        ("segment", ("mean", "std", "weights"), SegmentLevel),
        ("system", ("std", "weights"), SystemLevel),
    ):
        value = data[level]
        if value is None:
            levels[level] = None
            continue
        if not isinstance(value, dict) or sorted(value) != sorted(keys):
            raise ValueError(f"{level}: an object with exactly {', '.join(keys)} (or null)")
        for key in keys:
            if not isinstance(value[key], list):
                raise ValueError(f"{level}.{key}: a list of numbers")
        levels[level] = kind(*(tuple(value[key]) for key in keys))
    if not isinstance(data["components"], list):
        raise ValueError("components: a list of names")
    if not isinstance(data["fitted_on"], dict):
        raise ValueError("fitted_on: an object")
    combination = Combination(
        components=tuple(data["components"]),
        metric_kwargs=data["metric_kwargs"],
        segment=levels["segment"],
        system=levels["system"],
        fitted_on=data["fitted_on"],
    )
    if data["digest"] != combination.digest:
        raise ValueError("digest: does not match the numbers (the file was edited or damaged)")
    return combination


def _check_path(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name}: a combination file's path (str or Path), got {value!r}")
