"""The texts of a call: pairs, distinct texts and their counts (what every metric encodes once)."""

from __future__ import annotations

import torch

from moverkit._core import call_texts


def test_call_texts_counts_each_distinct_text_and_indexes_every_pair():
    texts = call_texts(["p", "q", "p"], [["r", "p"], "r", ["s"]])
    assert texts.pair_predictions == ["p", "p", "q", "p"]
    assert texts.pair_references == ["r", "p", "r", "s"]
    assert texts.group.tolist() == [0, 0, 1, 2]
    # a prediction counts once per prediction, a reference once per pair it is in
    assert texts.unique == ["p", "q", "r", "s"]
    assert texts.counts().tolist() == [3.0, 1.0, 2.0, 1.0] and texts.counts().dtype == torch.float64
    pred_index, ref_index = texts.pair_indices()
    assert [texts.unique[i] for i in pred_index] == texts.pair_predictions
    assert [texts.unique[i] for i in ref_index] == texts.pair_references
