"""Argument checks shared by every metric: one place, one exception type per kind of mistake.

A value of the wrong type raises ``TypeError``; a value of the right type outside the admissible
range raises ``ValueError``. Every message names the argument, says what is admissible and shows
what was given.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection


def boolean(name: str, value) -> bool:
    """``value`` if it is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def positive_int(name: str, value, minimum: int = 1, *, maximum: int | None = None, hint: str = "") -> int:
    """``value`` as an int >= ``minimum`` and, with ``maximum``, <= it (bools and floats are
    refused, ``2.0`` included); ``hint`` follows the range in the message (why the cap is there)."""
    what = f"an int >= {minimum}" + ("" if maximum is None else f" and <= {maximum:,}") + hint
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {what}, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def optional_positive_int(name: str, value, minimum: int = 1) -> int | None:
    """``None``, or :func:`positive_int`."""
    return None if value is None else positive_int(name, value, minimum)


def real(name: str, value, *, what: str) -> float:
    """``value`` as a float if it is a real number (not a bool); ``what`` says what is admissible."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {what}, got {value!r}")
    return float(value)


def finite_positive_float(
    name: str, value, *, minimum: float = 0.0, maximum: float = math.inf, hint: str = ""
) -> float:
    """``value`` as a float in (``minimum``, ``maximum``], finite."""
    what = f"a finite number > {minimum:g}" + (f" and <= {maximum:g}" if math.isfinite(maximum) else "") + hint
    value = real(name, value, what=what)
    if not math.isfinite(value) or value <= minimum or value > maximum:
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def nonnegative_float(name: str, value, *, allow_inf: bool = False, hint: str = "") -> float:
    """``value`` as a float >= 0 (``inf`` only with ``allow_inf``), never NaN."""
    what = "a number >= 0" + (' (float("inf") allowed)' if allow_inf else ", finite") + hint
    value = real(name, value, what=what)
    if math.isnan(value) or value < 0 or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def one_of(name: str, value, choices: Collection) -> object:
    """``value`` if it is one of ``choices`` (compared with ``==``, types checked: ``1`` is not ``True``)."""
    for choice in choices:
        if type(value) is type(choice) and value == choice:
            return value
    listed = ", ".join(repr(c) for c in choices)
    if not any(isinstance(value, type(c)) for c in choices):
        raise TypeError(f"{name} must be one of {listed}; got {value!r}")
    raise ValueError(f"{name} must be one of {listed}; got {value!r}")
