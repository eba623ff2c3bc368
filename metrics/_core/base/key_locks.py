"""A lock per key, alive only while a thread needs it.

Loading a model and fitting a corpus mean take seconds to minutes: a thread doing one for a key
(a model, an encoder's statistic) makes the threads that want the same key wait and take its
result, and no thread that wants another key. One lock per key ever asked for would outlive its
work (a loop over many models kept one per model); :class:`KeyLocks` drops a key's lock when the
last thread that held or waited for it is done. The model registry
(:func:`~moverkit._core.encoding.models.cached_model`) and the corpus means fitted for models no
statistic ships for (:func:`~moverkit._core.centering.fit.default_corpus_stats`) hold theirs here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable, Iterator
from dataclasses import dataclass


@dataclass(eq=False)
class _KeyLock:
    """The lock of one key, and the threads that hold or wait for it."""

    lock: threading.Lock
    threads: int = 0


class KeyLocks:
    """Locks by key: :meth:`hold` holds the lock of one key; ``len()`` is the number of keys whose
    lock a thread holds or waits for (none once every thread is done)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()  # held only to read or change _locks, never during a key's work
        self._locks: dict[Hashable, _KeyLock] = {}

    @contextlib.contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        """Run the block holding the lock of ``key`` (waiting for a thread that holds it); the lock
        is dropped when no thread holds or waits for it, however the block ends."""
        with self._guard:
            entry = self._locks.setdefault(key, _KeyLock(threading.Lock()))
            entry.threads += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.threads -= 1
                if not entry.threads:
                    del self._locks[key]

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)
