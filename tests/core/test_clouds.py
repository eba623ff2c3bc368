"""Token clouds: their rows, and ``with_vectors``, which keeps the type and fields of the clouds it
is called on."""

from __future__ import annotations

import dataclasses

import torch

from moverkit._core.encoding.clouds import TokenClouds


@dataclasses.dataclass(eq=False)
class UnitClouds(TokenClouds):
    """Clouds whose rows are named units (as sbertscore's sentence clouds are)."""

    units: list[list[str]] = dataclasses.field(default_factory=list)


def _clouds() -> UnitClouds:
    return UnitClouds(
        texts=["one two", "three"],
        vectors=torch.arange(9.0).reshape(3, 3),
        offsets=torch.tensor([0, 2, 3]),
        token_ids=[[], []],
        special=torch.zeros(3, dtype=torch.bool),
        tokenizer=None,
        layer_vectors=torch.zeros(2, 3, 3),
        layers=(1, 2),
        units=[["one", "two"], ["three"]],
    )


def test_with_vectors_keeps_the_subclass_and_its_units():
    """Issue 68: ``with_vectors`` made a plain ``TokenClouds`` of any clouds, so centered sentence
    clouds lost their ``units`` (the sentences an alignment names)."""
    clouds = _clouds()
    centered = clouds.with_vectors(clouds.vectors - 1)
    assert type(centered) is UnitClouds
    assert centered.units == [["one", "two"], ["three"]]
    assert centered.texts == clouds.texts and centered.offsets is clouds.offsets
    assert torch.equal(centered.vectors, clouds.vectors - 1)
    assert centered.layer_vectors is None and centered.layers is None  # other layers' vectors are not carried


def test_sentence_clouds_keep_their_sentences_through_centering():
    from moverkit._core.centering import center
    from moverkit._core.encoding.sentences import SentenceClouds

    clouds = _clouds()
    sentences = SentenceClouds(**{f.name: getattr(clouds, f.name) for f in dataclasses.fields(clouds)})
    centered = center(sentences, "batch", counts=torch.ones(2), warn=False)
    assert type(centered) is SentenceClouds and centered.units == sentences.units
    assert centered.tokens(0) == ["one", "two"]
