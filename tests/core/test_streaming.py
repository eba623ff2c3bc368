"""Streaming: a call over the memory budget runs in chunks and gives the unchunked scores; the
budget itself, and tokenizing a chunk while the one before encodes."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch

import moverkit
from moverkit import MoverkitWarning
from moverkit._core.call import streaming
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.tokens import CallTokenizer
from moverkit.functional import centered_bertscore, lazy_emd, moverscore, twmd


@pytest.fixture
def tiny_budget():
    """A budget of a few hundred tokens: the 40 pairs below run in several chunks."""
    yield lambda: moverkit.set_memory_budget("1MB")
    moverkit.set_memory_budget(None)


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    """40 pairs with repeats (a text in several pairs and chunks) and two references for some."""
    predictions, references = wmt_pairs
    predictions = list(predictions[:36]) + [predictions[0], references[1], "", predictions[2]]
    references = list(references[:36]) + [references[5], predictions[1], references[3], [references[2], ""]]
    references = [[r, references[0]] if i % 7 == 3 else r for i, r in enumerate(references)]
    return predictions, references


def chunk_count(predictions, references, **kwargs):
    from moverkit._core import call_texts, get_encoder

    encoder = get_encoder()
    per_token = 4 * encoder.model.config.hidden_size * streaming.VECTOR_COPIES
    texts = call_texts(predictions, references)
    tokenizer = CallTokenizer.of(encoder)
    return len(streaming.plan_chunks(texts, streaming.memory_budget() // per_token, tokenizer).ranges)


# The quick loop keeps batch centering (the one whose chunks share a call mean); the rest are slow.
QUICK = pytest.mark.parametrize(
    "centering", ["batch", *(pytest.param(c, marks=pytest.mark.slow) for c in ("none", "dim", "sentence", "corpus"))]
)


@QUICK
@pytest.mark.parametrize("metric", [centered_bertscore, pytest.param(twmd, marks=pytest.mark.slow)])
def test_chunked_equals_unchunked(pairs, tiny_budget, metric, centering):
    predictions, references = pairs
    kwargs = {"centering": centering}
    if centering == "corpus":
        kwargs["centering_stats"] = moverkit.fit_centering(predictions[:10])
    whole = metric(predictions, references, **kwargs)
    tiny_budget()
    assert chunk_count(predictions, references) >= 4
    chunked = metric(predictions, references, **kwargs)
    assert chunked.keys() == whole.keys()
    assert chunked["hashcode"] == whole["hashcode"]
    for key, values in whole.items():
        if isinstance(values, list):
            assert chunked[key] == pytest.approx(values, abs=1e-6), key


@pytest.mark.slow
def test_chunked_idf_and_lazy_emd(pairs, tiny_budget):
    """idf=True is fitted on every reference of the call, not per chunk; lazy_emd streams too."""
    predictions, references = pairs
    whole = centered_bertscore(predictions, references, idf=True)
    whole_emd = lazy_emd(predictions, references, centering="batch")
    tiny_budget()
    assert centered_bertscore(predictions, references, idf=True)["f1"] == pytest.approx(whole["f1"], abs=1e-6)
    assert lazy_emd(predictions, references, centering="batch")["lazy_emd"] == pytest.approx(
        whole_emd["lazy_emd"], abs=1e-6
    )


@pytest.mark.parametrize(
    ("version", "centering"),
    [
        ("v2", "batch"),
        pytest.param("v2", "none", marks=pytest.mark.slow),
        pytest.param("v1", "none", marks=pytest.mark.slow),
    ],
)
def test_moverscore_streams_with_its_idf_on_both_sides_of_the_whole_call(pairs, tiny_budget, version, centering):
    """moverscore is on the streaming path: IDF on the references and on the predictions (v2 and
    v1 weigh both) fitted on the whole call, batch centering the whole call's mean; chunked scores
    are the unchunked ones."""
    predictions, references = pairs
    whole = moverscore(predictions, references, version=version, centering=centering)
    tiny_budget()
    assert chunk_count(predictions, references) >= 4
    chunked = moverscore(predictions, references, version=version, centering=centering)
    assert chunked["hashcode"] == whole["hashcode"]
    assert chunked["moverscore"] == pytest.approx(whole["moverscore"], abs=1e-6)


@pytest.mark.slow
def test_moverscore_v1_with_batch_centering_is_one_chunk(pairs, tiny_budget, monkeypatch):
    """v1 averages power means of five layers, each centered on the call's mean: what a chunk
    cannot take from the whole call, so that call is never cut (scores as unchunked)."""
    predictions, references = pairs[0][:12], pairs[1][:12]
    whole = moverscore(predictions, references, version="v1", centering="batch")
    tiny_budget()
    monkeypatch.setattr(streaming, "memory_budget", lambda device=None: 1)  # every prediction its own chunk
    assert moverscore(predictions, references, version="v1", centering="batch")["moverscore"] == whole["moverscore"]


@pytest.mark.slow
def test_chunked_batch_mean_is_the_whole_calls(pairs, tiny_budget):
    """Independent check of the first pass: the mean of every text's non-special token vectors,
    each text counted as often as it occurs, as centering.row_mean computes it over the whole call."""
    from moverkit._core import call_texts, encode_texts, get_encoder, row_mean

    predictions, references = pairs
    texts = call_texts(predictions, references)
    encoder = get_encoder()
    clouds = encode_texts(encoder, texts.unique, EncoderRequest())
    expected, n = row_mean(clouds.vectors, offsets=clouds.offsets, scored=~clouds.special, counts=texts.counts())
    tiny_budget()
    tokenizer = CallTokenizer.of(encoder)
    with streaming.TokenizingThread(tokenizer, enabled=False) as ahead:
        stats = streaming.batch_mean(encoder, texts, tokenizer, EncoderRequest(), 200, ahead)
    assert stats.n_tokens == n
    assert stats.mean == pytest.approx(expected.numpy(), abs=1e-6)  # texts batch differently: float32 noise


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("MOVERKIT_MEMORY_BUDGET", "64MB")
    assert streaming.memory_budget() == 64 * 2**20
    monkeypatch.delenv("MOVERKIT_MEMORY_BUDGET")
    assert streaming.memory_budget() == host_default()


def host_default() -> int:
    """The CPU budget with nothing set: a share of the memory the host has available, at least
    the fixed default."""
    available = streaming.available_host_memory() or 0
    return max(int(streaming.HOST_MEMORY_SHARE * available), streaming.DEFAULT_MEMORY_BUDGET)


def test_the_cpu_budget_is_a_share_of_the_memory_the_host_has(monkeypatch):
    """Issue 51, defect 8: a fixed 512 MB cut 2,800 WMT17 pairs into chunks on a 24 GiB machine,
    so ``batch`` centering encoded every text twice. With nothing set, a CPU call may take
    :data:`HOST_MEMORY_SHARE` of what the host has available, never less than the old default."""
    monkeypatch.delenv("MOVERKIT_MEMORY_BUDGET", raising=False)
    monkeypatch.setattr(streaming, "available_host_memory", lambda: 24 * 2**30)
    assert streaming.memory_budget() == 6 * 2**30
    monkeypatch.setattr(streaming, "available_host_memory", lambda: 2**30)  # a small machine: the floor
    assert streaming.memory_budget() == streaming.DEFAULT_MEMORY_BUDGET
    monkeypatch.setattr(streaming, "available_host_memory", lambda: None)  # unknown: the floor
    assert streaming.memory_budget() == streaming.DEFAULT_MEMORY_BUDGET


def test_available_host_memory_reads_the_host():
    available = streaming.available_host_memory()
    assert available is None or available > 0


def test_on_a_cuda_device_the_budget_is_a_share_of_its_free_memory(monkeypatch):
    """The device's free memory (faked here: torch.cuda.mem_get_info of a lent H200's 139 GB), unless
    the user set a budget; a CPU keeps the host default."""
    cuda, free = torch.device("cuda", 0), 139 * 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free, 141 * 2**30))
    monkeypatch.delenv("MOVERKIT_MEMORY_BUDGET", raising=False)
    assert streaming.memory_budget(cuda) == int(streaming.CUDA_MEMORY_SHARE * free)
    assert streaming.memory_budget(torch.device("cpu")) == host_default()
    monkeypatch.setenv("MOVERKIT_MEMORY_BUDGET", "64MB")
    assert streaming.memory_budget(cuda) == 64 * 2**20
    monkeypatch.delenv("MOVERKIT_MEMORY_BUDGET")
    moverkit.set_memory_budget("1GB")
    try:
        assert streaming.memory_budget(cuda) == 2**30
    finally:
        moverkit.set_memory_budget(None)


@pytest.mark.slow
def test_a_chunked_call_warns_of_a_small_batch_as_an_unchunked_one(tiny_budget):
    predictions = ["word " * 300 + str(i) for i in range(3)]  # 3 long texts: a chunk each under 1MB
    references = ["text " * 300 + str(i) for i in range(3)]
    with pytest.warns(MoverkitWarning, match="over only 6 distinct texts") as whole:
        twmd(predictions, references, max_length=512, centering="batch")
    tiny_budget()
    assert chunk_count(predictions, references) >= 2
    with pytest.warns(MoverkitWarning, match="over only 6 distinct texts") as chunked:
        twmd(predictions, references, max_length=512, centering="batch")
    assert [str(w.message) for w in chunked] == [str(w.message) for w in whole]


def test_verbose_shows_one_bar_over_pairs(pairs, tiny_budget, capsys):
    predictions, references = pairs
    tiny_budget()
    twmd(predictions[:12], references[:12], centering="none", verbose=True)
    err = capsys.readouterr().err
    n_pairs = sum(1 if isinstance(r, str) else len(r) for r in references[:12])  # a bar over pairs, not predictions
    assert n_pairs > 12 and f"{n_pairs}/{n_pairs} [" in err and "pair/s" in err and "encoding" not in err


@pytest.mark.slow
def test_a_chunked_call_fixes_glibcs_mmap_threshold_and_an_unchunked_one_does_not(pairs, tiny_budget, monkeypatch):
    # glibc raises its mmap threshold to every large block freed (up to 32 MB), so a chunked call's
    # encoder activations came from the heap, whose holes grew with the chunks: peak RSS 887-996 MB
    # for 3,000 pairs at a 64 MB budget, 773 MB with the threshold fixed (docs/scale.md). Fixed once
    # per process, unless the user set it: tests/core/test_heap.py.
    fixed = []
    monkeypatch.setattr(streaming, "fix_mmap_threshold", lambda: fixed.append(True))
    predictions, references = pairs
    centered_bertscore(predictions[:4], references[:4], centering="none")
    assert fixed == []
    tiny_budget()
    assert chunk_count(predictions, references) > 1
    centered_bertscore(predictions, references, centering="none")
    assert fixed == [True]


def _watched(monkeypatch, record):
    """``CallTokenizer.encodings`` (every tokenization of a call) watched: ``record(tokenizer,
    texts)`` is called first."""
    real = CallTokenizer.encodings
    monkeypatch.setattr(CallTokenizer, "encodings", lambda self, texts: record(self, texts) or real(self, texts))


def test_real_token_counts_plan_one_chunk_where_the_estimate_cuts(wmt_pairs):
    """Issue 45: the estimate (3 characters a token) runs high, so a call it cuts is planned again
    from the texts' real token counts; a call those counts plan as one chunk keeps the tokens
    counted, the ones the chunk would make."""
    from moverkit._core import call_texts, get_encoder

    encoder = get_encoder()
    texts = call_texts(*wmt_pairs)
    tokenizer = CallTokenizer.of(encoder)
    tokens = tokenizer.tokenize(texts.unique)
    real = sum(map(len, tokens.ids))
    assert tokenizer.count(texts.unique) == [len(row) for row in tokens.ids]
    estimated = sum(streaming.estimated_tokens(t, 512) for t in texts.unique)
    assert real < estimated
    budget = (real + estimated) // 2  # the estimate cuts the call, its real counts fit
    assert len(streaming.plan_chunks(texts, budget).ranges) > 1
    plan = streaming.plan_chunks(texts, budget, tokenizer)
    assert plan.ranges == [(0, len(texts.predictions))]
    assert plan.tokens.ids == tokens.ids and plan.tokens.special == tokens.special
    small = real // 4  # cut either way: by the counts into no more chunks than by the estimate
    cut = streaming.plan_chunks(texts, small, tokenizer)
    assert cut.tokens is None
    assert 1 < len(cut.ranges) <= len(streaming.plan_chunks(texts, small).ranges)


def test_counted_tokens_are_kept_only_while_they_fit(monkeypatch):
    """The plan keeps the tokens of texts whose counts total at most the budget, across its
    slices, and drops them (counts only) once the total passes it."""
    from moverkit._core import call_texts, get_encoder

    monkeypatch.setattr(streaming, "COUNT_SLICE", 3)
    monkeypatch.setattr(streaming, "CHARS_PER_TOKEN", 0.1)  # the estimate never fits: counted
    tokenizer = CallTokenizer.of(get_encoder())
    texts = call_texts([f"text number {i} of the call" for i in range(10)], ["a reference"] * 10)
    total = sum(tokenizer.count(texts.unique))
    kept = streaming.plan_chunks(texts, total, tokenizer)
    assert kept.tokens.ids == tokenizer.tokenize(texts.unique).ids and len(kept.ranges) == 1
    assert streaming.plan_chunks(texts, total - 1, tokenizer).tokens is None


@pytest.mark.slow
def test_a_call_counted_as_one_chunk_tokenizes_once(wmt_pairs, monkeypatch):
    """The tokens the plan counted are the ones the chunk encodes: one tokenization of the call's
    texts, and the scores of a call that tokenized twice."""
    from moverkit._core import call_texts, get_encoder

    predictions, references = (list(x[:60]) for x in wmt_pairs)
    whole = centered_bertscore(predictions, references, centering="batch")
    encoder = get_encoder()
    texts = call_texts(predictions, references)
    per_token = 4 * encoder.model.config.hidden_size * streaming.VECTOR_COPIES
    real = sum(CallTokenizer.of(encoder).count(texts.unique))
    estimated = sum(streaming.estimated_tokens(t, 512) for t in texts.unique)
    calls = []
    _watched(monkeypatch, lambda tokenizer, t: calls.append(len(t)))
    moverkit.set_memory_budget(per_token * (real + estimated) // 2)
    try:
        counted = centered_bertscore(predictions, references, centering="batch")
    finally:
        moverkit.set_memory_budget(None)
    assert calls == [len(texts.unique)]
    assert counted["f1"] == whole["f1"]


@pytest.mark.slow
def test_chunks_are_tokenized_while_the_one_before_encodes(pairs, tiny_budget, monkeypatch):
    """Issue 45, item 7: past the budget, the next chunk's texts are tokenized in a thread while
    the current chunk's forward passes run. The first chunk's first forward waits (up to 60 s) for
    a second tokenization to start in another thread, the second chunk's (the first is its own):
    were the tokenization not ahead, it would never start during that forward, and the test would
    fail on the wait, not pass slowly."""
    import threading

    from moverkit._core import get_encoder

    predictions, references = pairs
    whole = centered_bertscore(predictions, references, centering="none")  # no batch mean's pass
    tiny_budget()
    assert chunk_count(predictions, references) >= 4
    started, in_thread = threading.Event(), []

    def watched(tokenizer, texts):
        if threading.current_thread() is not threading.main_thread():
            in_thread.append(len(texts))
            if len(in_thread) == 2:
                started.set()

    encoder = get_encoder()
    forward = type(encoder).forward
    waits = []

    def waiting(self, *args, **kwargs):
        if not waits:  # the first chunk's first forward
            waits.append(started.wait(timeout=60))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(streaming, "tokenizes_ahead", lambda device: True)  # as on an accelerator
    _watched(monkeypatch, watched)
    monkeypatch.setattr(type(encoder), "forward", waiting)
    chunked = centered_bertscore(predictions, references, centering="none")
    assert waits == [True]
    assert len(in_thread) == chunk_count(predictions, references)  # each chunk tokenized once, ahead
    assert chunked["f1"] == pytest.approx(whole["f1"], abs=1e-6)


@pytest.mark.slow
def test_on_a_cpu_chunks_are_tokenized_in_turn(pairs, tiny_budget, monkeypatch):
    """Where no thread tokenizes ahead (a CPU, by default: its cores run the forward), each chunk is
    tokenized on the calling thread when it is handed over, the same scores."""
    import threading

    predictions, references = pairs
    whole = centered_bertscore(predictions, references, centering="none")
    tiny_budget()
    n_chunks = chunk_count(predictions, references)
    threads = []
    monkeypatch.delenv("MOVERKIT_TOKENIZE_AHEAD", raising=False)  # the CPU's default
    _watched(monkeypatch, lambda tokenizer, texts: threads.append(threading.current_thread()))
    chunked = centered_bertscore(predictions, references, centering="none")
    assert len(threads) == 1 + n_chunks  # the plan's count, then each chunk
    assert set(threads) == {threading.main_thread()}
    assert chunked["f1"] == pytest.approx(whole["f1"], abs=1e-6)


@contextlib.contextmanager
def truncation_warned(long_texts: str, seen: list | None = None):
    """The truncation warnings of a call at max_length=16, one (none for windows), its message
    appended to ``seen``: a chunked call warns once with its whole count, as an unchunked one."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    messages = [str(w.message) for w in caught if "were truncated" in str(w.message)]
    assert len(messages) == (0 if long_texts == "window" else 1), messages
    assert all(issubclass(w.category, MoverkitWarning) for w in caught if "were truncated" in str(w.message))
    if seen is not None:
        seen.extend(messages)


@pytest.mark.slow
@pytest.mark.parametrize("ahead", [True, False], ids=["tokenized-ahead", "tokenized-in-turn"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"long_texts": "window", "max_length": 16, "centering": "batch", "idf": True},
        {"long_texts": "truncate", "max_length": 16, "centering": "batch", "idf": True},
    ],
    ids=["windows", "truncated"],
)
def test_chunked_long_texts_and_idf_equal_unchunked(pairs, tiny_budget, monkeypatch, ahead, kwargs):
    """Texts past a token limit of 16, scored whole in windows or truncated (and warned of), and
    IDF of the whole call: tokenized ahead (whole for windows, at the limit for truncation) or in
    turn, a chunked call gives the unchunked scores."""
    monkeypatch.setattr(streaming, "tokenizes_ahead", lambda device: ahead)
    predictions, references = pairs
    whole_warned, chunked_warned = [], []
    with truncation_warned(kwargs["long_texts"], whole_warned):
        whole = centered_bertscore(predictions, references, **kwargs)
    tiny_budget()
    assert chunk_count(predictions, references) >= 4
    with truncation_warned(kwargs["long_texts"], chunked_warned):
        chunked = centered_bertscore(predictions, references, **kwargs)
    assert chunked_warned == whole_warned  # "N of M texts": the whole call's count
    assert chunked["hashcode"] == whole["hashcode"]
    assert chunked["f1"] == pytest.approx(whole["f1"], abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("long_texts", ["window", "truncate"])
def test_a_call_counted_as_one_chunk_encodes_its_long_texts_as_one_call(wmt_pairs, monkeypatch, long_texts):
    """The counted encodings are made at the chunk's limit: whole for windows, cut at 16 tokens for
    truncation (a count made at another limit would give other ids, and other scores)."""
    from moverkit._core import call_texts, get_encoder

    predictions, references = (list(x[:40]) for x in wmt_pairs)
    kwargs = {"long_texts": long_texts, "max_length": 16, "centering": "batch"}
    with truncation_warned(long_texts):
        whole = centered_bertscore(predictions, references, **kwargs)
    encoder = get_encoder()
    texts = call_texts(predictions, references)
    limit = None if long_texts == "window" else 16
    real = sum(CallTokenizer.of(encoder, 16, long_texts).count(texts.unique))
    estimated = sum(streaming.estimated_tokens(t, limit) for t in texts.unique)
    assert real < estimated
    budget = (real + estimated) // 2
    # The characters' bound does not fit, so the planner counts (and the count fits).
    assert sum(map(len, texts.unique)) / streaming.CHARS_PER_TOKEN + 3 * len(texts.unique) > budget
    per_token = 4 * encoder.model.config.hidden_size * streaming.VECTOR_COPIES
    calls = []
    _watched(monkeypatch, lambda tokenizer, t: calls.append(tokenizer.truncating))
    moverkit.set_memory_budget(per_token * budget)
    try:
        with truncation_warned(long_texts):
            counted = centered_bertscore(predictions, references, **kwargs)
    finally:
        moverkit.set_memory_budget(None)
    assert calls == [limit]  # one tokenization, the count's, at the chunk's limit
    assert counted["f1"] == whole["f1"]


@pytest.mark.slow
@pytest.mark.parametrize("ahead", [True, False], ids=["tokenized-ahead", "tokenized-in-turn"])
def test_a_tokenizer_without_a_rust_backend_streams_as_before(pairs, tiny_budget, monkeypatch, ahead):
    """Where no Rust tokenizer is there (a Python BERT tokenizer of the same vocabulary, the same
    ids on these texts), each chunk's texts are tokenized by :func:`python_encode`, ahead or in
    turn: the unchunked scores, and one truncation warning for the whole call, with the whole
    call's count (issue 51, defect 3: one warning per chunk, 60 for one call)."""
    import os

    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    from moverkit._core.encoding import get_encoder

    predictions, references = pairs
    kwargs = {"centering": "batch", "max_length": 16}
    seen = []
    with truncation_warned("truncate", seen):
        whole = centered_bertscore(predictions, references, **kwargs)
    encoder = get_encoder(None)
    python = BertTokenizerLegacy(os.path.join(encoder.path, "vocab.txt"))
    assert not python.is_fast
    monkeypatch.setattr(encoder, "tokenizer", python)
    monkeypatch.setattr(streaming, "tokenizes_ahead", lambda device: ahead)
    tiny_budget()
    with truncation_warned("truncate", seen):
        chunked = centered_bertscore(predictions, references, **kwargs)
    assert seen[0] == seen[1]
    assert chunked["f1"] == pytest.approx(whole["f1"], abs=1e-6)


@pytest.mark.slow
def test_a_lone_prediction_past_the_budget_warns_of_truncation_once(monkeypatch):
    """A call its counts cut but whose one prediction (with all its references) cannot be cut runs
    as one chunk that tokenizes itself: the truncation warning comes once, from that chunk, not
    from the count as well."""
    references = [f"reference number {i} says that the cat sat on the mat for a long while today" for i in range(60)]
    prediction = "the cat sat on the mat for a very long time indeed, it did"
    seen = []
    with truncation_warned("truncate", seen):
        whole = centered_bertscore([prediction], [references], max_length=16)
    moverkit.set_memory_budget("64KB")
    try:
        with truncation_warned("truncate", seen):
            cut = centered_bertscore([prediction], [references], max_length=16)
    finally:
        moverkit.set_memory_budget(None)
    assert seen[0] == seen[1] and cut["f1"] == whole["f1"]
