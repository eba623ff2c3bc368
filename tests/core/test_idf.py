"""IDF weights: BERTScore's definition, checked against the bert-score package and by hand."""

from __future__ import annotations

import math

import pytest
import torch

from moverkit._core import IdfTable, encode_texts, get_encoder, token_weights
from moverkit._core.encoding.request import EncoderRequest


def test_formula_on_a_toy_corpus():
    # 3 documents; token 7 in all three, token 8 in one, token 9 never.
    table = IdfTable([[7, 8, 8], [7], [7, 1]])
    assert table[7] == pytest.approx(math.log(4 / 4))
    assert table[8] == pytest.approx(math.log(4 / 2))
    assert table[9] == pytest.approx(math.log(4))  # unseen: log(N + 1)


@pytest.mark.slow
def test_equals_bert_score_get_idf_dict(wmt_pairs):
    bert_score = pytest.importorskip("bert_score")
    encoder = get_encoder()
    references = wmt_pairs[1][:60]
    theirs = bert_score.utils.get_idf_dict(references, encoder.tokenizer, nthreads=0)
    clouds = encode_texts(encoder, references, EncoderRequest())
    ours = IdfTable(clouds.token_ids)
    for token_id in set(theirs) | {12345}:
        assert ours[token_id] == pytest.approx(theirs[token_id])


def test_special_tokens_weigh_zero_and_dicts_by_string_work():
    encoder = get_encoder()
    clouds = encode_texts(encoder, ["the cat"], EncoderRequest())
    assert token_weights(clouds, False).tolist() == [0.0, 1.0, 1.0, 0.0]
    weights = token_weights(clouds, {"cat": 2.5})
    assert weights.tolist() == [0.0, 0.0, 2.5, 0.0]
    table = IdfTable([clouds.token_ids[0]])
    assert torch.allclose(token_weights(clouds, table), torch.tensor([0.0, math.log(1), math.log(1), 0.0]))
