"""The encoder's batcher: longest first, at most batch_size texts and a token budget per batch."""

import random

import pytest
import torch

from moverkit._core import encode_texts, get_encoder
from moverkit._core.base import batching
from moverkit._core.base.batching import CUDA_WIDTHS, ENCODE_TOKEN_BUDGET, cuda_token_budget, length_batches
from moverkit._core.encoding.encoder import encode_batches
from moverkit._core.encoding.request import EncoderRequest


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


def _item_by_item(lengths, batch_size, max_tokens, width):
    """length_batches as it was first written, one Python step per item (issue 45 cut it per batch)."""
    batches = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if batches:
            batch = batches[-1]
            fits = max_tokens is None or (len(batch) + 1) * width(lengths[batch[0]]) <= max_tokens
            if len(batch) < batch_size and fits:
                batch.append(i)
                continue
        batches.append([i])
    return batches


@pytest.mark.parametrize("seed", range(6))
def test_batches_are_those_of_the_item_by_item_cut(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 2, rng.randint(0, 700)]) for _ in range(rng.randint(0, 900))]
    width = rng.choice([None, lambda n: n, lambda n: max(n, 16) * 2, lambda n: 0])
    for batch_size in (1, 7, 64, 10_000):
        for max_tokens in (None, 1, 100, 4096, 65_536):
            expected = _item_by_item(lengths, batch_size, max_tokens, width or (lambda n: n))
            assert length_batches(lengths, batch_size, max_tokens, width) == expected


def test_sentences_keep_batch_size_batches_and_long_texts_are_cut():
    assert [len(b) for b in length_batches([30] * 130, 64, ENCODE_TOKEN_BUDGET)] == [64, 64, 2]
    assert [len(b) for b in length_batches([512] * 20, 64, ENCODE_TOKEN_BUDGET)] == [8, 8, 4]
    assert length_batches([9000, 5], 64, ENCODE_TOKEN_BUDGET) == [[0], [1]]  # too long: alone


def test_cpu_batches_stay_batch_size_texts_padded_to_the_longest():
    """What fixes a text's vectors to the last bit on a CPU (the golden scores): unchanged."""
    lengths = [random.Random(1).randint(1, 600) for _ in range(300)]
    expected = [(b, lengths[b[0]]) for b in length_batches(lengths, 64, ENCODE_TOKEN_BUDGET)]
    assert encode_batches(lengths, 64, torch.device("cpu"), 512) == expected


@pytest.mark.parametrize("batch_size", [1, 64, 256])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cuda_batches_are_cut_by_tokens_and_padded_to_a_few_widths(batch_size, dtype, monkeypatch):
    monkeypatch.setenv("MOVERKIT_PLAN", "cuda")  # the CUDA plan on the CPU: the same batches
    rng = random.Random(0)
    lengths = [rng.randint(1, 256) for _ in range(2000)]  # rows within the limit
    batches = encode_batches(lengths, batch_size, torch.device("cpu"), 256, dtype)
    assert batches == encode_batches(lengths, batch_size, torch.device("cuda"), 256, dtype)
    assert sorted(i for batch, _ in batches for i in batch) == list(range(2000))
    for batch, width in batches:
        assert max(lengths[i] for i in batch) <= width <= 256
        assert width in CUDA_WIDTHS or width == 256  # capped by the model's limit
        assert len(batch) == 1 or len(batch) * width <= cuda_token_budget(batch_size, dtype)
    assert len({width for _, width in batches}) <= 5
    if batch_size == 64:
        assert cuda_token_budget(64, dtype) == {"float32": 16_384, "float16": 65_536}[dtype]  # measured (issue 45)
        assert len(batches) < 2000 / 64  # more texts a batch than batch_size: tokens bound it


def test_encode_makes_no_tensor_per_text(tiny_model_path, monkeypatch):
    """Issue 34: a torch.tensor call per text (ids, masks) cost 0.19 s of a 3.7 s call on 4,982
    texts of a tiny encoder; the ids are gathered per batch from one flat tensor."""
    encoder = get_encoder(tiny_model_path)
    texts = [f"text number {i} " + "word " * (i % 17) for i in range(300)]
    calls = []
    tensor = torch.tensor

    def counted(*args, **kwargs):
        calls.append(1)
        return tensor(*args, **kwargs)

    monkeypatch.setattr(torch, "tensor", counted)
    clouds = encode_texts(encoder, texts, EncoderRequest(tiny_model_path))
    assert len(clouds.texts) == 300
    assert len(calls) < 30  # a few per call and one per batch (5 batches of 64 texts)


@pytest.mark.slow
def test_token_budget_does_not_change_vectors_beyond_rounding(monkeypatch):
    """The same texts encoded with and without the budget: float32 batching noise only."""
    import moverkit._core.encoding.encoder as encoder_module

    encoder = get_encoder()
    texts = [" ".join(["word"] * n) + f" {n}" for n in (3, 40, 200, 400, 450)]
    budgeted = encode_texts(encoder, texts, EncoderRequest())
    monkeypatch.setattr(encoder_module, "ENCODE_TOKEN_BUDGET", None)
    unbounded = encode_texts(encoder, texts, EncoderRequest())
    assert (budgeted.vectors - unbounded.vectors).abs().max() < 1e-4


def test_a_pair_too_big_to_align_is_refused_before_any_matrix():
    from moverkit._core.base import batching

    side = int(batching.MAX_PAIR_ELEMENTS**0.5) + 1
    with pytest.raises(ValueError, match=f"a pair of {side:,} x {side:,} units .* sbertscore"):
        list(batching.pair_buckets(torch.tensor([3, side]), torch.tensor([4, side]), 1000))
    assert len(list(batching.pair_buckets(torch.tensor([3, side]), torch.tensor([4, side - 2]), 1000))) == 2


def test_a_metric_refuses_a_pair_too_big_to_align(monkeypatch):
    """Through a metric (twmd, windows): two 40,000-token texts were killed for memory at 20 GB."""
    from moverkit import functional
    from moverkit._core.base import batching

    monkeypatch.setattr(batching, "MAX_PAIR_ELEMENTS", 400)
    text = "the cat sat on the mat and looked at the dog " * 5  # 55 tokens, against 56: 3,080 entries
    with pytest.raises(ValueError, match="a pair of 55 x 56 units needs a 3,080-entry alignment"):
        functional.twmd([text], [text + "again"], centering="none")
    assert functional.twmd(["a cat"], ["the cat"], centering="none")["twmd"][0] > 0


def test_the_gpu_fill_gives_the_cpu_fill_bit_for_bit():
    """pad's two ways of filling a batch (the CPU's masked write, the GPU's gather-then-zero, which
    never waits for the device) give the same tensor, NaN, -0.0 and integer rows included."""
    from moverkit._core.base.batching import gather_rows, write_rows

    offsets = torch.tensor([0, 3, 3, 7, 8])
    items = torch.tensor([2, 0, 1, 3])
    lengths = offsets[items + 1] - offsets[items]
    mask = torch.arange(5)[None, :] < lengths[:, None]
    position = torch.where(mask, offsets[items][:, None] + torch.arange(5)[None, :], 0)
    vectors = torch.randn(8, 6, dtype=torch.float64)
    vectors[1, 2], vectors[4, 0] = float("nan"), -0.0
    for value in (vectors, torch.arange(8), torch.randn(8, 2, 3).float()):
        written, gathered = write_rows(value, position, mask), gather_rows(value, position, mask)
        assert written.dtype == gathered.dtype and written.shape == gathered.shape
        assert torch.equal(
            written.view(-1).view(torch.uint8) if written.is_floating_point() else written,
            gathered.view(-1).view(torch.uint8) if gathered.is_floating_point() else gathered,
        )


def _bucket_by_pair(rows, cols, max_elements):
    """pair_buckets as it was first written, one Python step per pair (issue 45 vectorized it)."""
    n_rows, n_cols = rows.clamp_min(1), cols.clamp_min(1)
    order = torch.argsort(n_rows * n_cols, stable=True)
    order = order[torch.argsort(torch.maximum(n_rows, n_cols)[order], stable=True)]
    sizes_r, sizes_c = n_rows[order].tolist(), n_cols[order].tolist()
    start, out = 0, []
    while start < len(order):
        end, width_r, width_c, real = start, 1, 1, 0
        while end < len(order):
            wr, wc = max(width_r, sizes_r[end]), max(width_c, sizes_c[end])
            padded = (end - start + 1) * wr * wc
            real_then = real + sizes_r[end] * sizes_c[end]
            too_big = padded > max_elements or padded > batching.PADDING_FACTOR * real_then + batching.PADDING_SLACK
            if end > start and too_big:
                break
            width_r, width_c, real, end = wr, wc, real_then, end + 1
        out.append(order[start:end].tolist())
        start = end
    return out


@pytest.mark.parametrize("seed", range(5))
def test_pair_buckets_are_those_of_the_pair_by_pair_cut(seed, monkeypatch):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 300, 3000])
    rows = torch.tensor(
        [rng.choice([0, 1, rng.randint(1, 60), rng.randint(1, 400)]) for _ in range(n)], dtype=torch.long
    )
    cols = torch.tensor(
        [rng.choice([0, 1, rng.randint(1, 60), rng.randint(1, 400)]) for _ in range(n)], dtype=torch.long
    )
    monkeypatch.setattr(batching, "BUCKET_WINDOW", rng.choice([1, 3, 1024]))  # windows cut anywhere
    for max_elements in (1, 5_000, 200_000, 10**8):
        got = [b.tolist() for b in batching.pair_buckets(rows, cols, max_elements)]
        assert got == _bucket_by_pair(rows, cols, max_elements)
