"""``return_reference_index=True``: which reference gave each prediction's kept score, for every
metric, checked against scoring each (prediction, reference) pair on its own."""

from __future__ import annotations

import pytest

import moverkit
from moverkit import functional
from moverkit.facts.specs import SPECS

PREDICTIONS = ["the cat sat on the mat", "stocks fell sharply", "he went home", "rain is expected"]
REFERENCES = [
    ["markets were calm", "a cat was sitting on the mat", "the cat is on a mat"],
    ["shares dropped a lot"],
    ["the weather is fine", "it rained all day", "he walked home early", "she stayed"],
    ["rain is expected", "it may rain tomorrow"],
]


def _kept_reference(name: str) -> list[int]:
    """The independent answer: each pair scored in one flat call (one reference per row; the
    default centering of every metric scores a pair on its own), then the best per prediction."""
    spec = SPECS[name]
    flat = [(i, k) for i, refs in enumerate(REFERENCES) for k in range(len(refs))]
    scores = getattr(functional, name)([PREDICTIONS[i] for i, _ in flat], [REFERENCES[i][k] for i, k in flat])
    kept = {}
    for (i, k), value in zip(flat, scores[spec.main]):
        if i not in kept or spec.better(value, kept[i][1]):
            kept[i] = (k, value)
    return [kept[i][0] for i in range(len(PREDICTIONS))]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_reference_index_names_the_reference_whose_score_was_kept(name):
    result = getattr(functional, name)(PREDICTIONS, REFERENCES, return_reference_index=True)
    assert result["reference_index"] == _kept_reference(name)
    assert result["reference_index"][3] == 0  # the identical reference
    plain = getattr(functional, name)(PREDICTIONS, REFERENCES)
    assert "reference_index" not in plain
    assert {k: v for k, v in result.items() if k != "reference_index"} == plain


@pytest.mark.parametrize("name", ["twmd", "centered_bertscore", "lazy_emd"])
def test_reference_index_is_the_same_when_the_call_runs_in_chunks(name):
    whole = getattr(functional, name)(PREDICTIONS, REFERENCES, return_reference_index=True)
    moverkit.set_memory_budget("64KB")
    try:
        chunked = getattr(functional, name)(PREDICTIONS, REFERENCES, return_reference_index=True)
    finally:
        moverkit.set_memory_budget(None)
    assert chunked["reference_index"] == whole["reference_index"]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_reference_index_is_checked(name):
    with pytest.raises((TypeError, ValueError), match="return_reference_index"):
        getattr(functional, name)(["a"], ["a"], return_reference_index="yes")
