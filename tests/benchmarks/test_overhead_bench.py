"""``moverkit bench overhead`` (issue 34): the CPU proxy of the GPU regime keeps working."""

from __future__ import annotations

import pytest

from benchmarks import _shared, overhead


@pytest.mark.integration
def test_overhead_bench_times_floor_and_metrics_on_a_few_pairs(tmp_path, wmt_pairs):
    predictions, references = wmt_pairs
    report = overhead.measure(predictions[:6], references[:6], ["centered_bertscore", "twmd", "lazy_emd"], 1, tmp_path)
    assert set(report["seconds"]) == {"floor", "centered_bertscore", "twmd", "lazy_emd"}
    assert all(seconds > 0 for seconds in report["seconds"].values())
    table = overhead.format_report(report, "ISA: test")
    assert "| twmd (centering='batch') |" in table and table.endswith("ISA: test")


def test_floor_encodes_every_text_in_token_budgeted_batches(tmp_path, monkeypatch):
    """The floor runs one forward pass per batch of at most ``token_budget`` padded tokens."""
    from transformers import BertModel

    model_path = overhead.tiny_encoder(tmp_path)
    shapes = []

    original = BertModel.forward

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        shapes.append(tuple(input_ids.shape))
        return original(self, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    monkeypatch.setattr(BertModel, "forward", forward)
    texts = ["a short text", "a somewhat longer text than the first one", "mid length text here"] * 5
    run = _shared.floor(model_path, texts, token_budget=40)
    shapes.clear()
    run()
    assert sum(rows for rows, _ in shapes) == len(texts)
    assert all(rows * width <= 40 or rows == 1 for rows, width in shapes)
