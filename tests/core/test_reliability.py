"""Hostile but realistic input to the shared core (issue 12): IDF weights, centering statistics and
their files, max_length, batch_size, device, evaluate's add_batch layouts, and text that spells
special tokens. Each is a correct value or an error that names the argument."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
import torch

import moverkit
from moverkit import functional
from moverkit._core import CenteringStats, check_idf, encode_texts, get_encoder, resolve_device, tokenize
from moverkit._core.base.hardware import available_devices
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.request import EncoderRequest

# ---------------------------------------------------------------------------------------- IDF


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -float("inf"), -0.5])
def test_idf_dict_with_a_nan_infinite_or_negative_weight_is_refused(weight):
    with pytest.raises(ValueError, match=r"idf\['cat'\] must be a finite number >= 0"):
        check_idf({"the": 1.0, "cat": weight})
    with pytest.raises(ValueError, match=r"the default of idf"):
        check_idf(defaultdict(lambda: weight, {"the": 1.0}))


@pytest.mark.parametrize("weight", ["1.0", None, True, [1.0]])
def test_idf_weight_that_is_no_number_is_a_type_error(weight):
    with pytest.raises(TypeError, match=r"idf\['cat'\] must be a finite number >= 0"):
        check_idf({"cat": weight})


def test_admissible_idf_dicts_pass_unchanged():
    table = {"cat": 0.0, 7: 2.5, "mat": np.float32(1.5), "sat": torch.tensor(0.25)}
    assert check_idf(table) is table
    assert check_idf(defaultdict(lambda: math.log(3.0))) is not None
    assert check_idf(True) is True and check_idf(False) is False


def test_prediction_idf_is_named_in_its_own_error(tiny_model_path):
    from moverkit._core import PairOptions, prepare_pairs

    with pytest.raises(ValueError, match=r"prediction_idf\['cat'\]"):
        prepare_pairs(
            ["a cat"],
            ["a cat"],
            EncoderRequest(model_type=tiny_model_path),
            Centering(),
            PairOptions(prediction_idf={"cat": float("nan")}),
        )


# ------------------------------------------------------------------------- centering statistics


def _fields(mean, **over):
    return {"mean": mean, "model": "m", "layer": 2, "n_texts": 3, "n_tokens": 10, **over}


BAD_MEANS = [
    ([0.1, float("nan"), 0.2], "mean holds 1 NaN or infinite value"),
    ([0.1, float("inf"), 0.2], "mean holds 1 NaN or infinite value"),
    ([0.1, 1e300, 0.2], "mean has a coordinate of magnitude 1e\\+300, beyond any hidden state"),
    ([0.1, -2e4, 0.2], "mean has a coordinate of magnitude 2e\\+04, beyond any hidden state"),
    ([], "mean must be a non-empty vector"),
    ([[0.1, 0.2]], "mean must be a non-empty vector"),
]


@pytest.mark.parametrize(("mean", "message"), BAD_MEANS)
def test_a_statistic_with_an_inadmissible_mean_is_refused(mean, message, tmp_path):
    with pytest.raises(ValueError, match=f"centering_stats: {message}"):
        CenteringStats(**_fields(np.array(mean)))
    path = tmp_path / "bad.npz"
    np.savez(path, **{k: np.array(v) for k, v in _fields(mean).items()})
    with pytest.raises(ValueError, match=f"centering_stats file '.*bad.npz': {message}"):
        CenteringStats.load(path)


def test_a_statistic_without_tokens_or_with_a_bad_layer_is_refused():
    with pytest.raises(ValueError, match="centering_stats: n_tokens must be an int >= 1"):
        CenteringStats(**_fields(np.ones(3), n_tokens=0))
    with pytest.raises(ValueError, match="centering_stats: layer must be an int >= -1"):
        CenteringStats(**_fields(np.ones(3), layer=-2))


def test_corpus_centering_refuses_a_nan_statistic_file_before_scoring(tmp_path):
    # The right model and layer, a NaN in the mean: NaN scores before; a named error now.
    stats = moverkit.fit_centering(["the cat sat on the mat", "stocks fell"] + [f"text number {i}" for i in range(8)])
    fields = {"mean": stats.mean.copy(), "model": stats.model, "layer": stats.layer}
    fields.update(n_texts=stats.n_texts, n_tokens=stats.n_tokens)
    fields["mean"][5] = np.nan
    path = tmp_path / "nan.npz"
    np.savez(path, **{k: np.array(v) for k, v in fields.items()})
    with pytest.raises(ValueError, match="centering_stats file .*nan.npz.*NaN"):
        functional.twmd(["a cat"], ["the cat"], centering="corpus", centering_stats=str(path))


def _saved(tmp_path) -> bytes:
    path = tmp_path / "good.npz"
    CenteringStats(**_fields(np.linspace(-1.0, 1.0, 16))).save(path)
    return path.read_bytes()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda good: b"", "is not a statistic written by CenteringStats.save"),
        (lambda good: good[: len(good) // 2], "is not a statistic written by CenteringStats.save"),
        (lambda good: good[:-30], "is not a statistic written by CenteringStats.save"),
        (lambda good: b"mean,model\n0.1,m\n", "is not a statistic written by CenteringStats.save"),
        (lambda good: "npy", "is not a statistic written by CenteringStats.save"),
        (lambda good: "missing", "lacks n_tokens"),
        (lambda good: "text-layer", "layer must be an integer"),
    ],
)
def test_an_unreadable_or_incomplete_statistic_file_is_a_value_error_naming_it(tmp_path, make, message):
    good = _saved(tmp_path)
    path = tmp_path / "stats.npz"
    content = make(good)
    if content == "npy":
        with open(path, "wb") as f:
            np.save(f, np.ones(16))
    elif content == "missing":
        np.savez(path, **{k: np.array(v) for k, v in _fields(np.ones(16)).items() if k != "n_tokens"})
    elif content == "text-layer":
        np.savez(path, **{k: np.array(v) for k, v in _fields(np.ones(16), layer="two").items()})
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=f"centering_stats file '.*stats.npz'.*{message}"):
        CenteringStats.load(path)


def test_a_statistic_round_trips_through_its_file(tmp_path):
    stats = CenteringStats(**_fields(np.linspace(-1.0, 1.0, 16)))
    stats.save(tmp_path / "s.npz")
    loaded = CenteringStats.load(tmp_path / "s.npz")
    assert loaded.digest == stats.digest and (loaded.model, loaded.layer, loaded.n_tokens) == ("m", 2, 10)


def test_fit_centering_takes_any_iterable_of_strings(tiny_model_path):
    texts = ["the cat sat", "stocks fell", "the cat sat"] + [f"text number {i}" for i in range(8)]  # ten distinct
    from_list = moverkit.fit_centering(texts, tiny_model_path, 2)
    from_generator = moverkit.fit_centering((t for t in texts), tiny_model_path, 2)
    np.testing.assert_array_equal(from_generator.mean, from_list.mean)
    assert (from_generator.n_texts, from_generator.n_tokens) == (from_list.n_texts, from_list.n_tokens)


@pytest.mark.parametrize("texts", [["", " "], ["\u200b", "\u200b\u200b"]])
def test_fit_centering_on_texts_without_a_token_is_a_clear_error(tiny_model_path, texts):
    # A zero-width space is not white space to str.strip, but the tokenizer drops it.
    with pytest.raises(ValueError, match="texts hold no token"):
        moverkit.fit_centering(texts, tiny_model_path, 2)


# ------------------------------------------------------------------ max_length, batch_size, device


@pytest.mark.parametrize("max_length", [0, 1, 2, -5])
def test_max_length_too_small_for_one_token_between_the_special_ones_is_refused(max_length):
    encoder = get_encoder()  # BERT-like: [CLS] x [SEP] needs 3
    with pytest.raises(ValueError, match=r"max_length must be an int >= [13]"):
        tokenize(encoder, ["a cat sat on the mat"], max_length=max_length)


def test_max_length_three_keeps_one_token_of_text():
    with pytest.warns(UserWarning, match="1 of 1 texts are longer than 3 tokens and were truncated"):
        ids, special = tokenize(get_encoder(), ["a cat sat on the mat"], max_length=3)
    assert len(ids[0]) == 3 and special[0] == [1, 0, 1]


@pytest.mark.parametrize("bad", ["8", 2.5, True])
def test_max_length_and_batch_size_of_the_wrong_type_are_type_errors(bad):
    encoder = get_encoder()
    with pytest.raises(TypeError, match="max_length"):
        tokenize(encoder, ["a cat"], max_length=bad)
    with pytest.raises(TypeError, match="batch_size"):
        encode_texts(encoder, ["a cat"], EncoderRequest(batch_size=bad))


def test_empty_list_of_texts_encodes_to_no_token():
    clouds = encode_texts(get_encoder(), [], EncoderRequest())
    assert clouds.vectors.shape[0] == 0 and clouds.offsets.tolist() == [0]


@pytest.mark.parametrize("device", ["cuda:99", 99])
def test_a_gpu_beyond_the_count_is_a_value_error_listing_the_devices(device):
    with pytest.raises(ValueError, match=r"device=.*available: cpu"):
        resolve_device(device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_a_value_error_listing_the_devices():
    with pytest.raises(ValueError, match=r"device='cuda': this machine has no cuda device; available: cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="device"):
        get_encoder(None, None, "cuda")  # before any model is loaded


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_mps_without_mps_is_a_value_error():
    with pytest.raises(ValueError, match=r"device='mps': this machine has no mps device"):
        resolve_device("mps")


@pytest.mark.parametrize("device", [-1, True, "gpu please", 2.5])
def test_a_device_that_is_no_device_is_a_value_error(device):
    with pytest.raises(ValueError, match="device must be like 'cpu', 'cuda' or 'cuda:1'"):
        resolve_device(device)


def test_available_devices_are_accepted():
    for device in available_devices():
        assert str(resolve_device(device)).startswith(device.split(":")[0])


# ----------------------------------------------------------------- text that spells special tokens

SPELLED = "[CLS] hello [SEP] [PAD] world [MASK] [UNK]"


def _special_ids(tokenizer) -> set[int]:
    return set(tokenizer.all_special_ids)


@pytest.mark.parametrize("model", ["embedded", "tiny"])
def test_text_spelling_special_tokens_is_tokenized_as_text(model, tiny_model_path):
    encoder = get_encoder(None if model == "embedded" else tiny_model_path)
    ids, special = tokenize(encoder, [SPELLED, "[ cls ] hello [ sep ] [ pad ] world [ mask ] [ unk ]"])
    assert ids[0] == ids[1]  # "[CLS]" is the characters [, c, l, s, ]
    inner = ids[0][1:-1]
    assert not set(inner) & _special_ids(encoder.tokenizer)
    assert special[0] == [1] + [0] * len(inner) + [1]


@pytest.fixture(scope="module")
def tiny_roberta_path(tmp_path_factory):
    """A 2-layer random RoBERTa with a byte-level BPE tokenizer trained on the spot (<s>, </s>, ...)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-roberta")
    bpe = ByteLevelBPETokenizer()
    corpus = ["hello world, the cat sat on the mat.", "stocks fell sharply on monday", "s mask pad unk < > / |"]
    bpe.train_from_iterator(corpus * 20, vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer = RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=66,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    RobertaModel(config).eval().save_pretrained(folder)
    return str(folder)


def test_roberta_like_text_spelling_s_and_mask_is_tokenized_as_text(tiny_roberta_path):
    encoder = get_encoder(tiny_roberta_path)
    ids, special = tokenize(encoder, ["hello <s> world </s> <mask> <pad> <unk>"])
    inner = ids[0][1:-1]
    assert ids[0][0] == encoder.tokenizer.bos_token_id and ids[0][-1] == encoder.tokenizer.eos_token_id
    assert not set(inner) & _special_ids(encoder.tokenizer)
    assert special[0] == [1] + [0] * len(inner) + [1]
    # The minimum max_length also holds for it: <s> x </s>.
    with pytest.raises(ValueError, match="max_length must be an int >= 3"):
        tokenize(encoder, ["hello"], max_length=2)


@pytest.mark.slow
def test_sentence_encoder_tokenizes_spelled_special_tokens_as_text():
    from moverkit._core import encode_sentences, get_sentence_encoder
    from moverkit._core.encoding import sentence_truncations

    encoder = get_sentence_encoder()
    spelled_out = "[ cls ] hello [ sep ] [ pad ] world [ mask ] [ unk ]"
    vectors = encode_sentences(encoder, [SPELLED, spelled_out], EncoderRequest(), sentence_truncations(encoder))
    torch.testing.assert_close(vectors[0], vectors[1], atol=1e-6, rtol=1e-6)


# ------------------------------------------------------------------- scores out of their range

PAIR = (
    [
        "he also criticizes the fruitless &quot; check box checks &quot; in voter registration departments at city hall ."
    ],
    [
        "he also criticises the ineffectual &quot; tick-box inspections &quot; of town hall electoral registration "
        "departments ."
    ],
)  # WMT17 segment 19: at epsilon 1e-6 and 100 iterations it scored 4.4e4 (1.69e10 in the hostile pass)


def test_lazy_emd_above_the_bound_of_its_plan_is_an_error_naming_the_settings():
    """A distance far above :func:`score_bound` (the optimal plan's mass bounds it) passed with
    only a convergence warning."""
    with pytest.raises(
        ValueError, match=r"1 of 1 pairs scored above the bound .*epsilon=1e-06, reg_c=0.23, reg_r=0.31"
    ):
        functional.lazy_emd(*PAIR, epsilon=1e-6, max_iter=100)


def test_lazy_emd_max_iter_is_capped_as_twmds_sinkhorn_iterations():
    """max_iter=10^12 ran unbounded; refused, as twmd's sinkhorn_iterations past its cap."""
    from moverkit.functional.lazy_emd import MAX_ITER

    with pytest.raises(ValueError, match=r"max_iter must be an int >= 1 and <= 100,000 .*got 1000000000000"):
        functional.lazy_emd(*PAIR, max_iter=10**12, epsilon=1e-6)
    assert MAX_ITER == 100_000
