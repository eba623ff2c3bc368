"""The model registry's locks (issue 60): a load holds the lock of its own model only, and no lock
outlives its load; a load leaves the process's random generators as it found them (issue 66)."""

from __future__ import annotations

import random
import threading
import time
import warnings

import numpy as np
import pytest
import torch

from moverkit._core.encoding import models as registry

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


def test_no_lock_outlives_the_threads_that_need_it(empty_registry):
    """A key's lock is dropped once its load is done and no thread waits for it (a loop over many
    models kept one lock per model ever asked for): after a load that a second thread waited for,
    and after a failed load, no lock is left; the waiting thread still got the first one's model."""
    started, release = threading.Event(), threading.Event()

    def slow_load():
        started.set()
        assert release.wait(WAIT)
        return object()

    got = {}
    first = _thread(lambda: got.__setitem__(1, registry.cached_model(("test", "D"), slow_load)))
    assert started.wait(WAIT)
    second = _thread(lambda: got.__setitem__(2, registry.cached_model(("test", "D"), object)))
    deadline = time.monotonic() + WAIT
    while registry._LOADING._locks[("test", "D")].threads < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # until the second thread waits for the first one's load
    release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert got[1] is got[2] and not registry._LOADING

    def fail():
        raise ValueError("no such model")

    with pytest.raises(ValueError, match="no such model"):
        registry.cached_model(("test", "E"), fail)
    assert not registry._LOADING


def test_loads_of_two_models_from_several_threads_leave_no_lock(empty_registry):
    """Issue 68: eight threads ask for two models at once, four each, both loads held until every
    thread is in: each model is loaded once, every thread gets its model's one object, and once they
    are done no key keeps a lock (the old registry kept one per model ever asked for)."""
    arrived, release = threading.Barrier(9), threading.Event()
    loads = []

    def load(name):
        loads.append(name)
        assert release.wait(WAIT)
        return object()

    got = {}

    def want(i):
        name = "AB"[i % 2]
        arrived.wait(WAIT)
        got[i] = registry.cached_model(("test", name), lambda: load(name))

    threads = [_thread(lambda i=i: want(i)) for i in range(8)]
    arrived.wait(WAIT)
    deadline = time.monotonic() + WAIT
    while sum(entry.threads for entry in list(registry._LOADING._locks.values())) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)  # until every thread loads or waits for its model's load
    assert len(registry._LOADING) == 2
    release.set()
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(loads) == ["A", "B"]
    assert len({id(got[i]) for i in range(0, 8, 2)}) == len({id(got[i]) for i in range(1, 8, 2)}) == 1
    assert got[0] is not got[1]
    assert not registry._LOADING


def _draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def _seed() -> None:
    random.seed(66)
    np.random.seed(66)
    torch.manual_seed(66)


@pytest.fixture(scope="module")
def pooler_less_path(tiny_model_path, tmp_path_factory):
    """The tiny BERT saved without its pooler: transformers draws the missing weights from torch's
    generator when it loads the folder as a ``BertModel``."""
    import shutil

    from transformers import AutoConfig, BertModel

    folder = tmp_path_factory.mktemp("pooler-less")
    shutil.copytree(tiny_model_path, folder, dirs_exist_ok=True)
    torch.manual_seed(0)
    BertModel(AutoConfig.from_pretrained(tiny_model_path), add_pooling_layer=False).save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("kind", ["token", "sentence", "fine-tuning"])
def test_a_load_leaves_the_random_generators_as_it_found_them(pooler_less_path, kind):
    """After a load (forced by ``moverkit.release()``) Python's ``random``, numpy's global generator
    and torch's draw the numbers they draw without it: a token model whose folder lacks weights
    (transformers draws them from torch's generator), the embedded sentence-transformers model
    (sentence-transformers draws from Python's), and ``load_encoder(trainable=True)``, which
    moverkit.finetune calls directly, outside the registry."""
    import moverkit
    from moverkit._core.encoding.sentences import get_sentence_encoder

    load = {
        "token": lambda: registry.get_encoder(pooler_less_path),
        "sentence": lambda: get_sentence_encoder(None, "cpu"),
        "fine-tuning": lambda: registry.load_encoder(pooler_less_path, trainable=True),
    }[kind]
    _seed()
    expected = _draws()
    moverkit.release()
    _seed()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' report of the weights it draws
        load()
    assert _draws() == expected


def test_kept_random_state_restores_the_generators_when_the_block_raises():
    """The generators are put back whether the block ends or raises."""
    from moverkit._core.base import kept_random_state

    _seed()
    expected = _draws()
    _seed()
    with pytest.raises(RuntimeError, match="load failed"), kept_random_state():
        _draws()
        raise RuntimeError("load failed")
    assert _draws() == expected


def test_arguments_only_stops_its_own_context_at_the_model_and_no_other(empty_registry):
    """A door checks a call's arguments by running it under ``arguments_only`` (no weights
    loaded): the block's own context stops where it would get a model; a thread scoring meanwhile
    gets its model (a process-wide switch of the loader would have stopped it too)."""
    from moverkit._core.encoding.models import ArgumentsChecked, arguments_only

    other = {}
    with arguments_only():
        with pytest.raises(ArgumentsChecked):
            registry.cached_model(("test", "F"), object)
        thread = _thread(lambda: other.setdefault("model", registry.cached_model(("test", "F"), object)))
        thread.join()
    assert other["model"] is registry.cached_model(("test", "F"), object)
