"""Sizes in bytes, given as numbers or as ``"512MB"``, and read from environment variables.

One parser for every byte budget the package takes (the memory budget of a call, the cache of
token clouds), so that an argument and its environment variable accept the same spellings and a
bad environment value is an error that names the variable.
"""

from __future__ import annotations

import os
import re

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*")


def parse_size(size, what: str = "memory budget", allow_zero: bool = False) -> int:
    """``size`` in bytes: an int, or a string such as ``"512MB"``, ``"2 GB"`` or ``"1.5G"``
    (binary units); > 0 (>= 0 with ``allow_zero``). Errors name ``what``."""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f"{what} must be a number of bytes or a string such as '1GB', got {size!r}")
    value = size
    if isinstance(size, str):
        match = _SIZE.fullmatch(size.upper())
        if match is None:
            raise ValueError(f"{what} must look like '512MB' or '2GB', got {size!r}")
        value = int(float(match.group(1)) * 1024 ** " KMGT".index(match.group(2) or " "))
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'>= 0' if allow_zero else 'positive'}, got {size!r}")
    return value


def size_from_env(variable: str, default: int, allow_zero: bool = False) -> int:
    """The size the environment variable ``variable`` gives (:func:`parse_size`), ``default`` when
    it is unset or empty; a bad value is a ``ValueError`` naming the variable."""
    value = os.environ.get(variable, "")
    if not value.strip():
        return default
    try:
        return parse_size(value, what=f"the environment variable {variable}", allow_zero=allow_zero)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{err} (unset it for the default)") from None
