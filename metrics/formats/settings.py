"""Settings files: the arguments ``moverkit tune`` chose for one metric, saved as JSON, and what
every metric, the CLI and ``moverkit.compare`` do with one (``settings="tuned.json"``).

A file looks like this (``tuning`` is a free-form record of how the arguments were chosen: data,
grid, per-fold figures; it changes no score)::

    {"format": "moverkit-settings", "version": 1, "metric": "twmd",
     "arguments": {"num_layers": 4, "centering": "corpus", "variant": "twmd", "temperature": 0.05},
     "tuning": {...}}

A metric called with ``settings=PATH`` takes the file's ``arguments`` as if they were passed; an
argument the call gives as well, even at its default value, must have the same value (an error
otherwise: a silently overridden setting would be a misreported number). The result's hashcode ends
with ``|settings:<digest>``, the first 16 hex digits of the SHA-256 of the canonical JSON of the
metric and its arguments (:attr:`Settings.digest`), so a reported number names the file it came from.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from moverkit.formats.jsonfile import check_format, digest, read_file

FORMAT = "moverkit-settings"
VERSION = 1

UNSETTABLE = frozenset(
    {"predictions", "references", "settings", "batch_size", "device", "verbose", "return_alignment",
     "return_reference_index"}
)  # fmt: skip
"""Arguments a settings file may not set: the inputs, and what changes no score (where and how fast
the encoder runs, what the result shows besides the scores)."""


@dataclass(frozen=True)
class Settings:
    """One metric's arguments as a settings file holds them."""

    metric: str
    arguments: dict
    tuning: dict

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the canonical JSON of ``metric`` and ``arguments``: what changes scores."""
        return digest({"metric": self.metric, "arguments": self.arguments}, compact=False)

    def to_json(self) -> str:
        record = {"format": FORMAT, "version": VERSION, "metric": self.metric, "arguments": self.arguments}
        return json.dumps({**record, "tuning": self.tuning}, indent=2, sort_keys=False, allow_nan=False) + "\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write the file whole or not at all (:func:`moverkit.formats.lines.write_atomic`)."""
        from moverkit.formats.lines import write_atomic

        write_atomic(Path(path), self.to_json())


def settable_arguments(function) -> dict[str, object]:
    """The arguments of a metric's ``function`` (``moverkit.functional.<metric>``) a settings file
    may set, with their defaults. It takes the function, not its name, so that this module never
    imports the functions."""
    signature = inspect.signature(function)
    return {name: p.default for name, p in signature.parameters.items() if name not in UNSETTABLE}


def load_settings(path: str | os.PathLike | Settings, metric: str | None = None, function=None) -> Settings:
    """Read and check a settings file (or pass a :class:`Settings` through): a JSON object of this
    format and version, for ``metric`` when given, whose arguments have finite JSON values and,
    with the metric's ``function``, are its own settable ones (:data:`UNSETTABLE`; a metric called
    with ``settings=`` always checks them). Errors name the file and the field; the values
    themselves are checked by the metric, as any argument."""
    from moverkit.facts.specs import SPECS

    if isinstance(path, Settings):
        settings, where = path, "settings"
    else:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"settings must be the path of a settings file (moverkit tune --out), got {path!r}")
        where = f"settings file {path}"
        record = check_format(read_file(path, where), where, kind=FORMAT, version=VERSION)
        for key, kind in (("metric", str), ("arguments", dict), ("tuning", dict)):
            if not isinstance(record.get(key), kind):
                raise ValueError(f"{where}: {key!r} must be a JSON {kind.__name__.replace('dict', 'object')}")
        settings = Settings(record["metric"], record["arguments"], record["tuning"])
    if settings.metric not in SPECS:
        raise ValueError(f"{where}: metric {settings.metric!r} is none of {', '.join(sorted(SPECS))}")
    if metric is not None and settings.metric != metric:
        raise ValueError(f"{where} holds settings of {settings.metric}, not of {metric}")
    settable = None if function is None else settable_arguments(function)
    for name, value in settings.arguments.items():
        if settable is not None and name not in settable:
            raise ValueError(
                f"{where}: {name!r} is not a setting of {settings.metric} (settable: {', '.join(sorted(settable))})"
            )
        if not _plain(value):
            raise ValueError(f"{where}: argument {name!r} must be a JSON string, number, boolean, null or list")
    return settings


def score_with_settings(function, metric: str, settings, predictions, references, kwargs: dict) -> dict:
    """``function(predictions, references, **kwargs)`` (``moverkit.functional.<metric>``) under the
    settings file ``settings`` (see the module doc): the file's arguments join the call's, and its
    digest ends the hashcode. :func:`moverkit.functional.signature.metric_function` calls it for
    ``settings=PATH``."""
    tuned = load_settings(settings, metric, function)
    for name, value in tuned.arguments.items():
        # Given is given, the default value included (centering="corpus" against a file's
        # "none"): only an argument left out takes the file's value.
        if name in kwargs and not same_value(kwargs[name], value):
            raise ValueError(
                f"{name}={kwargs[name]!r} contradicts the settings file, which sets {name}={value!r}: "
                f"leave {name} out or drop settings"
            )
    result = function(predictions, references, **{**kwargs, **tuned.arguments})
    result["hashcode"] = f"{result['hashcode']}|settings:{tuned.digest[:16]}"
    return result


def same_value(a, b) -> bool:
    """Equal values, a bool equal only to the same bool (``1 == True`` in Python)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _plain(value) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, list) and all(_plain(v) for v in value)
