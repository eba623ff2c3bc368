"""A lock per key (issue 68): threads of one key take turns, threads of another key do not wait
for them, and no lock outlives the threads that need it, however their blocks end."""

from __future__ import annotations

import threading

import pytest

from moverkit._core.base.key_locks import KeyLocks

WAIT = 60.0
"""Seconds a test waits for an event that must come at once: a guard against a hang, never a timing."""


def test_one_key_waits_another_does_not_and_no_lock_is_left():
    locks = KeyLocks()
    inside, release = threading.Event(), threading.Event()
    order = []

    def hold_a(name):
        with locks.hold("A"):
            order.append(name)
            if name == "first":
                inside.set()
                assert release.wait(WAIT)

    first = threading.Thread(target=hold_a, args=("first",))
    first.start()
    assert inside.wait(WAIT)
    second = threading.Thread(target=hold_a, args=("second",))
    second.start()
    with locks.hold("B"):  # another key: not held up by the first thread's block
        order.append("B")
    assert len(locks) == 1  # A's lock, held by the first thread and waited for by the second
    release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert order == ["first", "B", "second"] and len(locks) == 0


def test_a_block_that_raises_leaves_no_lock():
    locks = KeyLocks()
    with pytest.raises(RuntimeError, match="failed"), locks.hold("A"):
        raise RuntimeError("failed")
    assert len(locks) == 0
    with locks.hold("A"):  # free for the next thread
        pass
