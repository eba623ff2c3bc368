"""Deprecated: ``moverkit.functional.entry`` is :mod:`moverkit.functional.signature` (renamed for
what it holds: each metric function's one public signature); this alias goes in the next release."""

import warnings

from moverkit.functional.signature import INPUTS, SETTINGS, SHARED, TOKEN_ONLY, metric_function

warnings.warn(
    "moverkit.functional.entry is deprecated: import from moverkit.functional.signature",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["INPUTS", "SETTINGS", "SHARED", "TOKEN_ONLY", "metric_function"]
