"""prepare_pairs: IDF per side, token filters and aggregations over layers, each checked against
transformers and counts done by hand (no moverkit code in the expectations)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from moverkit._core import PairOptions, encode_texts, get_encoder, prepare_pairs
from moverkit._core.call import TokenDrop
from moverkit._core.call.pair_options import aggregated_layers
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.request import EncoderRequest


def _idf(tokenizer, corpus):
    """log((N + 1) / (df + 1)) over ``corpus``, every text one document."""
    documents = [set(tokenizer(text)["input_ids"]) for text in corpus]
    return lambda token_id: math.log((len(documents) + 1) / (sum(token_id in d for d in documents) + 1))


def _rows(data, text):
    i = data.clouds.texts.index(text)
    return slice(int(data.clouds.offsets[i]), int(data.clouds.offsets[i + 1]))


def _expected(tokenizer, text, weight):
    """Per token of ``text`` ([CLS] ... [SEP]): 0 for the two special tokens, else ``weight(id)``."""
    ids = tokenizer(text)["input_ids"]
    return [0.0] + [weight(i) for i in ids[1:-1]] + [0.0]


PREDICTIONS = ["a cat sat", "a dog sat", "the bird"]
# The first prediction has two references: it is still one document of the predictions' IDF,
# while each of its references is one document of the references' IDF.
REFERENCES = [["the cat", "a cat"], "the dog ran", "the bird sang"]
PAIR_REFERENCES = ["the cat", "a cat", "the dog ran", "the bird sang"]


def test_prediction_idf_true_fits_idf_on_the_predictions(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    data = prepare_pairs(
        PREDICTIONS,
        REFERENCES,
        EncoderRequest(model_type=tiny_model_path),
        Centering(),
        PairOptions(idf=True, prediction_idf=True),
    )
    pred_idf, ref_idf = _idf(tokenizer, PREDICTIONS), _idf(tokenizer, PAIR_REFERENCES)
    # "a" is in 2 of 3 predictions (log(4/3)) but in 1 of 4 references (log(5/2)).
    a = tokenizer.convert_tokens_to_ids("a")
    assert pred_idf(a) == pytest.approx(math.log(4 / 3)) and ref_idf(a) == pytest.approx(math.log(5 / 2))
    for text in PREDICTIONS:
        got = data.pred_weights[_rows(data, text)].tolist()
        assert got == pytest.approx(_expected(tokenizer, text, pred_idf)), text
    for text in PAIR_REFERENCES:
        got = data.ref_weights[_rows(data, text)].tolist()
        assert got == pytest.approx(_expected(tokenizer, text, ref_idf)), text


def test_prediction_idf_none_reuses_the_reference_weights_and_false_gives_one(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    same = prepare_pairs(
        PREDICTIONS, REFERENCES, EncoderRequest(model_type=tiny_model_path), Centering(), PairOptions(idf=True)
    )
    assert torch.equal(same.pred_weights, same.ref_weights)
    ref_idf = _idf(tokenizer, PAIR_REFERENCES)
    assert same.pred_weights[_rows(same, "a cat sat")].tolist() == pytest.approx(
        _expected(tokenizer, "a cat sat", ref_idf)
    )
    ones = prepare_pairs(
        PREDICTIONS,
        REFERENCES,
        EncoderRequest(model_type=tiny_model_path),
        Centering(),
        PairOptions(idf=True, prediction_idf=False),
    )
    assert ones.pred_weights[_rows(ones, "a dog sat")].tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert torch.equal(ones.ref_weights, same.ref_weights)


def test_drop_tokens_weighs_zero_on_both_sides(tiny_model_path):
    data = prepare_pairs(
        ["a cat sat"],
        ["the cat"],
        EncoderRequest(model_type=tiny_model_path),
        Centering(),
        PairOptions(drop=TokenDrop(stop_words=("cat",))),
    )
    pred, ref = _rows(data, "a cat sat"), _rows(data, "the cat")
    assert data.kept[pred].tolist() == [True, True, False, True, True]
    assert data.kept[ref].tolist() == [True, True, False, True]
    assert data.pred_weights[pred].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert data.ref_weights[ref].tolist() == [0.0, 1.0, 0.0, 0.0]
    # no filter: every token kept
    assert bool(
        prepare_pairs(["a cat sat"], ["the cat"], EncoderRequest(model_type=tiny_model_path), Centering()).kept.all()
    )


def test_the_token_drop_reads_pieces_punctuation_and_stop_words_as_moverscore_s_release():
    """The release's filters: a WordPiece continuation (##), a token of punctuation only, a stop
    word; special tokens are never dropped (they weigh 0 already)."""
    tokenizer = get_encoder().tokenizer
    tokens = ["[CLS]", "the", "un", "##believ", "##able", "cat", "...", "!", "[SEP]"]
    special = [True] + [False] * 7 + [True]
    drop = TokenDrop(remove_subwords=True, remove_punctuation=True, stop_words=("the",))
    assert drop.dropped(tokens, special, tokenizer) == [False, True, False, True, True, False, True, True, False]
    assert TokenDrop().dropped(tokens, special, tokenizer) == [False] * 9


def test_layer_aggregation_centers_each_layer_then_aggregates(tiny_model_path):
    # Sentence centering by hand: each layer's vectors minus the mean of the text's non-special
    # tokens, scaled to unit length; then the aggregation (here: layer 1 and layer 3 side by side).
    predictions, references = ["the cat sat on the mat", "a dog"], ["a cat was on the mat", "the dog barked"]
    data = prepare_pairs(
        predictions,
        references,
        EncoderRequest(model_type=tiny_model_path, num_layers=-1),
        Centering("sentence"),
        PairOptions(layers=(1, 3), layer_aggregation="power_means"),
    )
    assert data.layers == (1, 3) and data.clouds.vectors.shape == (int(data.clouds.offsets[-1]), 3 * 32)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModel.from_pretrained(tiny_model_path).eval()
    for text in predictions + references:
        with torch.no_grad():
            hidden = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states
        parts = []
        for layer in (1, 3):
            h = hidden[layer][0]
            centered = h - h[1:-1].mean(0)  # [CLS] and [SEP] left out of the mean
            parts.append(torch.nn.functional.normalize(centered, dim=-1))
        z = torch.stack(parts)  # the power means of Eq. 5: min, mean, max over the layers
        expected = torch.cat([z.amin(0), z.mean(0), z.amax(0)], -1)
        assert torch.allclose(data.clouds.vectors[_rows(data, text)], expected, atol=1e-5), text


def test_layers_as_a_count_are_the_last_block_outputs(tiny_model_path):
    assert aggregated_layers(SimpleNamespace(layer=12), 5) == (8, 9, 10, 11, 12)
    assert aggregated_layers(SimpleNamespace(layer=6), 5) == (2, 3, 4, 5, 6)
    assert aggregated_layers(SimpleNamespace(layer=3), 5) == (1, 2, 3)  # fewer blocks: all, not the embeddings
    mean = prepare_pairs(
        ["a cat"],
        ["the cat"],
        EncoderRequest(model_type=tiny_model_path),
        Centering(),
        PairOptions(layers=2, layer_aggregation="power_means"),
    )
    assert mean.layers == (2, 3)
    single = prepare_pairs(
        ["a cat"], ["the cat"], EncoderRequest(model_type=tiny_model_path, num_layers=-1), Centering()
    )
    assert single.layers == (3,)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"layers": 0, "layer_aggregation": "power_means"}, ValueError, "layers must be an int >= 1, got 0"),
        ({"layers": 2.0, "layer_aggregation": "power_means"}, TypeError, "layers must be an int >= 1, got 2.0"),
        ({"layers": [4], "layer_aggregation": "power_means"}, ValueError, "layers must be ints in [0, 3]"),
        ({"layers": 2}, ValueError, "layers and layer_aggregation go together"),
        ({"layers": 2, "layer_aggregation": "median"}, ValueError, "layer_aggregation must be one of 'power_means'"),
        ({"layer_aggregation": "power_means"}, ValueError, "layers and layer_aggregation go together"),
        (
            {"layers": 2, "layer_aggregation": "power_means", "centering": "corpus"},
            ValueError,
            "aggregation over layers",
        ),
        ({"centering": "mean"}, ValueError, "centering must be one of"),
        ({"centering": 1}, TypeError, "centering must be one of"),
        ({"prediction_idf": "yes"}, TypeError, "idf must be True, False or a dict"),
    ],
)
def test_bad_options_are_clear_errors(tiny_model_path, kwargs, error, message):
    kwargs = dict(kwargs)
    mode = kwargs.pop("centering", "none")
    request = EncoderRequest(model_type=tiny_model_path, num_layers=-1)
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        prepare_pairs(["a cat"], ["the cat"], request, Centering(mode), PairOptions(**kwargs))


def test_encoder_keeps_requested_layers_from_the_same_pass(tiny_model_path):
    texts = ["a short one", "and a somewhat longer text than that"]
    encoder = get_encoder(tiny_model_path, -1)
    plain = encode_texts(encoder, texts, EncoderRequest())
    layered = encode_texts(encoder, texts, EncoderRequest(), layers=[1, 3])
    assert torch.equal(plain.vectors, layered.vectors) and plain.layer_vectors is None
    assert torch.equal(layered.layer_vectors[1], layered.vectors) and layered.layers == (1, 3)
    model = AutoModel.from_pretrained(tiny_model_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    with torch.no_grad():
        hidden = model(**tokenizer(texts[1], return_tensors="pt"), output_hidden_states=True).hidden_states
    rows = slice(int(layered.offsets[1]), int(layered.offsets[2]))
    assert torch.allclose(layered.layer_vectors[0, rows], hidden[1][0], atol=1e-5)
    with pytest.raises(ValueError, match="layers must be ints in \\[0, 2\\]"):
        encode_texts(get_encoder(tiny_model_path, 2), texts, EncoderRequest(), layers=[3])
