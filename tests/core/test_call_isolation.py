"""A metric call changes nothing outside itself (issue 52): the process's warnings filters and
transformers' log level are as they were after it, no model object gets a ``forward`` of its own,
an environment variable is read and checked when the call opens (a bad value fails before any
model loads), and the one tokenizing thread a call may start is gone when it ends, however it
ends."""

from __future__ import annotations

import threading
import warnings

import pytest
import transformers

import moverkit
from moverkit._core.call import streaming
from moverkit._core.encoding import encoder as encoder_module
from moverkit._core.encoding import models
from moverkit._core.encoding.models import loaded_models
from moverkit.functional import centered_bertscore, lazy_emd, moverscore, sbertscore, twmd

PREDICTIONS = [f"the cat number {i} sat on the mat near the door" for i in range(40)]
REFERENCES = [f"a cat, the {i}th, was on the mat by the door" for i in range(40)]
METRICS = {
    "centered_bertscore": centered_bertscore,
    "twmd": twmd,
    "moverscore": moverscore,
    "lazy_emd": lazy_emd,
    "sbertscore": sbertscore,
}


def _tokenizer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(streaming.TOKENIZER_THREAD)]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(METRICS))
def test_a_call_leaves_the_warnings_filters_the_log_level_and_the_models_as_they_were(name):
    """A call that truncates (its one warning) and loads its model on the way (after a first call:
    the packages a call imports add their own filters once, when imported)."""
    score = METRICS[name]
    options = {} if name == "sbertscore" else {"max_length": 5}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        score(PREDICTIONS[:2], REFERENCES[:2], **options)
    moverkit.release()
    transformers.logging.set_verbosity_warning()
    filters, level = list(warnings.filters), transformers.logging.get_verbosity()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        score(PREDICTIONS[:12], REFERENCES[:12], **options)
        assert warnings.filters == inside
    assert warnings.filters == filters and transformers.logging.get_verbosity() == level
    for key in loaded_models():
        model = models._MODELS[key].model
        modules = list(model) if key[0] == "sentence" else [model]
        transformer = getattr(modules[0], "auto_model", modules[0])
        assert "forward" not in vars(transformer), key


@pytest.mark.parametrize(
    "variable, value",
    [("MOVERKIT_TOKENIZE_AHEAD", "yes"), ("MOVERKIT_MEMORY_BUDGET", "lots"), ("MOVERKIT_PLAN", "gpu")],
)
def test_a_bad_environment_variable_fails_when_the_call_opens_before_any_model_loads(monkeypatch, variable, value):
    moverkit.release()
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"environment variable {variable}"):
        centered_bertscore(PREDICTIONS[:2], REFERENCES[:2])
    assert loaded_models() == []


def test_the_call_keeps_the_environment_it_opened_with(monkeypatch):
    """A variable changed while the call runs does not change that call: it was read at the
    opening (here the CUDA plan, changed from inside the first forward pass)."""
    from moverkit._core.base.hardware import cuda_plan

    seen = []
    real = encoder_module.encode_batches

    def planned(lengths, batch_size, device, limit, dtype="float32"):
        monkeypatch.setenv("MOVERKIT_PLAN", "cuda")
        seen.append(cuda_plan(device))
        return real(lengths, batch_size, device, limit, dtype)

    monkeypatch.delenv("MOVERKIT_PLAN", raising=False)
    monkeypatch.setattr(encoder_module, "encode_batches", planned)
    centered_bertscore(PREDICTIONS[:3], REFERENCES[:3])
    assert seen == [False]


@pytest.fixture
def chunked_and_ahead(monkeypatch):
    """Calls cut into chunks, each tokenized in a thread while the one before encodes."""
    monkeypatch.setenv("MOVERKIT_TOKENIZE_AHEAD", "1")
    moverkit.set_memory_budget("256KB")
    yield
    moverkit.set_memory_budget(None)


def test_the_tokenizing_thread_ends_with_a_call_that_raises_midway(chunked_and_ahead, monkeypatch):
    before = _tokenizer_threads()
    real = encoder_module.Encoder.forward
    calls = []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the device went away")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(encoder_module.Encoder, "forward", failing)
    with pytest.raises(RuntimeError, match="the device went away") as raised:
        centered_bertscore(PREDICTIONS, REFERENCES, centering="none")
    assert calls and raised.value is not None  # the traceback (and its frames) still held here
    assert _tokenizer_threads() == before


def test_the_tokenizing_thread_ends_with_a_dropped_generator(chunked_and_ahead):
    from moverkit._core.call import Opening, chunks, open_call

    before = _tokenizer_threads()
    call = open_call(Opening("centered_bertscore"), PREDICTIONS, REFERENCES)
    with call.running():
        parts = chunks(call)
        first = next(parts)
        first.pairs()
        assert len(_tokenizer_threads()) == len(before) + 1  # the next chunk is being tokenized
        del parts, first  # a caller that stops early
    assert _tokenizer_threads() == before


@pytest.mark.slow
def test_a_chunked_call_tokenizing_ahead_uses_one_thread_for_all_its_passes(chunked_and_ahead, monkeypatch):
    """batch centering's pass, the IDF pass and the chunks: one thread, started once."""
    started = []
    real = streaming.ThreadPoolExecutor
    monkeypatch.setattr(streaming, "ThreadPoolExecutor", lambda **kw: started.append(kw) or real(**kw))
    centered_bertscore(PREDICTIONS, REFERENCES, centering="batch", idf=True)
    assert len(started) == 1 and started[0]["max_workers"] == 1
    assert _tokenizer_threads() == []
