"""The cache of token clouds (and sentence vectors) across compute calls: same scores, bounded, keyed, off by default."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import moverkit
from moverkit import MoverkitWarning, functional
from moverkit._core import encode_texts, get_encoder
from moverkit._core.encoding import cache
from moverkit._core.encoding.cache import (
    DEFAULT_MAX_BYTES,
    cache_enabled,
    cache_info,
    cached_encode,
    cached_sentence_vectors,
    clear_cache,
    set_cache,
)
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import encode_sentences, get_sentence_encoder, sentence_truncations
from moverkit._core.encoding.tokens import CallTokenizer


def cached(encoder, texts, request, **options):
    """:func:`cached_encode` as a call of ``request`` runs it (its tokenizer made, then closed)."""
    tokenizer = CallTokenizer.of(encoder, request.max_length, request.long_texts)
    clouds = cached_encode(encoder, texts, tokenizer, request, **options)
    tokenizer.close(len(texts))
    return clouds


# Five pairs per evaluation, ten distinct texts: as few as batch centering takes without a warning.
REFERENCES = [
    "The cat sat on the mat.",
    "Stocks fell sharply on Monday.",
    "He went home early.",
    "A law was passed.",
    "It rained all day.",
]
PREDICTIONS = [
    [
        "A cat was sitting on the mat.",
        "Shares dropped on Monday.",
        "He left for home.",
        "Parliament passed a law.",
        "Rain fell all day long.",
    ],
    ["The cat is on the mat.", "Markets fell on Monday.", "He went home.", "They passed a new law.", "It rained."],
    ["A dog sat on a rug.", "Stocks rose on Tuesday.", "She stayed at work late.", "A bill was voted.", "Sunny day."],
]


@pytest.fixture
def cache_on():
    """The process's cache on (256 MB) and empty; off and empty after."""
    set_cache("256MB")
    clear_cache()
    yield
    set_cache(0)
    clear_cache()


def test_off_by_default(monkeypatch):
    monkeypatch.delenv(cache.ENV_VAR, raising=False)
    assert cache._budget_from_env() == 0
    monkeypatch.setenv(cache.ENV_VAR, "1234")
    assert cache._budget_from_env() == 1234
    monkeypatch.setenv(cache.ENV_VAR, "2GB")
    assert cache._budget_from_env() == 2 * 2**30
    monkeypatch.setenv(cache.ENV_VAR, "0")
    assert cache._budget_from_env() == 0


@pytest.mark.parametrize(
    ("name", "tiny"),
    # The quick loop runs the tiny random model (the cache does not depend on the model); the full
    # suite runs every token metric on the embedded one (14-30 s each).
    [
        ("centered_bertscore", True),
        ("sbertscore", True),
        *(
            pytest.param(n, False, marks=pytest.mark.slow)
            for n in ("centered_bertscore", "twmd", "moverscore", "lazy_emd", "sbertscore")
        ),
    ],
)
def test_a_loop_scores_as_uncached_to_the_last_bit(cache_on, name, tiny, tiny_model_path):
    # batch_size=1: each text (each of sbertscore's sentences) is encoded alone, so cached and
    # uncached vectors are the same floats (with larger batches they may differ in the last bits:
    # see moverkit._core.encoding.cache).
    function = getattr(functional, name)
    model = {"model_type": tiny_model_path} if tiny else {}
    if tiny and name != "sbertscore":
        model["num_layers"] = 3
    cached = [function(p, REFERENCES, batch_size=1, centering="batch", **model) for p in PREDICTIONS]
    assert cache_info()["hits"] >= 2 * len(REFERENCES)  # evaluations 2 and 3 reuse the references
    set_cache(0)
    uncached = [function(p, REFERENCES, batch_size=1, centering="batch", **model) for p in PREDICTIONS]
    assert cached == uncached


@pytest.mark.slow
def test_moverscore_reads_the_clouds_of_centered_bertscore(cache_on):
    # Its last layer is the embedded model's default one: the same encoder, the same clouds.
    functional.centered_bertscore(PREDICTIONS[0], REFERENCES)
    hits = cache_info()["hits"]
    functional.moverscore(PREDICTIONS[0], REFERENCES)
    assert cache_info()["hits"] - hits == len(PREDICTIONS[0]) + len(REFERENCES)


@pytest.mark.slow
def test_default_batches_agree_to_rounding(cache_on):
    cached = [functional.centered_bertscore(p, REFERENCES)["f1"] for p in PREDICTIONS]
    set_cache(0)
    uncached = [functional.centered_bertscore(p, REFERENCES)["f1"] for p in PREDICTIONS]
    for a, b in zip(cached, uncached):
        assert a == pytest.approx(b, abs=1e-6)


@pytest.mark.slow  # every layer and mode of the real model (about 30 s)
def test_cached_encode_is_encode(cache_on):
    encoder = get_encoder()
    texts = REFERENCES + PREDICTIONS[0]
    cached(encoder, texts[2:6], EncoderRequest(batch_size=1))  # some hits, some misses, out of order
    got = cached(encoder, texts, EncoderRequest(batch_size=1), layers=None)
    want = encode_texts(encoder, texts, EncoderRequest(batch_size=1))
    assert torch.equal(got.vectors, want.vectors)
    assert torch.equal(got.offsets, want.offsets)
    assert torch.equal(got.special, want.special)
    assert got.token_ids == want.token_ids and got.texts == want.texts
    layered = cached(encoder, texts, EncoderRequest(batch_size=1), layers=(4, 6))
    want = encode_texts(encoder, texts, EncoderRequest(batch_size=1), layers=(4, 6))
    assert torch.equal(layered.layer_vectors, want.layer_vectors)


def test_cached_sentence_vectors_are_encode_sentences(cache_on, tiny_model_path):
    encoder = get_sentence_encoder(tiny_model_path)
    sentences = REFERENCES + PREDICTIONS[0]
    request = EncoderRequest(model_type=tiny_model_path, batch_size=1)
    cached_sentence_vectors(encoder, sentences[2:6], request)  # some hits, some misses, out of order
    before = cache_info()
    got = cached_sentence_vectors(encoder, sentences, request)
    assert (cache_info()["hits"] - before["hits"], cache_info()["misses"] - before["misses"]) == (4, 6)
    assert torch.equal(got, encode_sentences(encoder, sentences, request, sentence_truncations(encoder)))
    assert torch.equal(cached_sentence_vectors(encoder, sentences, request), got)  # all hits
    # The dtype of the forward pass is in the key: a bfloat16 request encodes again.
    bfloat16 = EncoderRequest(model_type=tiny_model_path, batch_size=1, dtype="bfloat16")
    misses = cache_info()["misses"]
    assert torch.equal(
        cached_sentence_vectors(encoder, sentences[:3], bfloat16),
        encode_sentences(encoder, sentences[:3], bfloat16, sentence_truncations(encoder)),
    )
    assert cache_info()["misses"] == misses + 3


@pytest.mark.parametrize("level", ["token", "sentence"])
def test_a_fit_fills_the_cache_and_fits_as_uncached(cache_on, level, tiny_model_path):
    # Fit on the corpus, then score its references: each is encoded once (batch_size=1: the same floats).
    model = {"model_type": tiny_model_path, "batch_size": 1}
    corpus = REFERENCES + PREDICTIONS[1]  # 10 distinct texts: as few as a fit takes without a warning
    fitted = moverkit.fit_centering(corpus, **model, level=level)
    function = functional.centered_bertscore if level == "token" else functional.sbertscore
    before = cache_info()
    function(PREDICTIONS[0], REFERENCES, centering="corpus", centering_stats=fitted, **model)
    assert cache_info()["hits"] - before["hits"] == len(REFERENCES)  # one sentence a reference
    assert cache_info()["misses"] - before["misses"] == len(PREDICTIONS[0])
    set_cache(0)
    uncached = moverkit.fit_centering(corpus, **model, level=level)
    assert (fitted.mean == uncached.mean).all() and fitted.n_tokens == uncached.n_tokens


@pytest.mark.slow
def test_tokens_made_ahead_are_taken_for_the_texts_the_cache_lacks(cache_on, tiny_model_path):
    """A chunk tokenized ahead hands its tokens (of every distinct text) to cached_encode, which
    encodes only the texts it does not hold: those take their own tokens, not the first ones."""
    encoder = get_encoder(tiny_model_path)
    request = EncoderRequest(batch_size=1)
    texts = REFERENCES + PREDICTIONS[0]
    cached(encoder, texts[2:6], request)  # some hits, some misses, out of order
    tokenizer = CallTokenizer.of(encoder)
    got = cached_encode(encoder, texts, tokenizer, request, tokens=tokenizer.tokenize(texts))
    want = encode_texts(encoder, texts, request)
    assert got.token_ids == want.token_ids
    assert torch.equal(got.vectors, want.vectors)


def test_tokens_of_other_texts_are_refused(cache_on, tiny_model_path):
    """cached_encode takes tokens made ahead by position: tokens of other texts (or in another
    order) would give a text another text's vectors, so they are an error, never a silent misalignment."""
    encoder = get_encoder(tiny_model_path)
    tokenizer = CallTokenizer.of(encoder)
    texts = REFERENCES[:3]
    for other in (texts[::-1], texts[:2], texts + ["one more"]):
        with pytest.raises(ValueError, match="tokens of other texts"):
            cached_encode(encoder, texts, tokenizer, EncoderRequest(), tokens=tokenizer.tokenize(other))


@pytest.mark.slow
def test_a_call_whose_texts_all_miss_gets_encodes_own_clouds(cache_on, tiny_model_path, monkeypatch):
    """Nothing held: the cache keeps each text's copy and returns encode's result itself (not the
    copies joined back); only the texts it misses are tokenized."""
    encoder = get_encoder(tiny_model_path)
    request = EncoderRequest(batch_size=1)
    tokenizer = CallTokenizer.of(encoder)
    encoded, tokenized = [], []
    real_encode, real_tokenize = cache.encode, CallTokenizer.tokenize
    monkeypatch.setattr(cache, "encode", lambda *a, **k: encoded.append(real_encode(*a, **k)) or encoded[-1])
    monkeypatch.setattr(CallTokenizer, "tokenize", lambda self, t: tokenized.append(list(t)) or real_tokenize(self, t))
    assert cached_encode(encoder, REFERENCES, tokenizer, request) is encoded[0]
    cached_encode(encoder, REFERENCES + PREDICTIONS[0], tokenizer, request)
    assert tokenized == [REFERENCES, [t for t in PREDICTIONS[0] if t not in REFERENCES]]


@pytest.mark.slow  # four full encodings of the real model
@pytest.mark.parametrize(
    "change", [{"max_length": 5}, {"dtype": "bfloat16"}, {"long_texts": "window"}, {"layers": (5,)}]
)
def test_everything_that_changes_vectors_is_in_the_key(cache_on, change):
    encoder = get_encoder()
    cached(encoder, REFERENCES, EncoderRequest(batch_size=1))
    change = dict(change)
    layers = change.pop("layers", None)
    request = EncoderRequest(batch_size=1, **change)
    truncated = "max_length" in change  # every reference is longer than 5 tokens
    with pytest.warns(MoverkitWarning, match="were truncated") if truncated else contextlib.nullcontext():
        got = cached(encoder, REFERENCES, request, layers=layers)
    with pytest.warns(MoverkitWarning, match="were truncated") if truncated else contextlib.nullcontext():
        want = encode_texts(encoder, REFERENCES, request, layers=layers)
    assert torch.equal(got.vectors, want.vectors)
    if layers is not None:
        assert torch.equal(got.layer_vectors, want.layer_vectors)


@pytest.mark.slow
def test_another_model_never_reuses(cache_on, tiny_model_path):
    cached(get_encoder(), REFERENCES, EncoderRequest())
    tiny = get_encoder(tiny_model_path)
    assert torch.equal(
        cached(tiny, REFERENCES, EncoderRequest()).vectors, encode_texts(tiny, REFERENCES, EncoderRequest()).vectors
    )


@pytest.mark.slow
def test_budget_evicts_least_recently_used(cache_on):
    encoder = get_encoder()
    cached(encoder, REFERENCES[:1], EncoderRequest())
    budget = cache_info()["bytes"] + 1000  # one text and a little
    set_cache(budget)
    cached(encoder, REFERENCES, EncoderRequest())
    info = cache_info()
    assert 0 < info["bytes"] <= budget and info["texts"] < len(REFERENCES)
    set_cache(0)
    assert cache_info()["texts"] == 0
    cached(encoder, REFERENCES, EncoderRequest())
    assert cache_info()["texts"] == 0  # off: nothing kept


@pytest.mark.slow
def test_release_clears_it(cache_on):
    cached(get_encoder(), REFERENCES, EncoderRequest())
    assert cache_info()["texts"] == len(REFERENCES)
    moverkit.release()
    assert cache_info()["texts"] == 0


def test_cache_enabled_turns_it_on_for_a_block_and_restores_the_budget_before():
    previous = cache_info()["max_bytes"]
    try:
        set_cache(0)
        with cache_enabled():
            assert cache_info()["max_bytes"] == DEFAULT_MAX_BYTES
            cached(get_encoder(), REFERENCES, EncoderRequest())
            assert cache_info()["texts"] == len(REFERENCES)
            block = cache._scope()
        assert (cache_info()["max_bytes"], cache_info()["bytes"], cache_info()["texts"]) == (0, 0, 0)
        assert not block.entries and not cache._PROCESS.entries  # the block's texts are forgotten with it
        set_cache(12345)
        with cache_enabled():  # a budget the user set is kept
            assert cache_info()["max_bytes"] == 12345
        with pytest.raises(RuntimeError), cache_enabled("1MB"):
            assert cache_info()["max_bytes"] == 2**20
            raise RuntimeError
        assert cache_info()["max_bytes"] == 12345
        with pytest.raises(ValueError, match="max_bytes"), cache_enabled(-1):
            pass
        assert cache_info()["max_bytes"] == 12345
    finally:
        set_cache(previous)


def _fake_cloud(tokens: int = 4) -> cache._Cloud:
    return cache._Cloud(torch.zeros(tokens, 8), list(range(tokens)), torch.zeros(tokens, dtype=torch.bool), None)


def _put(text: str) -> None:
    """One text into the cache this context sees, as cached_encode puts it."""
    cache._CACHE.put(cache._scope(), (("config",), text), _fake_cloud())


def _held(text: str) -> bool:
    return cache._CACHE.get(cache._scope(), (("config",), text)) is not None


def test_a_block_is_its_threads_alone_and_forgets_its_texts():
    """Another thread's calls see the cache as set_cache set it (off), never the block's, and
    another block's texts are not read: each block scores as it does alone."""
    seen = {}

    def other_thread():
        seen["max_bytes"] = cache_info()["max_bytes"]
        _put("theirs")  # off for them: nothing kept
        with cache_enabled():
            seen["mine"] = _held("mine")
            _put("theirs")
            seen["theirs"] = _held("theirs")

    set_cache(0)
    with cache_enabled():
        block = cache._scope()
        _put("mine")
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=30)
        assert seen == {"max_bytes": 0, "mine": False, "theirs": True}
        assert _held("mine") and not _held("theirs")
        set_cache("1MB")  # the process's budget, not the block's
        assert cache_info()["max_bytes"] == DEFAULT_MAX_BYTES
        with cache_enabled():  # nested, no budget: the outer block's cache
            assert _held("mine")
        with cache_enabled("1MB"):  # a budget of its own: texts of its own
            assert not _held("mine")
    set_cache(0)
    assert not block.entries and not cache._PROCESS.entries


def test_a_block_evicts_only_its_own_texts():
    size = _fake_cloud().nbytes("text 0")  # every text below has a name of the same length
    try:
        set_cache(10 * size)
        for i in range(5):
            _put(f"proc {i}")
        with cache_enabled(2 * size):
            for i in range(3):
                _put(f"text {i}")
            assert cache_info()["texts"] == 2 and not _held("text 0") and _held("text 2")
        assert cache_info()["texts"] == 5 and all(_held(f"proc {i}") for i in range(5))
    finally:
        set_cache(0)


def test_set_cache_checks_its_argument():
    with pytest.raises(TypeError, match="max_bytes"):
        moverkit.set_cache(1.5)
    with pytest.raises(ValueError, match="max_bytes"):
        moverkit.set_cache(-1)
    with pytest.raises(ValueError, match="max_bytes"):
        moverkit.set_cache("lots")


@pytest.mark.slow
def test_budget_counts_bytes_not_tokens(cache_on):
    # Long texts cut to a few tokens: a budget in tokens counted 200 such texts as 1,600 tokens while
    # their strings (the keys) held 28 MB.
    encoder = get_encoder()
    texts = [f"{i} " + "word " * 28_000 for i in range(40)]  # 140 KB each, 5.6 MB in all
    set_cache("2MB")
    with pytest.warns(MoverkitWarning, match="40 of 40 texts are longer than 8 tokens and were truncated"):
        cached(encoder, texts, EncoderRequest(max_length=8))
    info = cache_info()
    assert info["bytes"] <= 2 * 2**20 and info["texts"] < 15


@pytest.mark.parametrize("value", ["lots", "-5", "1.5.0", "12 parsecs"])
def test_bad_environment_budget_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(cache.ENV_VAR, value)
    with pytest.raises(ValueError, match=cache.ENV_VAR):
        cache._budget_from_env()


RELEASE_RSS = """
import torch
import moverkit
from moverkit._core.encoding import cache

def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))

cache.set_cache("4GB")
base = rss_mb()
for i in range(20_000):  # 20,000 small texts, as a long training loop leaves them
    cloud = cache._Cloud(torch.randn(12, 384), list(range(1000, 1012)), torch.zeros(12, dtype=torch.bool), None)
    cache._CACHE.put(cache._PROCESS, ((0,), f"text {i} " + "x" * 200), cloud)
full = rss_mb()
moverkit.release()
print((full - rss_mb()) / (full - base))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the resident size from /proc (Linux)")
@pytest.mark.integration
def test_release_gives_the_memory_back():
    # Measured: 393 MB held by 20,000 cached texts; release() returned 6% of it before (the freed
    # pages stayed in glibc's arenas), 99% with malloc_trim.
    out = subprocess.run([sys.executable, "-c", RELEASE_RSS], capture_output=True, text=True, check=True)
    assert float(out.stdout) > 0.8
