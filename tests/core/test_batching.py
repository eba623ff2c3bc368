"""The encoder's batcher: longest first, at most batch_size texts and a token budget per batch."""

import random

import pytest
import torch

from moverkit._core import encode, get_encoder
from moverkit._core.batching import ENCODE_TOKEN_BUDGET, length_batches
from moverkit._core.request import EncoderRequest


@pytest.mark.parametrize("max_tokens", [None, 1, 64, 4096])
def test_every_index_once_longest_first_within_both_bounds(max_tokens):
    rng = random.Random(0)
    lengths = [rng.randint(1, 600) for _ in range(500)]
    batches = length_batches(lengths, 16, max_tokens)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(500))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for batch in batches:
        assert len(batch) <= 16
        if max_tokens is not None and len(batch) > 1:
            assert len(batch) * lengths[batch[0]] <= max_tokens  # padded to its first (longest)


def test_sentences_keep_batch_size_batches_and_long_texts_are_cut():
    assert [len(b) for b in length_batches([30] * 130, 64, ENCODE_TOKEN_BUDGET)] == [64, 64, 2]
    assert [len(b) for b in length_batches([512] * 20, 64, ENCODE_TOKEN_BUDGET)] == [8, 8, 4]
    assert length_batches([9000, 5], 64, ENCODE_TOKEN_BUDGET) == [[0], [1]]  # too long: alone


@pytest.mark.slow
def test_token_budget_does_not_change_vectors_beyond_rounding(monkeypatch):
    """The same texts encoded with and without the budget: float32 batching noise only."""
    import moverkit._core.encoder as encoder_module

    encoder = get_encoder()
    texts = [" ".join(["word"] * n) + f" {n}" for n in (3, 40, 200, 400, 450)]
    budgeted = encode(encoder, texts, EncoderRequest())
    monkeypatch.setattr(encoder_module, "ENCODE_TOKEN_BUDGET", None)
    unbounded = encode(encoder, texts, EncoderRequest())
    assert (budgeted.vectors - unbounded.vectors).abs().max() < 1e-4


def test_a_pair_too_big_to_align_is_refused_before_any_matrix():
    from moverkit._core import batching

    side = int(batching.MAX_PAIR_ELEMENTS**0.5) + 1
    with pytest.raises(ValueError, match=f"a pair of {side:,} x {side:,} units .* sbertscore"):
        list(batching.pair_buckets(torch.tensor([3, side]), torch.tensor([4, side]), 1000))
    assert len(list(batching.pair_buckets(torch.tensor([3, side]), torch.tensor([4, side - 2]), 1000))) == 2


def test_a_metric_refuses_a_pair_too_big_to_align(monkeypatch):
    """Through a metric (twmd, windows): two 40,000-token texts were killed for memory at 20 GB."""
    from moverkit import functional
    from moverkit._core import batching

    monkeypatch.setattr(batching, "MAX_PAIR_ELEMENTS", 400)
    text = "the cat sat on the mat and looked at the dog " * 5  # 55 tokens, against 56: 3,080 entries
    with pytest.raises(ValueError, match="a pair of 55 x 56 units needs a 3,080-entry alignment"):
        functional.twmd([text], [text + "again"], centering="none")
    assert functional.twmd(["a cat"], ["the cat"], centering="none")["twmd"][0] > 0
