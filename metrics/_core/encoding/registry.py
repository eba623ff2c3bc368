"""The one model registry: every loaded model (token encoders and sentence encoders) of the process.

Loading a transformer takes seconds and hundreds of MB, so each metric asks the registry for its
model by a key (path, layer, device, ...) and gets the one already loaded. The registry is bounded
(least recently used out), so that a loop over many models or layers does not keep them all, and
:func:`forget_models` drops them all (``moverkit.release()``, :mod:`~moverkit._core.memory`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

Model = TypeVar("Model")

MAX_MODELS = 4
"""Models kept at most; the least recently used goes first."""

_MODELS: OrderedDict[Hashable, object] = OrderedDict()
_LOCK = threading.RLock()


def cached_model(key: Hashable, load: Callable[[], Model]) -> Model:
    """The model under ``key``, loaded by ``load()`` the first time (and again after it was evicted
    or released)."""
    with _LOCK:
        if key in _MODELS:
            _MODELS.move_to_end(key)
            return _MODELS[key]
        model = load()
        _MODELS[key] = model
        while len(_MODELS) > MAX_MODELS:
            _MODELS.popitem(last=False)
        return model


def loaded_models() -> list[Hashable]:
    """The keys of the models in memory, least recently used first."""
    with _LOCK:
        return list(_MODELS)


def forget_models() -> None:
    """Drop every loaded model (``moverkit.release()`` calls it, with the cache of token clouds)."""
    with _LOCK:
        _MODELS.clear()
