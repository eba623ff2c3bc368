"""Centering on synthetic clouds: each mode's definition, invariance, zero vectors."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moverkit._core import TokenClouds, center, token_mean


def _clouds(vectors, lengths, special=None):
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(torch.tensor(lengths), 0)
    n = int(offsets[-1])
    special = torch.zeros(n, dtype=torch.bool) if special is None else torch.tensor(special)
    return TokenClouds([f"t{i}" for i in range(len(lengths))], vectors, offsets, [[0] * k for k in lengths], special, None)


def test_batch_mean_skips_special_tokens_and_counts_duplicates():
    v = torch.tensor([[100.0, 100.0], [1.0, 0.0], [3.0, 2.0], [0.0, 4.0]])
    clouds = _clouds(v, [3, 1], special=[True, False, False, False])
    mean, n = token_mean(clouds, torch.tensor([1.0, 2.0]))  # text 1 occurs twice
    # (1,0) + (3,2) + 2 * (0,4) over 4 tokens
    assert n == 4
    np.testing.assert_allclose(mean.numpy(), [1.0, 2.5])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["batch", "sentence"]))
def test_centering_removes_any_common_shift(seed, mode):
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(7, 5, generator=gen, dtype=torch.float64).float()
    shift = torch.randn(5, generator=gen) * 10
    a = center(_clouds(v, [3, 4]), mode).vectors
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
