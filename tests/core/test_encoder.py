"""The encoder: layer choice, truncation of the model, tokens, devices, any local path."""

from __future__ import annotations

import types
import warnings

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from moverkit._core import (
    DEFAULT_MODEL,
    MODEL_LAYERS,
    embedded_model_path,
    encode_texts,
    get_encoder,
    resolve_device,
    tokenize,
)
from moverkit._core.encoding.models import load_encoder
from moverkit._core.encoding.request import EncoderRequest


def _hidden_states(path, text):
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    with torch.no_grad():
        return model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states


@pytest.mark.parametrize("num_layers, index", [(None, 3), (1, 1), (0, 0), (-1, 3), (-2, 2)])
def test_layer_k_is_the_output_of_block_k(tiny_model_path, num_layers, index):
    encoder = get_encoder(tiny_model_path, num_layers)
    clouds = encode_texts(encoder, ["the cat sat on the mat"], EncoderRequest())
    expected = _hidden_states(tiny_model_path, "the cat sat on the mat")[index][0]
    torch.testing.assert_close(clouds.vectors, expected, atol=1e-5, rtol=1e-5)
    assert encoder.layer == index


def test_the_model_is_cut_after_the_layer_used(tiny_model_path):
    encoder = get_encoder(tiny_model_path, 1)
    assert len(encoder.model.encoder.layer) == 1
    assert not encoder.hidden_states_only


def test_embedded_default_and_its_layer():
    encoder = get_encoder()
    assert encoder.name == DEFAULT_MODEL
    assert encoder.layer == MODEL_LAYERS[DEFAULT_MODEL] == 6
    assert get_encoder(DEFAULT_MODEL) is encoder  # one encoder per (model, layer, device)
    assert get_encoder(embedded_model_path()).name == DEFAULT_MODEL


@pytest.mark.parametrize("bad", [7, -8, 2.5])
def test_layers_out_of_range_are_refused(bad):
    with pytest.raises((ValueError, TypeError), match="num_layers"):
        get_encoder(None, bad)


def test_special_tokens_are_marked_but_unknown_tokens_are_not():
    encoder = get_encoder()
    clouds = encode_texts(encoder, ["hello 朗兹曼", ""], EncoderRequest())
    tokens = clouds.tokens(0)
    special = clouds.special[: len(tokens)].tolist()
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert special[0] and special[-1]
    assert "[UNK]" in tokens and not special[tokens.index("[UNK]")]
    assert clouds.scored_tokens(1) == []  # an empty text is [CLS] [SEP]


def test_texts_keep_their_order_whatever_the_length_sorting():
    encoder = get_encoder()
    texts = ["short", "a much longer text than the first one", "mid length text"]
    together = encode_texts(encoder, texts, EncoderRequest(batch_size=2))
    for i, text in enumerate(texts):
        alone = encode_texts(encoder, [text], EncoderRequest())
        rows = together.vectors[together.offsets[i] : together.offsets[i + 1]]
        torch.testing.assert_close(rows, alone.vectors, atol=1e-5, rtol=1e-4)


def test_max_length_is_capped_by_the_position_table():
    encoder = get_encoder()
    assert encoder.max_length == 512
    with pytest.warns(UserWarning, match="1 of 1 texts are longer than 512 tokens"):
        ids, _ = tokenize(encoder, ["word " * 600], max_length=10000)
    assert len(ids[0]) == 512


def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    if torch.cuda.device_count() > 1:
        assert resolve_device(1) == torch.device("cuda", 1)
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device"):
        resolve_device("gpu please")


def test_unknown_local_path_or_type_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="model_type"):
        get_encoder(3.14)
    with pytest.raises(ValueError, match="could not be loaded"):
        get_encoder(str(tmp_path))  # an empty folder is no model


@pytest.mark.slow
def test_one_registry_for_token_and_sentence_encoders_and_one_release(tiny_model_path):
    import moverkit
    from moverkit._core import get_sentence_encoder, release
    from moverkit._core.encoding.models import loaded_models

    assert moverkit.release is release
    token = get_encoder(tiny_model_path, 1)
    sentence = get_sentence_encoder(tiny_model_path)
    assert get_encoder(tiny_model_path, 1) is token and get_sentence_encoder(tiny_model_path) is sentence
    assert len(loaded_models()) >= 2
    moverkit.release()
    assert loaded_models() == []
    assert get_encoder(tiny_model_path, 1) is not token  # loaded again after release


def test_one_encoder_per_cut_whatever_names_it(tiny_model_path):
    """``None``, ``-1`` and ``6`` name layer 6 of the embedded model: one encoder, so one copy of
    the weights and one set of clouds in the cache (moverscore's last layer, centered_bertscore's default)."""
    assert get_encoder() is get_encoder(num_layers=-1) is get_encoder(num_layers=6)
    assert get_encoder(num_layers=5).layer == 5 and get_encoder(num_layers=5) is not get_encoder()
    n = get_encoder(tiny_model_path, -1).n_layers
    assert get_encoder(tiny_model_path, n) is get_encoder(tiny_model_path, -1)
    assert get_encoder(tiny_model_path, -2) is get_encoder(tiny_model_path, n - 1)
    with pytest.raises(ValueError, match="num_layers must be in"):
        get_encoder(num_layers=7)


def test_a_folder_written_over_with_a_deeper_model_has_its_blocks_read_again(tiny_model_path, tmp_path):
    """The registry reads a config's block count once per model name; a local folder's name holds
    its weights' digest, so the same path with other weights is read again, not refused by the
    first model's count."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    shape = {"vocab_size": tokenizer.vocab_size, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32}
    folder = tmp_path / "written-over"
    for blocks in (2, 4):
        BertModel(BertConfig(num_hidden_layers=blocks, **shape)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        assert get_encoder(str(folder), blocks).layer == blocks


@pytest.fixture(scope="module")
def nan_model_path(tiny_model_path, tmp_path_factory):
    """The tiny random model with one weight matrix of layer 2 set to NaN, as a fine-tuning that
    diverged leaves it: every vector from layer 2 on is NaN."""
    folder = tmp_path_factory.mktemp("nan-bert")
    model = AutoModel.from_pretrained(tiny_model_path)
    with torch.no_grad():
        model.encoder.layer[1].output.dense.weight.fill_(float("nan"))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_path).save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("name", ["centered_bertscore", "twmd", "moverscore", "lazy_emd", "sbertscore"])
def test_a_model_whose_outputs_are_not_finite_is_refused_by_name(nan_model_path, name):
    """Such a model scored silently (centered_bertscore NaN, twmd 0.0, moverscore 1.0): every
    token metric now refuses it with a ValueError naming the model; moverscore reads several
    layers from one forward pass (forward_layers), the others one."""
    import importlib

    metric = getattr(importlib.import_module(f"moverkit.functional.{name}"), name)
    kwargs = {"centering": "none"} if name in ("centered_bertscore", "twmd") else {}
    with pytest.raises(ValueError, match=rf"outputs of model_type='{nan_model_path}' .* are not finite"):
        metric(
            ["the cat sat on the mat", "a dog"], ["a cat sat on a mat", "the dog"], model_type=nan_model_path, **kwargs
        )


@pytest.mark.slow
def test_non_finite_outputs_are_found_in_any_batch_and_layer(nan_model_path):
    from moverkit._core.encoding.encoder import NonFiniteOutputs

    # Layers 0 and 1 are finite; layer 2 and 3 are not, whichever layer the encoder is cut after.
    texts = ["short", "a much longer text than the first one", "mid length text"]
    finite = encode_texts(get_encoder(nan_model_path, 1), texts, EncoderRequest(batch_size=1), layers=[0, 1])
    assert torch.isfinite(finite.vectors).all() and torch.isfinite(finite.layer_vectors).all()
    with pytest.raises(NonFiniteOutputs, match="not finite"):
        encode_texts(get_encoder(nan_model_path, 3), texts, EncoderRequest(batch_size=2))
    with pytest.raises(NonFiniteOutputs, match="not finite"):
        encode_texts(get_encoder(nan_model_path), texts, EncoderRequest(batch_size=2), layers=[0, 2])
    assert issubclass(NonFiniteOutputs, ValueError)


@pytest.mark.slow
def test_a_folder_is_identified_by_what_it_holds_not_by_its_name(tmp_path, tiny_model_path):
    """Issue 51, defect 7: the layer table was matched against a folder's name, so the same weights
    in a folder named ``all_mpnet_base_v2`` got the last layer and in one named
    ``all-mpnet-base-v2`` layer 10, and any model in a folder of that name took layer 10. A folder
    now takes a table entry only by its weights (:data:`KNOWN_WEIGHTS`) or by the Hub id it says it
    was saved from; its name plays no part."""
    import shutil

    from moverkit._core.encoding import resolve_layer

    assert resolve_layer("sentence-transformers/all-mpnet-base-v2", None, 12) == 10
    assert resolve_layer("all-mpnet-base-v2@0123456789", None, 12) == 12  # a name tells nothing
    assert resolve_layer("checkpoint@0123456789", None, 24, origin="roberta-large") == 17  # saved from it
    assert resolve_layer("my-own-model@0123456789", None, 12) == 12  # unknown: the last layer
    assert resolve_layer("checkpoint@0123456789", 4, 24, origin="roberta-large") == 4  # an explicit layer wins

    # A tiny random BERT in a folder named after a model of the table: the last of its 3 layers.
    named = shutil.copytree(tiny_model_path, tmp_path / "roberta-large")
    assert load_encoder(named).layer == 3
    # The embedded model copied to folders of any name: the embedded model, its layer and its name.
    for folder in ("copy", "all_minilm_l6_v2"):
        copy = shutil.copytree(embedded_model_path(), tmp_path / folder)
        encoder = load_encoder(copy)
        assert (encoder.name, encoder.layer) == (DEFAULT_MODEL, 6)


def test_the_weights_fingerprint_is_the_weights_not_how_they_were_saved(tmp_path, tiny_model_path):
    """Stored in float16, the same weights give the same fingerprint; a fine-tuning that moves
    only the last layer gives another."""
    from moverkit._core.encoding.request import weights_fingerprint

    model = AutoModel.from_pretrained(tiny_model_path)
    original = weights_fingerprint(model)
    half = tmp_path / "half"
    AutoModel.from_pretrained(tiny_model_path).half().save_pretrained(half)
    assert weights_fingerprint(AutoModel.from_pretrained(half)) == original
    tuned = AutoModel.from_pretrained(tiny_model_path)
    with torch.no_grad():
        list(tuned.parameters())[-1].add_(0.01)
    assert weights_fingerprint(tuned) != weights_fingerprint(model)


def test_a_hub_cache_snapshot_and_a_saved_config_name_the_model_they_come_from(tmp_path):
    from moverkit._core.encoding.request import saved_from

    snapshot = tmp_path / "hub" / "models--microsoft--deberta-v3-base" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    assert saved_from(str(snapshot), types.SimpleNamespace()) == "microsoft/deberta-v3-base"
    assert saved_from(str(tmp_path), types.SimpleNamespace(_name_or_path="roberta-large")) == "roberta-large"
    assert saved_from(str(tmp_path), types.SimpleNamespace(_name_or_path=str(tmp_path))) is None  # a path, not an id
    assert saved_from(str(tmp_path), types.SimpleNamespace(_name_or_path="")) is None


def test_a_folder_saved_today_takes_the_layer_of_the_known_model_of_its_shape(tmp_path, tiny_model_path, monkeypatch):
    """Issue 60: transformers 5 writes no ``_name_or_path`` into a saved config, so a fine-tuned
    roberta-large saved today said nothing of its origin and got its last layer (24), not 17. A
    folder whose config has the shape of a known model (:data:`KNOWN_SHAPES`: model type, blocks,
    hidden size, heads, feed-forward size, vocabulary) takes that model's layer; its name stays
    its own; an explicit layer wins; any other shape gets its last layer."""
    import json
    import shutil

    from transformers import AutoConfig, BertConfig, RobertaConfig

    from moverkit._core.encoding import request

    saved = tmp_path / "saved"
    AutoModel.from_pretrained(tiny_model_path).save_pretrained(saved)
    assert "_name_or_path" not in json.loads((saved / "config.json").read_text())
    large = RobertaConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    assert request.saved_from(str(saved), large) == "roberta-large"
    assert request.resolve_layer("checkpoint@0123456789", None, 24, request.saved_from(str(saved), large)) == 17
    assert request.resolve_layer("checkpoint@0123456789", 4, 24, request.saved_from(str(saved), large)) == 4
    assert request.saved_from(str(saved), BertConfig()) == "bert-base-uncased"
    assert request.saved_from(str(saved), BertConfig(vocab_size=30523)) is None
    assert request.saved_from(str(saved), AutoConfig.from_pretrained(saved)) is None  # _name_or_path: the folder

    # The whole load, for a tiny folder whose shape stands in for a known model's.
    config = AutoConfig.from_pretrained(tiny_model_path)
    monkeypatch.setitem(request.KNOWN_SHAPES, request.config_shape(config), "tiny-known")
    monkeypatch.setitem(request.MODEL_LAYERS, "tiny-known", 2)
    encoder = load_encoder(shutil.copytree(tiny_model_path, tmp_path / "fine-tuned"))
    assert encoder.layer == 2 and encoder.name.startswith("local@")  # named by what it holds, not the shape


def _transformers_ids(tokenizer, texts, limit):
    """Token ids and special-token masks as transformers' own call gives them (the oracle of
    :meth:`moverkit._core.encoding.tokens.CallTokenizer.tokenize` on the Rust copy)."""
    encoded = tokenizer(
        [t.strip() for t in texts],
        add_special_tokens=True,
        truncation=limit is not None,
        max_length=limit,
        return_special_tokens_mask=True,
        split_special_tokens=True,
    )
    return encoded["input_ids"], encoded["special_tokens_mask"]


def _fuzzed_texts(seed=0, n=1500):
    import random

    rng = random.Random(seed)
    pieces = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "<s>", "</s>", "<unk>", " ", "  ", "\t", "\n", "é", "ß", "中文",
              "日本語", "العربية", "עברית", "🙂", "👩‍👩‍👧", "\u0301", "\x00", "\x1c", "\u200b", "ﬁ", "İ", "a", "word",
              "...", "'", '"', "(", "Dr.", "3.50"]  # fmt: skip
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(n)]
    return texts + ["", " ", "\n\t ", "x " * 700, "[CLS]" * 300]


def _rust_and_transformers_agree(tokenizer, texts, encoder_like):
    from moverkit._core.encoding.tokens import CallTokenizer

    for limit in (None, 512, 16, 4):
        expected = _transformers_ids(tokenizer, texts, limit)
        long_texts = "window" if limit is None else "truncate"
        tokens = CallTokenizer.of(encoder_like, limit, long_texts).tokenize(texts)  # not closed: no warning
        assert (tokens.ids, tokens.special) == expected, limit


@pytest.mark.slow
def test_rust_tokenization_equals_transformers_call_on_every_wmt17_text_and_fuzz(wmt17_full):
    """Issue 45: the Rust batch call gives the ids and special-token masks of transformers' call
    (split_special_tokens=True, truncation at the limit) on the 4,982 distinct WMT17 texts and on
    fuzzed texts: special tokens spelt in user text, empty, long, every script."""
    encoder = get_encoder(None, None, "cpu")
    texts = list(dict.fromkeys(wmt17_full.predictions + wmt17_full.references))
    assert len(texts) == 4982
    _rust_and_transformers_agree(encoder.tokenizer, texts + _fuzzed_texts(), encoder)


def test_rust_tokenization_of_a_byte_level_bpe_with_a_prefix_space(tmp_path):
    """A RoBERTa-like tokenizer (byte-level BPE, ``add_prefix_space=True`` as the encoder loads it):
    the same ids as transformers' call, the special tokens <s> </s> marked."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    trained = ByteLevelBPETokenizer()
    corpus = ["the cat sat on the mat", "stocks fell sharply", "中文 and العربية 🙂"] * 50 + _fuzzed_texts(1, 200)
    trained.train_from_iterator(corpus, vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    trained.save_model(str(tmp_path))
    tokenizer = RobertaTokenizerFast(
        vocab_file=str(tmp_path / "vocab.json"), merges_file=str(tmp_path / "merges.txt"), add_prefix_space=True
    )
    encoder_like = types.SimpleNamespace(tokenizer=tokenizer, name="tiny-roberta", max_length=512)
    _rust_and_transformers_agree(tokenizer, corpus[:100] + _fuzzed_texts(2, 300), encoder_like)


def test_truncation_is_counted_once_from_the_rust_encodings():
    from moverkit._core.encoding.tokens import CallTokenizer

    tokenizer = CallTokenizer.of(get_encoder(None, None, "cpu"), 8)
    texts = ["one two three four five six seven eight", "short", "a " * 50]
    tokens = tokenizer.tokenize(texts)
    tokenizer.tokenize(texts[:1])  # the same text cut again counts once
    assert [len(row) for row in tokens.ids] == [8, 3, 8] and tokens.truncated == 2
    assert tokens.special[1] == [1, 0, 1]
    with pytest.warns(UserWarning, match="2 of 3 texts are longer than 8 tokens"):
        tokenizer.close(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tokenizer.close(3)  # given once


@pytest.mark.slow
def test_the_square_mask_gives_the_model_s_own_vectors_without_a_host_read(wmt_pairs):
    """Issue 45: a padded batch's mask goes in as the (batch, 1, length, length) mask transformers
    would build, so its SDPA attention does not read whether the batch holds padding; the
    vectors of the real tokens are the (batch, length) mask's, bit for bit, whoever calls the
    model (the token encoder, and sentence-transformers' modules as the sentence encoder calls
    them). The model itself is not changed: no ``forward`` of its own."""
    import copy

    from benchmarks.host import DispatchCounter
    from moverkit._core.encoding.sentences import get_sentence_encoder

    encoder = get_encoder(None, None, "cpu")
    assert encoder.square_mask == (encoder.model.config._attn_implementation == "sdpa")
    plain = AutoModel.from_pretrained(embedded_model_path()).eval()  # not wrapped
    batch = encoder.tokenizer(list(wmt_pairs[0][:16]), padding=True, return_tensors="pt")
    mask = batch["attention_mask"]
    assert not bool(mask.all())  # padded
    sentences = get_sentence_encoder(None, "cpu")
    assert sentences.square_mask
    assert "forward" not in vars(encoder.model) and "forward" not in vars(sentences.model[0].auto_model)
    with torch.no_grad():
        flat = plain(**batch, output_hidden_states=True).hidden_states[encoder.layer]
        counter = DispatchCounter()
        with counter:
            square = encoder.forward(batch["input_ids"], mask)
            pooled = sentences.embed({"input_ids": batch["input_ids"], "attention_mask": mask})
        copied = copy.deepcopy(encoder).forward(batch["input_ids"], mask)
        expected = torch.nn.functional.normalize(
            (plain(**batch)[0] * mask[..., None]).sum(1) / mask.sum(1, keepdim=True), dim=-1
        )
    assert torch.equal(flat[mask.bool()], square[mask.bool()])
    assert torch.equal(copied, square)
    assert torch.allclose(pooled, expected, atol=1e-6)  # mean pooling of the 2-D mask
    assert counter.reads == 0


class _MaskReader(torch.nn.Module):
    """A stand-in model with SDPA in its config that reads a 4-D mask as ``reads`` says."""

    def __init__(self, reads):
        super().__init__()
        self.config = types.SimpleNamespace(_attn_implementation="sdpa")
        self.embed = torch.nn.Embedding(8, 4)
        self.reads = reads

    def forward(self, input_ids, attention_mask):
        out = self.embed(input_ids)
        if attention_mask.dim() == 4:
            out = self.reads(out, attention_mask)
        return (out,)


def _refuse(out, mask):
    raise ValueError("Wrong shape for input_ids (shape torch.Size([2, 4])) or attention_mask")


@pytest.mark.parametrize(
    "reads, takes",
    [
        (lambda out, mask: out, True),  # read as its own: the same vectors
        (lambda out, mask: out + mask.float().mean(), False),  # added to the scores (eager's way)
        (_refuse, False),  # transformers 4's BERT refuses a 4-D mask
    ],
)
def test_the_load_time_probe_takes_the_square_mask_only_where_it_gives_the_same_vectors(reads, takes):
    from moverkit._core.encoding.architecture import takes_square_mask

    assert takes_square_mask(_MaskReader(reads), torch.device("cpu")) is takes


def test_eager_attention_keeps_the_flat_mask(tiny_model_path):
    from moverkit._core.encoding.architecture import takes_square_mask

    eager = AutoModel.from_pretrained(tiny_model_path, attn_implementation="eager").eval()
    sdpa = AutoModel.from_pretrained(tiny_model_path, attn_implementation="sdpa").eval()
    assert not takes_square_mask(eager, torch.device("cpu"))
    assert takes_square_mask(sdpa, torch.device("cpu"))


def test_truncated_counts_the_texts_cut_at_the_limit_and_none_without_one():
    from moverkit._core.encoding.tokens import CallTokenizer

    encoder = get_encoder(None, None, "cpu")
    texts = ["a cat", "a cat sat on the mat", "the dog"]  # 4, 8 and 4 tokens with [CLS], [SEP]
    assert CallTokenizer.of(encoder, 4).tokenize(texts).truncated == 1  # "a cat" fits at exactly the limit
    assert CallTokenizer.of(encoder, 4, "window").tokenize(texts).truncated == 0  # windows: nothing cut


def test_the_rust_copy_is_the_tokenizer_as_it_is_when_the_call_starts(tmp_path):
    """Issue 52: a token added to the tokenizer, or its truncation side changed, after an earlier
    call, is seen by the next call (its copy is keyed by them), and the user's tokenizer keeps its
    own settings."""
    from moverkit._core.encoding.tokens import CallTokenizer

    encoder = load_encoder(None, None, "cpu")
    text = "one two three four five six seven eight nine ten"
    assert CallTokenizer.of(encoder, 6).tokenize([text]).ids[0][1:-1] == encoder.tokenizer(text)["input_ids"][1:5]
    encoder.tokenizer.truncation_side = "left"
    assert CallTokenizer.of(encoder, 6).tokenize([text]).ids[0][1:-1] == encoder.tokenizer(text)["input_ids"][-5:-1]
    encoder.tokenizer.add_tokens(["zzqx"])
    ids = CallTokenizer.of(encoder, 16).tokenize(["a zzqx b"]).ids[0]
    assert encoder.tokenizer.convert_tokens_to_ids("zzqx") in ids
    assert (
        encoder.tokenizer.backend_tokenizer.truncation is None and encoder.tokenizer.backend_tokenizer.padding is None
    )
