"""The one model registry: every loaded model (token encoders and sentence encoders) of the process.

Loading a transformer takes seconds and hundreds of MB, so each metric asks the registry for its
model by a key (path, layer, device, ...) and gets the one already loaded. It is bounded (least
recently used out), so that a loop over many models or layers does not keep them all, and
:func:`forget_models` drops them all (``moverkit.release()``, :mod:`~moverkit._core.encoding.memory`).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from moverkit._core.base.random_state import kept_random_state

Model = TypeVar("Model")

MAX_MODELS = 4
"""Models kept at most; the least recently used goes first."""

_MODELS: OrderedDict[Hashable, object] = OrderedDict()
_LOCK = threading.Lock()  # held only to read or change _MODELS and _LOADING, never during a load


@dataclass(eq=False)
class _Loading:
    """The lock of a key being loaded, held while it loads, and the threads that hold or wait for it."""

    lock: threading.Lock
    threads: int = 0


_LOADING: dict[Hashable, _Loading] = {}  # the keys loading now, or waited for; dropped when no thread needs them


class ArgumentsChecked(Exception):
    """Raised where a call made under :func:`arguments_only` would get its model: every argument
    it was given has been checked by then."""


_ARGUMENTS_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("moverkit_arguments_only", default=False)


@contextlib.contextmanager
def arguments_only() -> Iterator[None]:
    """Run the block (a metric call) up to the point where it would get its model, which raises
    :class:`ArgumentsChecked` instead: a door that starts something expensive (a server's
    replicas, a task's generation) checks a call's arguments by the function's own checks, in
    milliseconds and with no weights loaded. The block's context alone: another thread's calls
    meanwhile get their models."""
    token = _ARGUMENTS_ONLY.set(True)
    try:
        yield
    finally:
        _ARGUMENTS_ONLY.reset(token)


def cached_model(key: Hashable, load: Callable[[], Model]) -> Model:
    """The model under ``key``, loaded by ``load()`` the first time (and again after it was evicted
    or released), under :func:`~moverkit._core.base.random_state.kept_random_state`: a load leaves
    the process's random generators as it found them. A load holds the lock of its key alone: a
    thread that needs the same model waits for it (and gets it, not a second copy), and a thread
    that needs another model, loaded or not, does not wait for seconds of someone else's load. The
    lock is dropped when the last thread that held or waited for it is done (a loop over many
    models keeps no lock per model)."""
    if _ARGUMENTS_ONLY.get():
        raise ArgumentsChecked
    with _LOCK:
        model = _lookup(key)
        if model is not None:
            return model
        loading = _LOADING.setdefault(key, _Loading(threading.Lock()))
        loading.threads += 1
    try:
        with loading.lock:
            with _LOCK:
                model = _lookup(key)  # loaded by the thread this one waited for
            if model is not None:
                return model
            with kept_random_state():
                model = load()
            with _LOCK:
                _MODELS[key] = model
                while len(_MODELS) > MAX_MODELS:
                    _MODELS.popitem(last=False)
            return model
    finally:
        with _LOCK:
            loading.threads -= 1
            if not loading.threads:
                del _LOADING[key]


def _lookup(key: Hashable):
    """The model under ``key``, now the most recently used, or None; under ``_LOCK``."""
    if key not in _MODELS:
        return None
    _MODELS.move_to_end(key)
    return _MODELS[key]


def loaded_models() -> list[Hashable]:
    """The keys of the models in memory, least recently used first."""
    with _LOCK:
        return list(_MODELS)


def forget_models() -> None:
    """Drop every loaded model (``moverkit.release()`` calls it, with the cache of token clouds)."""
    with _LOCK:
        _MODELS.clear()
