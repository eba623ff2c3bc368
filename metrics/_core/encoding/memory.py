"""Freeing what the package holds: ``moverkit.release()``, and the one list of what it empties.

Each process-wide store of models or vectors registers the function that empties it where the
store is defined, with :func:`emptied_by_release`: the model registry
(:func:`~moverkit._core.encoding.models.forget_models`), the cache of token clouds and sentence
vectors (:mod:`~moverkit._core.encoding.cache`), the corpus means fitted for models no statistic
ships for (:mod:`~moverkit._core.centering.fit`, a layer above this one, which this module
therefore does not import). :func:`release` empties them all.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from moverkit._core.base.heap import trim_heap

_EMPTIED: list[Callable[[], None]] = []
"""The functions :func:`release` calls, each emptying one store (:func:`emptied_by_release`)."""


def emptied_by_release(empty: Callable[[], None]) -> Callable[[], None]:
    """Register ``empty``, a function that empties one process-wide store, for :func:`release`
    to call (a decorator: ``empty`` is returned as it is)."""
    _EMPTIED.append(empty)
    return empty


def release() -> None:
    """Empty every store :func:`emptied_by_release` registered (every loaded model, token and
    sentence encoders; the cache of token clouds; the fitted corpus means), freeing their memory
    (GPU included) and handing the freed heap back to the operating system."""
    for empty in _EMPTIED:
        empty()
    trim_heap()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
