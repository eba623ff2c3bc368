"""moverkit bench host (issue 45): the dispatch counter, and what one call asks of the host under
the CUDA plan on the CPU (MOVERKIT_PLAN=cuda), as a GPU would launch it."""

from __future__ import annotations

import pytest
import torch

from moverkit.bench import host


def test_the_counter_counts_host_reads_casts_and_weight_casts():
    weight = torch.nn.Parameter(torch.ones(3))
    counter = host.DispatchCounter(weights={weight.data_ptr()})
    with counter:
        x = torch.arange(5.0)
        float(x.sum())  # one read
        x.nonzero()  # another
        weight.to(torch.bfloat16)  # a weight's cast
        x.to(torch.float64)  # a cast, not of a weight
    assert counter.reads == 2
    assert counter.casts == 2 and counter.weight_casts == 1
    assert counter.forward_reads == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["centered_bertscore", "twmd", "sbertscore"])
def test_host_reads_do_not_grow_with_the_pairs_under_the_cuda_plan(name, wmt_pairs, monkeypatch):
    """Issue 45: at most 32 host reads a call, and as many for 200 pairs as for 40 (no read per
    batch); each weight cast at most once in half precision."""
    monkeypatch.setenv("MOVERKIT_PLAN", "cuda")
    predictions, references = wmt_pairs
    few = host.count(name, predictions[:40], references[:40], "cpu", "float32")
    many = host.count(name, predictions, references, "cpu", "float32")
    assert many["reads"] <= host.READ_BOUND
    assert many["reads"] - many["forward_reads"] == few["reads"] - few["forward_reads"]
    half = host.count(name, predictions, references, "cpu", "bfloat16")
    weights = sum(1 for _ in host.models_of(name, "cpu")[0].parameters())
    assert 0 < half["weight_casts"] <= weights
