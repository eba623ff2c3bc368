"""Centering on synthetic rows: each mode's definition, token clouds and sentence vectors alike,
invariance, zero vectors, and the one fit_centering for both levels."""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import moverkit
from moverkit import MoverkitWarning
from moverkit._core import CenteringStats, TokenClouds, center, center_rows, check_centering, row_mean
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.request import EncoderRequest


def _few(n, unit="texts"):
    """Batch centering of these hand-made examples: over fewer than 10 distinct units, it warns."""
    return pytest.warns(MoverkitWarning, match=f"centering='batch' over only {n} distinct {unit} ")


def _clouds(vectors, lengths, special=None):
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(torch.tensor(lengths), 0)
    n = int(offsets[-1])
    special = torch.zeros(n, dtype=torch.bool) if special is None else torch.tensor(special)
    return TokenClouds(
        [f"t{i}" for i in range(len(lengths))], vectors, offsets, [[0] * k for k in lengths], special, None
    )


def test_batch_mean_skips_special_tokens_and_counts_duplicates():
    v = torch.tensor([[100.0, 100.0], [1.0, 0.0], [3.0, 2.0], [0.0, 4.0]])
    clouds = _clouds(v, [3, 1], special=[True, False, False, False])
    # text 1 occurs twice: (1,0) + (3,2) + 2 * (0,4) over 4 tokens
    mean, n = row_mean(v, offsets=clouds.offsets, scored=~clouds.special, counts=torch.tensor([1.0, 2.0]))
    assert n == 4
    np.testing.assert_allclose(mean.numpy(), [1.0, 2.5])
    # Batch centering subtracts that mean from every row, the special one included.
    expected = v.double().numpy() - [1.0, 2.5]
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    with _few(2):
        out = center(clouds, "batch", counts=torch.tensor([1.0, 2.0])).vectors
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-6)


def test_sentence_vectors_batch_mean_weighs_rows_by_counts():
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    # Mean with counts (3, 1): (0.75, 0.25); v = (0.25, -0.25), (-0.75, 0.75); both of unit length after.
    with _few(2, "sentences"):
        v = center_rows(w, "batch", counts=torch.tensor([3.0, 1.0]))
    s = 1 / math.sqrt(2)
    np.testing.assert_allclose(v.numpy(), [[s, -s], [-s, s]], atol=1e-12)
    assert v.dtype == torch.float64
    assert torch.equal(center_rows(torch.zeros(1, 2), "none"), torch.zeros(1, 2))


def test_one_row_per_text_is_the_same_as_a_cloud_of_one_token_per_text():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(5, 4, generator=gen)
    counts = torch.tensor([1.0, 2.0, 1.0, 3.0, 1.0])
    clouds = _clouds(w, [1] * 5)
    stats = CenteringStats(mean=np.arange(4.0), model="m", layer=-1, n_texts=1, n_tokens=1)
    for mode in ("none", "dim", "batch", "corpus"):
        batch = mode == "batch"
        with _few(5, "sentences") if batch else contextlib.nullcontext():
            rows = center_rows(w, mode, counts=counts, stats=stats)
        with _few(5) if batch else contextlib.nullcontext():
            cloud = center(clouds, mode, counts=counts, stats=stats).vectors
        torch.testing.assert_close(rows, cloud)


def test_sentence_mode_is_refused_for_sentence_vectors_with_the_reason():
    with pytest.raises(ValueError, match="centering='sentence' does not apply to one vector per sentence.*zero"):
        Centering("sentence", level="sentence")
    with pytest.raises(ValueError, match="centering must be one of 'none', 'dim', 'batch', 'corpus'; got 'mean'"):
        check_centering("mean", "sentence")
    with pytest.raises(TypeError, match="centering must be one of"):
        check_centering(None)
    assert check_centering("sentence") == "sentence"


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["batch", "sentence"]))
def test_centering_removes_any_common_shift(seed, mode):
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(7, 5, generator=gen, dtype=torch.float64).float()
    shift = torch.randn(5, generator=gen) * 10
    with _few(2) if mode == "batch" else contextlib.nullcontext():
        a = center(_clouds(v, [3, 4]), mode).vectors
    with _few(2) if mode == "batch" else contextlib.nullcontext():
        b = center(_clouds(v + shift, [3, 4]), mode).vectors
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_dim_centering_and_unit_length():
    v = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 8.0]])
    out = center(_clouds(v, [2]), "dim").vectors
    expected = np.array([[-1.0, 0.0, 1.0], [-1.0, -1.0, 2.0]])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-6)
    assert not torch.equal(out, v)  # a new tensor; the input is untouched
    np.testing.assert_allclose(v.numpy(), [[1.0, 2.0, 3.0], [5.0, 5.0, 8.0]])


def test_a_vector_centered_to_zero_stays_zero_not_nan():
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = center(_clouds(v, [1, 1]), "sentence").vectors
    assert torch.equal(out, torch.zeros(2, 2))


def test_fit_centering_token_and_sentence_levels(tiny_model_path):
    from moverkit._core import encode_sentences, encode_texts, get_encoder, get_sentence_encoder
    from moverkit._core.encoding import sentence_truncations

    texts = ["The cat sat. It purred.", "Stocks fell.", "Stocks fell.", "   "]
    # Token level, positional (model_type, num_layers) as the CLI calls it: the mean non-special token.
    with pytest.warns(UserWarning, match="fit_centering over only 2 distinct texts"):  # too few, but exact
        stats = moverkit.fit_centering(texts, tiny_model_path, 2)
    clouds = encode_texts(get_encoder(tiny_model_path, 2), texts, EncoderRequest())
    words = clouds.vectors[~clouds.special].double()
    np.testing.assert_allclose(stats.mean, words.mean(0).numpy(), atol=1e-6)
    assert (stats.layer, stats.n_texts, stats.n_tokens) == (2, 4, len(words))
    # Sentence level: the mean over the 4 sentence occurrences ("Stocks fell." twice).
    with pytest.warns(UserWarning, match="fit_centering over only 3 distinct sentences"):
        stats = moverkit.fit_centering(texts, model_type=tiny_model_path, level="sentence")
    sentences = ["The cat sat.", "It purred.", "Stocks fell.", "Stocks fell."]
    encoder = get_sentence_encoder(tiny_model_path)
    vectors = encode_sentences(encoder, sentences, EncoderRequest(), sentence_truncations(encoder)).double()
    np.testing.assert_allclose(stats.mean, vectors.mean(0).numpy(), atol=1e-6)
    assert (stats.layer, stats.n_texts, stats.n_tokens) == (-1, 4, 4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"texts": []}, ValueError, "texts hold no token"),
        ({"texts": ["", " "], "level": "sentence"}, ValueError, "texts hold no sentence"),
        ({"texts": ["a"], "level": "word"}, ValueError, "level must be one of 'token', 'sentence'"),
        ({"texts": ["a"], "level": "sentence", "num_layers": 3}, ValueError, "num_layers does not apply"),
        ({"texts": ["a"], "batch_size": 0}, ValueError, "batch_size must be"),
        ({"texts": "a text"}, TypeError, "texts must be a list"),
        ({"texts": ["a"], "level": "sentence", "lang": "xx"}, ValueError, "lang must be one of"),
    ],
)
def test_fit_centering_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        moverkit.fit_centering(**kwargs)


@pytest.mark.parametrize(
    ("texts", "level", "distinct"),
    [
        (["one text"], "token", 1),
        (["the same text"] * 3, "token", 1),
        ([f"word{i}" for i in range(9)] + ["word0", " ", ""], "token", 9),  # repeats and blanks add nothing
        (["The cat sat. The dog ran. The cat sat."] * 4, "sentence", 2),
        ([f"word{i}" for i in range(10)], "token", None),
        ([" ".join(f"This is sentence number {i}." for i in range(10))], "sentence", None),  # 10 sentences, 1 text
    ],
)
def test_fit_centering_on_too_few_distinct_texts_warns(tiny_model_path, texts, level, distinct):
    from moverkit._core.centering.fit import MIN_FIT_TEXTS

    unit = ("text" if level == "token" else "sentence") + ("" if distinct == 1 else "s")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        moverkit.fit_centering(texts, model_type=tiny_model_path, level=level)
    messages = [w for w in caught if "fit_centering" in str(w.message)]
    if distinct is None:
        assert messages == []
        return
    (warning,) = messages
    assert str(warning.message).startswith(
        f"fit_centering over only {distinct} distinct {unit} (fewer than {MIN_FIT_TEXTS})"
    )
    assert warning.filename == __file__  # attributed to the caller (warn_user)


def test_batch_centering_of_no_text_does_not_warn():
    """A call on no pairs (moverkit.torchmetrics checks its arguments with one) has no mean to warn about."""
    from moverkit import functional

    for name in ("twmd", "sbertscore"):
        assert getattr(functional, name)([], [], centering="batch")["hashcode"]


def test_fit_centering_fits_in_the_precision_the_scores_use():
    """Issue 51, item 5: fit_centering fitted in float32 only. ``dtype`` is the precision of its
    forward pass, as in the metrics: bfloat16 gives another mean (the vectors the scores will
    center), float32 the same as before, and float16 on a CPU is refused as the metrics refuse it."""
    texts = [f"text number {i} about a cat on a mat" for i in range(12)]
    fp32 = moverkit.fit_centering(texts)
    assert np.array_equal(moverkit.fit_centering(texts, dtype="float32").mean, fp32.mean)
    bf16 = moverkit.fit_centering(texts, dtype="bfloat16")
    assert not np.array_equal(bf16.mean, fp32.mean)
    assert np.abs(bf16.mean - fp32.mean).max() < 0.05
    with pytest.raises(ValueError, match="float16"):
        moverkit.fit_centering(texts, dtype="float16")


@pytest.mark.parametrize("metric", ["lazy_emd", "moverscore", "twmd"])
def test_a_statistic_that_the_centering_does_not_read_is_said_to_be_ignored(metric):
    """Issue 51, item 5: ``centering_stats`` passed where the centering does not read it (lazy_emd's
    and moverscore's default ``none``) was accepted without a word, the hashcode saying
    ``center=none``."""
    stats = moverkit.fit_centering([f"text number {i} about a cat" for i in range(12)])
    from moverkit import functional

    function = getattr(functional, metric)
    pairs = (["a cat", "a dog ran"], ["the cat", "two dogs"])
    with pytest.warns(MoverkitWarning, match="centering_stats is read only by centering='corpus'"):
        function(*pairs, centering="none", centering_stats=stats)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function(*pairs, centering="corpus", centering_stats=stats)
