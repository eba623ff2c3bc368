"""Windowed encoding of long texts: the window plan, and vectors against a by-hand forward pass."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from moverkit._core import encode_texts, get_encoder
from moverkit._core.base.windows import WINDOW_STRIDE, nearest_window, plan_windows, window_starts
from moverkit._core.encoding.request import EncoderRequest

LONG = " ".join(f"word{i % 37} number {i} of a long text ." for i in range(60))  # ~480 tokens


def _brute_force_window(p: int, starts: list[int], capacity: int) -> int:
    """The window with the most context on both sides of position p (ties: the earlier)."""
    context = [min(p - s, s + capacity - 1 - p) if s <= p < s + capacity else -1 for s in starts]
    return context.index(max(context))


@pytest.mark.parametrize("n, capacity, stride", [(10, 10, 5), (11, 10, 5), (100, 10, 5), (100, 10, 3), (57, 8, 8)])
def test_windows_cover_the_text_and_each_token_takes_its_most_central_window(n, capacity, stride):
    starts = window_starts(n, capacity, stride)
    assert starts[0] == 0 and starts[-1] + capacity == max(n, capacity)
    assert all(0 < b - a <= stride for a, b in zip(starts, starts[1:]))
    chosen = nearest_window(n, starts, capacity).tolist()
    assert chosen == [_brute_force_window(p, starts, capacity) for p in range(n)]


def test_texts_within_the_limit_are_their_own_rows():
    ids, special = [[101, 5, 6, 102], [101, 7, 102]], [[1, 0, 0, 1], [1, 0, 1]]
    plan = plan_windows(ids, special, limit=4)
    assert plan.rows == ids and plan.source is None


@pytest.mark.slow
def test_window_vectors_are_those_of_each_tokens_most_central_window(tiny_model_path):
    encoder = get_encoder(tiny_model_path)
    limit = encoder.max_length  # 128 for the tiny model
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no truncation warning
        clouds = encode_texts(encoder, ["a short one", LONG], EncoderRequest(long_texts="window", batch_size=3))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModel.from_pretrained(tiny_model_path).eval()
    ids = tokenizer(LONG)["input_ids"]
    content, capacity = ids[1:-1], limit - 2
    assert len(ids) > 3 * limit
    starts = window_starts(len(content), capacity, math.ceil(capacity * WINDOW_STRIDE))
    with torch.no_grad():
        windows = [model(torch.tensor([[ids[0]] + content[s : s + capacity] + [ids[-1]]]))[0][0] for s in starts]
    expected = [windows[0][0]]
    for p in range(len(content)):
        w = _brute_force_window(p, starts, capacity)
        expected.append(windows[w][1 + p - starts[w]])
    expected.append(windows[-1][-1])
    got = clouds.vectors[clouds.offsets[1] : clouds.offsets[2]]
    torch.testing.assert_close(got, torch.stack(expected), atol=1e-5, rtol=1e-5)
    assert clouds.token_ids[1] == ids
    assert clouds.special[clouds.offsets[1] : clouds.offsets[2]].nonzero().flatten().tolist() == [0, len(ids) - 1]
    short = encode_texts(encoder, ["a short one"], EncoderRequest())  # alone: no padding beside the windows
    torch.testing.assert_close(clouds.vectors[: clouds.offsets[1]], short.vectors, atol=1e-5, rtol=1e-5)


def test_window_keeps_layer_vectors_in_step(tiny_model_path):
    encoder = get_encoder(tiny_model_path)
    clouds = encode_texts(encoder, [LONG], EncoderRequest(long_texts="window"), layers=(1, 3))
    torch.testing.assert_close(clouds.layer_vectors[-1], clouds.vectors)


def test_truncation_warning_points_to_window(tiny_model_path):
    encoder = get_encoder(tiny_model_path)
    with pytest.warns(UserWarning, match="long_texts='window'"):
        clouds = encode_texts(encoder, [LONG], EncoderRequest())
    assert len(clouds.token_ids[0]) == encoder.max_length


def test_long_texts_is_checked(tiny_model_path):
    with pytest.raises(ValueError, match="long_texts"):
        encode_texts(get_encoder(tiny_model_path), ["x"], EncoderRequest(long_texts="split"))
