"""long_texts="window": long texts scored whole; texts within the limit exactly as truncated."""

from __future__ import annotations

import itertools
import time
import warnings

import pytest

from moverkit import functional
from moverkit._core import get_encoder
from moverkit._core.encoding import CallTokenizer
from moverkit._core.encoding.splitting import SPLIT_WINDOW, pysbd_segments, split_sentences

TOKEN_LEVEL = {
    "centered_bertscore": ("precision", "recall", "f1"),
    "twmd": ("twmd",),
    "moverscore": ("moverscore",),
    "lazy_emd": ("lazy_emd",),
}


def _n_tokens(*texts: str) -> list[int]:
    """Token counts, special tokens included."""
    return CallTokenizer.of(get_encoder(), long_texts="window").count(list(texts))  # whole: nothing cut


def _document(segments: list[str], n_tokens: int) -> tuple[str, int]:
    """Consecutive segments joined until the text has at least ``n_tokens`` tokens; the text and
    the number of segments used (WordPiece splits on white space first: the counts add up)."""
    total = 2  # [CLS] and [SEP]
    for k, n in enumerate(_n_tokens(*segments), start=1):
        total += n - 2
        if total >= n_tokens:
            text = " ".join(segments[:k])
            assert _n_tokens(text) == [total]
            return text, k
    raise AssertionError("not enough segments")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["centered_bertscore", "twmd"])
def test_a_3000_token_text_scores_best_against_itself_with_no_warning(name, wmt_pairs):
    text, _ = _document(wmt_pairs[1], 3000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = getattr(functional, name)([text], [text], long_texts="window")
    assert not [w for w in caught if "truncated" in str(w.message)]
    for key in TOKEN_LEVEL[name]:
        assert result[key] == pytest.approx([1.0], abs=1e-6), key
    assert "long_texts=window" in result["hashcode"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TOKEN_LEVEL))
def test_texts_within_the_limit_score_exactly_as_truncated(name, wmt_pairs):
    predictions, references = wmt_pairs[0][:6], wmt_pairs[1][:6]
    function = getattr(functional, name)
    window = function(predictions, references, long_texts="window")
    truncate = function(predictions, references)
    for key in TOKEN_LEVEL[name]:
        assert window[key] == truncate[key], key
    assert window["hashcode"] == truncate["hashcode"].replace("long_texts=truncate", "long_texts=window")


@pytest.mark.slow
def test_the_end_of_a_long_text_counts_with_window_only(wmt_pairs):
    """A 2,000-token reference, and a copy whose last segments (at most 100 tokens) are others."""
    hypotheses, references = wmt_pairs
    reference, k = _document(references, 2000)
    prediction = " ".join(hypotheses[:k])
    j, tail = k, 0  # references[j:k]: the reference's last segments, at most 100 tokens
    for n in reversed(_n_tokens(*references[:k])):
        if tail + n - 2 > 100:
            break
        j, tail = j - 1, tail + n - 2
    changed = " ".join(references[:j] + references[k : k + (k - j)])
    assert 0 < tail <= 100 and changed != reference and changed.startswith(" ".join(references[:j]))
    for name in ("centered_bertscore", "twmd"):
        function = getattr(functional, name)
        key = TOKEN_LEVEL[name][-1]
        with pytest.warns(UserWarning, match="truncated"):
            truncated = function([prediction] * 2, [reference, changed], centering="none")[key]
        windowed = function([prediction] * 2, [reference, changed], centering="none", long_texts="window")[key]
        assert truncated[0] == truncated[1], name
        assert abs(windowed[0] - windowed[1]) > 1e-4, name


def _numbered_document(segments: list[str], n_chars: int) -> str:
    """A document of ``n_chars`` characters: the segments in turn, each made distinct by a number."""
    parts, total = [], 0
    for i in itertools.count():
        parts.append(f"Part {i}: {segments[i % len(segments)]}")
        total += len(parts[-1]) + 1
        if total >= n_chars:
            return " ".join(parts)[:n_chars]


TRICKY = (
    'Dr. Smith paid $3.50 for it, i.e. a bargain. He said "Stop." Then he ran... Really?! The U.S. Army '
    'agreed. "Yes!" she cried.\n\nA new paragraph &quot;quoted&quot; ends here. '
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wmt", "tricky"])
def test_the_linear_splitter_gives_pysbds_segments(kind, wmt_pairs):
    import pysbd

    text = _numbered_document(wmt_pairs[0] + wmt_pairs[1], 20_000) if kind == "wmt" else TRICKY * 100
    assert len(text) > 4 * SPLIT_WINDOW
    assert pysbd_segments(text, "en") == pysbd.Segmenter(language="en", clean=False).segment(text)
    for short in wmt_pairs[1][:50] + [TRICKY]:  # texts within one window: pysbd itself
        assert pysbd_segments(short, "en") == pysbd.Segmenter(language="en", clean=False).segment(short)


@pytest.mark.slow
def test_splitting_time_is_linear_in_the_length(wmt_pairs):
    """8 times the characters: about 8 times the time (pysbd alone: about 50 times)."""
    segments = wmt_pairs[0] + wmt_pairs[1]
    seconds = []
    for n_chars in (25_000, 200_000):
        text = _numbered_document(segments, n_chars)
        start = time.perf_counter()
        sentences = split_sentences(text)
        seconds.append(time.perf_counter() - start)
        assert len(sentences) > n_chars / 200
    assert seconds[1] < 8 * 2.5 * seconds[0], seconds


@pytest.mark.slow
def test_sbertscore_time_is_linear_in_the_length(wmt_pairs):
    """An 80,000-character document against itself, and one of 10,000: time within 2.5 times linear."""
    segments = wmt_pairs[0] + wmt_pairs[1]
    functional.sbertscore(["Warm up."], ["Warm up."])
    seconds = []
    for n_chars in (10_000, 80_000):
        text = _numbered_document(segments, n_chars)
        start = time.perf_counter()
        result = functional.sbertscore([text], [text], centering="none")
        seconds.append(time.perf_counter() - start)
        assert result["f1"] == pytest.approx([1.0], abs=1e-6)
    assert seconds[1] < 8 * 2.5 * seconds[0], seconds
