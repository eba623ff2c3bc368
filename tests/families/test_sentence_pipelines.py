"""sbertscore's sentence vectors are ``SentenceTransformer(folder).encode()``'s (issue 66, item 2).

Tiny seeded sentence-transformers pipelines, built here the way a user builds one (a tiny BERT of
the family matrix wrapped in sentence-transformers' ``Transformer``, a ``Pooling``, ``Dense`` and
``Normalize`` modules, prompts with a default, a chat template, ``truncate_dim``) and saved with
``save()``: for each, moverkit's sentence vectors, and sbertscore's F1 of two one-sentence texts
(the cosine of their vectors: no centering, no rescaling), are those of sentence-transformers'
own ``encode`` of the folder, at every batch size. ``prompt_name`` and ``prompt`` are
``encode``'s; the cache of sentence vectors keys on the prompt. A checkpoint that loads with its
encoder's weights missing (Marian under sentence-transformers 6), and a model whose token vectors
move with padding (ConvBERT), are refused.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from families import models
from moverkit import MoverkitWarning
from moverkit._core import encode_sentences, get_sentence_encoder, split_sentences
from moverkit._core.encoding import cache_enabled, sentence_truncations
from moverkit._core.encoding.cache import cache_info
from moverkit._core.encoding.request import EncoderRequest
from moverkit.functional.sbertscore import sbertscore

TOL = 1e-6
BATCH_SIZES = (1, 3, 64)

PROMPTS = {"query": "query: ", "passage": "passage: "}
CHAT_TEMPLATE = "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"

PIPELINES = {
    "cls-dense-normalize": {"pooling": {"pooling_mode": "cls"}, "dense": True, "normalize": True},
    "max": {"pooling": {"pooling_mode": "max"}},
    "weighted-mean": {"pooling": {"pooling_mode": "weightedmean"}},
    "last-token-left-padding": {
        "backbone": "qwen2",
        "tokenizer": {"padding_side": "left"},
        "pooling": {"pooling_mode": "lasttoken"},
    },
    "default-prompt-left-out": {
        "pooling": {"pooling_mode": "mean", "include_prompt": False},
        "prompts": PROMPTS,
        "default_prompt_name": "query",
    },
    "chat-template": {
        "tokenizer": {"chat_template": CHAT_TEMPLATE},
        "prompts": PROMPTS,
        "default_prompt_name": "query",
    },
    "truncate-dim": {"truncate_dim": 16, "normalize": True},
}
"""Each pipeline: its backbone (a family of :mod:`families.models`, default ``bert-uncased``), its
pooling (default mean) and the modules and settings of ``SentenceTransformer(modules=...)``."""


def build_pipeline(folder, backbone, *, pooling=None, dense=False, normalize=False, tokenizer=None, **settings):
    """Save the sentence-transformers pipeline of ``backbone`` (a model folder) to ``folder``: its
    ``Transformer`` (its tokenizer given the attributes ``tokenizer``, a chat template or a
    padding side), a ``Pooling`` (``pooling``: its arguments), a seeded ``Dense`` (32 to 16,
    tanh) and ``Normalize`` if asked, and ``settings`` (``prompts``, ``default_prompt_name``,
    ``truncate_dim``)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    if tokenizer:
        from transformers import AutoTokenizer

        backbone = shutil.copytree(backbone, folder.parent / f"{folder.name}-backbone")
        saved = AutoTokenizer.from_pretrained(backbone)
        for key, value in tokenizer.items():
            setattr(saved, key, value)
        saved.save_pretrained(backbone)
    torch.manual_seed(0)
    transformer = Transformer(str(backbone))
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), **(pooling or {}))]
    if dense:
        modules.append(Dense(models.HIDDEN, 16))
    if normalize:
        modules.append(Normalize())
    with models.quiet_transformers():
        SentenceTransformer(modules=modules, device="cpu", **settings).save(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, family_model):
    """``pipeline(name)``: the folder of the pipeline ``name`` of :data:`PIPELINES`, built once."""
    built = {}

    def get(name: str) -> str:
        if name not in built:
            spec = dict(PIPELINES[name])
            backbone = family_model(spec.pop("backbone", "bert-uncased"))
            built[name] = build_pipeline(tmp_path_factory.mktemp("sentence-pipelines") / name, backbone, **spec)
        return built[name]

    return get


def own_model(folder: str):
    """sentence-transformers' own model of ``folder``, loaded apart from moverkit's."""
    from sentence_transformers import SentenceTransformer

    with models.quiet_transformers():
        return SentenceTransformer(folder, device="cpu", local_files_only=True)


def one_sentence_texts() -> list[str]:
    """20 texts that are one sentence each (pysbd keeps them whole): 19 WMT17 texts of many
    lengths, and one of 112 words, longer than the tiny models' 64 tokens."""
    texts = [t for t in models.wmt17_texts() if t.strip() and len(split_sentences(t)) == 1]
    texts.sort(key=len)
    return texts[:: max(1, len(texts) // 19)][:19] + [" ".join(models.SENTENCE.split() * 8)]


def cosines(own, predictions, references, **prompting) -> torch.Tensor:
    """The cosine of ``encode``'s vectors of each prediction and its reference, in float64."""
    pred = own.encode(predictions, convert_to_tensor=True, **prompting).double()
    ref = own.encode(references, convert_to_tensor=True, **prompting).double()
    return torch.nn.functional.cosine_similarity(pred, ref, dim=-1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PIPELINES))
def test_sentence_vectors_and_f1_are_those_of_encode_at_every_batch_size(pipeline, name):
    """Issue 66, item 2: moverkit's sentence vectors are ``encode()``'s at its defaults (the
    default prompt, left out of the pooling where the pipeline says so; the chat template; the
    truncation at ``truncate_dim``; Dense and Normalize), whatever the batch size, and so is the
    F1 of two one-sentence texts: their cosine. Before, the prompt and the chat template were
    dropped, and ``truncate_dim`` raised a shape mismatch."""
    folder = pipeline(name)
    own = own_model(folder)
    texts = one_sentence_texts()
    expected = own.encode(texts, convert_to_tensor=True)
    predictions, references = texts[: len(texts) // 2], texts[len(texts) // 2 :]
    expected_f1 = cosines(own, predictions, references)
    encoder = get_sentence_encoder(folder, "cpu")
    assert encoder.dim == expected.shape[1]
    for batch_size in BATCH_SIZES:
        request = EncoderRequest(batch_size=batch_size, device="cpu")
        with pytest.warns(MoverkitWarning, match="are longer than 64 tokens"):
            tally = sentence_truncations(encoder)
            vectors = encode_sentences(encoder, texts, request, tally)
            tally.close(len(texts))
        assert vectors.shape == expected.shape
        assert float((vectors - expected).abs().max()) <= TOL, (name, batch_size)
        with pytest.warns(MoverkitWarning, match="are longer than 64 tokens"):
            f1 = sbertscore(predictions, references, model_type=folder, batch_size=batch_size, device="cpu")["f1"]
        assert float((torch.tensor(f1, dtype=torch.float64) - expected_f1).abs().max()) <= TOL, (name, batch_size)


@pytest.mark.slow
def test_prompt_name_and_prompt_are_those_of_encode_and_in_the_hashcode(pipeline):
    """``prompt_name`` names one of the folder's prompts and ``prompt`` is a text, as ``encode``
    takes them; either changes the scores and is in the hashcode; the default call's hashcode
    names neither. An unknown name, both at once, or a non-string are refused naming the argument."""
    folder = pipeline("default-prompt-left-out")
    own = own_model(folder)
    predictions, references = ["the council approved a new budget"], ["markets fell sharply on monday"]
    default = sbertscore(predictions, references, model_type=folder, device="cpu")
    assert "prompt" not in default["hashcode"]
    assert default["f1"][0] == pytest.approx(float(cosines(own, predictions, references)[0]), abs=TOL)
    for prompting, tag in (
        ({"prompt_name": "passage"}, "_prompt_name=passage_"),
        ({"prompt": "topic: "}, "_prompt='topic: '_"),
    ):
        result = sbertscore(predictions, references, model_type=folder, device="cpu", **prompting)
        assert result["f1"][0] == pytest.approx(float(cosines(own, predictions, references, **prompting)[0]), abs=TOL)
        assert result["f1"][0] != pytest.approx(default["f1"][0], abs=10 * TOL)
        assert tag in result["hashcode"]
    with pytest.raises(ValueError, match=r"prompt_name='nope' is not a prompt of .*'passage', 'query'"):
        sbertscore(predictions, references, model_type=folder, prompt_name="nope")
    with pytest.raises(ValueError, match="give prompt_name .* or prompt .*, not both"):
        sbertscore(predictions, references, model_type=folder, prompt_name="query", prompt="query: ")
    with pytest.raises(ValueError, match="prompt must be a string or None, not int"):
        sbertscore(predictions, references, model_type=folder, prompt=3)


@pytest.mark.slow
def test_the_cache_of_sentence_vectors_keys_on_the_prompt(pipeline):
    """The same sentence encoded with another prompt is not found in the cache across calls: each
    call scores with its own prompt's vectors, and the second call with the first's prompt finds
    every sentence."""
    folder = pipeline("default-prompt-left-out")
    own = own_model(folder)
    predictions, references = ["the council approved a new budget"], ["markets fell sharply on monday"]
    with cache_enabled("64MB"):
        first = sbertscore(predictions, references, model_type=folder, device="cpu", prompt="alpha: ")
        second = sbertscore(predictions, references, model_type=folder, device="cpu", prompt="beta: ")
        hits = cache_info()["hits"]
        again = sbertscore(predictions, references, model_type=folder, device="cpu", prompt="alpha: ")
        assert cache_info()["hits"] == hits + 2
    assert second["f1"][0] == pytest.approx(float(cosines(own, predictions, references, prompt="beta: ")[0]), abs=TOL)
    assert first["f1"][0] == pytest.approx(float(cosines(own, predictions, references, prompt="alpha: ")[0]), abs=TOL)
    assert again["f1"] == first["f1"]


@pytest.mark.slow
def test_a_sentence_that_its_prompt_takes_past_the_limit_is_counted_as_cut(pipeline):
    """The truncation warning counts the prompt's tokens: a sentence of 64 tokens alone is cut
    once the default prompt ("query: ") goes before it."""
    folder = pipeline("default-prompt-left-out")
    tokenizer = get_sentence_encoder(folder, "cpu").model.tokenizer
    words = models.SENTENCE.split()
    sentence = next(
        text
        for n in range(1, 200)
        if len(tokenizer(text := " ".join(words[i % len(words)] for i in range(n)))["input_ids"]) == 64
    )
    with pytest.warns(MoverkitWarning, match="1 of 1 sentences are longer than 64 tokens"):
        sbertscore([sentence], [sentence], model_type=folder, device="cpu")


@pytest.mark.slow
def test_a_model_whose_vectors_move_with_its_left_padding_is_refused(tmp_path, family_model):
    """A BERT whose tokenizer pads on the left shifts a text's absolute positions by its padding:
    ``encode`` itself gives it other vectors in another batch (by 2.3 here). The padding probe
    pads as the model's tokenizer pads, and refuses it."""
    folder = build_pipeline(
        tmp_path / "bert-left-last-token", family_model("bert-left"), pooling={"pooling_mode": "lasttoken"}
    )
    with models.quiet_transformers(), pytest.raises(ValueError, match=r"token vectors\) gives a text other vectors"):
        get_sentence_encoder(folder, "cpu")


def _tiny_marian(folder, tokenizer):
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=len(tokenizer),
        d_model=models.HIDDEN,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=models.HEADS,
        decoder_attention_heads=models.HEADS,
        encoder_ffn_dim=models.INTERMEDIATE,
        decoder_ffn_dim=models.INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    MarianMTModel(config).eval().save_pretrained(folder)


def _tiny_bert_for_masked_lm(folder, tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=models.HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=models.HEADS,
        intermediate_size=models.INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertForMaskedLM(config).eval().save_pretrained(folder)


def _tiny_convbert(folder, tokenizer):
    from transformers import ConvBertConfig, ConvBertModel

    torch.manual_seed(0)
    config = ConvBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=models.HIDDEN,
        embedding_size=models.HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=models.HEADS,
        intermediate_size=models.INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    ConvBertModel(config).eval().save_pretrained(folder)


def plain_model(tmp_path, family_model, build) -> str:
    """A folder of the model ``build(folder, tokenizer)`` saves, with the tiny BERT's tokenizer:
    a plain transformers checkpoint, which sentence-transformers loads with mean pooling."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(family_model("bert-uncased"))
    folder = tmp_path / build.__name__.strip("_")
    tokenizer.save_pretrained(folder)
    with models.quiet_transformers():
        build(folder, tokenizer)
    return str(folder)


@pytest.mark.slow
def test_a_checkpoint_whose_encoder_loads_without_its_weights_is_refused(tmp_path, family_model):
    """sentence-transformers 6 loads a Marian (or M2M100/NLLB) checkpoint as the bare encoder
    class, whose weight names are not the checkpoint's: every encoder weight is initialised at
    random. The load is refused, naming them. A missing weight the vectors do not read (the
    pooler of a masked-LM checkpoint loaded as the bare model) is no reason to refuse."""
    marian = plain_model(tmp_path, family_model, _tiny_marian)
    with models.quiet_transformers(), pytest.raises(ValueError, match=r"MarianEncoder without weights .*embed_tokens"):
        get_sentence_encoder(marian, "cpu")
    masked_lm = plain_model(tmp_path, family_model, _tiny_bert_for_masked_lm)
    with models.quiet_transformers():
        encoder = get_sentence_encoder(masked_lm, "cpu")
    loaded = encoder.model[0].auto_model.named_parameters()
    assert [n for n, p in loaded if not getattr(p, "_is_hf_initialized", False)] == [  # transformers' record
        "pooler.dense.weight",
        "pooler.dense.bias",
    ]


@pytest.mark.slow
def test_a_model_whose_token_vectors_move_with_padding_is_refused(tmp_path, family_model):
    """ConvBERT's convolutions read padded positions: the token metrics refuse it, and so does
    sbertscore, by the same probe on its token vectors (its mean-pooled sentence vectors move by
    less than the probe's tolerance, yet F1 moved with ``batch_size`` by 8.1e-4)."""
    convbert = plain_model(tmp_path, family_model, _tiny_convbert)
    with models.quiet_transformers(), pytest.raises(ValueError, match=r"token vectors\) gives a text other vectors"):
        get_sentence_encoder(convbert, "cpu")
