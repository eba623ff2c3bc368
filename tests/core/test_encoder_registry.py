"""The model registry's locks (issue 60): a load holds the lock of its own model only."""

from __future__ import annotations

import threading

import pytest

from moverkit._core.encoding import encoder as registry

WAIT = 60.0
"""Seconds a test waits for an event that must come at once: a guard against a hang, never a timing."""


@pytest.fixture
def empty_registry():
    registry.forget_models()
    yield
    registry.forget_models()


def _thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_slow_load_blocks_only_the_threads_that_need_its_model(empty_registry):
    """Thread 1 loads model A, blocked on an event; thread 2 looks up model B, already loaded,
    and returns while thread 1 is still blocked (the registry's one lock was held during every
    load, so thread 2 waited for A). Thread 3 needs A too: it gets thread 1's object, and A is
    loaded once."""
    model_b = registry.cached_model(("test", "B"), object)
    started, release = threading.Event(), threading.Event()
    loads = []

    def load_a():
        loads.append(1)
        started.set()
        assert release.wait(WAIT)
        return object()

    got = {}
    first = _thread(lambda: got.__setitem__(1, registry.cached_model(("test", "A"), load_a)))
    assert started.wait(WAIT)
    second = _thread(lambda: got.__setitem__(2, registry.cached_model(("test", "B"), object)))
    second.join(WAIT)
    assert not second.is_alive() and got[2] is model_b
    assert first.is_alive() and not release.is_set()  # thread 1 still blocked in its load
    third = _thread(lambda: got.__setitem__(3, registry.cached_model(("test", "A"), load_a)))
    release.set()
    first.join(WAIT)
    third.join(WAIT)
    assert not first.is_alive() and not third.is_alive()
    assert got[1] is got[3] and len(loads) == 1
    assert registry.loaded_models() == [("test", "B"), ("test", "A")]


def test_a_failed_load_leaves_the_key_free_for_the_next_thread(empty_registry):
    """A load that raises stores nothing: the next thread that needs the model loads it."""

    def fail():
        raise ValueError("no such model")

    with pytest.raises(ValueError, match="no such model"):
        registry.cached_model(("test", "C"), fail)
    model = registry.cached_model(("test", "C"), object)
    assert registry.cached_model(("test", "C"), fail) is model


def test_sentence_encoders_share_the_registry_and_its_locks(empty_registry, monkeypatch):
    """The sentence-model registry is the same :func:`cached_model`: a sentence model's slow load
    blocks no lookup of a loaded token model."""
    from moverkit._core.encoding import sentences

    started, release = threading.Event(), threading.Event()

    def slow_load(name, path, device):
        started.set()
        assert release.wait(WAIT)
        return object()

    monkeypatch.setattr(sentences, "_load_sentence_encoder", slow_load)
    token = registry.cached_model(("token", "loaded"), object)
    loading = _thread(lambda: sentences.get_sentence_encoder(None, "cpu"))
    assert started.wait(WAIT)
    looked_up = {}
    lookup = _thread(lambda: looked_up.setdefault("token", registry.cached_model(("token", "loaded"), object)))
    lookup.join(WAIT)
    assert looked_up["token"] is token and loading.is_alive()
    release.set()
    loading.join(WAIT)
    assert not loading.is_alive()
