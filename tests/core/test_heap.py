"""glibc's heap (issue 45): the mmap threshold is fixed once per process, and left to the user
where ``MALLOC_MMAP_THRESHOLD_`` sets it. That a chunked call fixes it and an unchunked one does
not: tests/core/test_streaming.py."""

from __future__ import annotations

from moverkit._core.base import heap


class _FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append((parameter, value))
        return 1


def test_the_mmap_threshold_is_fixed_once_per_process_unless_the_user_set_it(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.setattr(heap, "_libc", lambda: libc)
    monkeypatch.setattr(heap, "_FIXED", False)  # a process that has not run a chunked call yet
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    heap.fix_mmap_threshold()
    heap.fix_mmap_threshold()
    assert libc.calls == [(heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD)]  # once per process
    # A threshold the user set for the process is theirs.
    monkeypatch.setattr(heap, "_FIXED", False)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    libc.calls.clear()
    heap.fix_mmap_threshold()
    assert libc.calls == []
