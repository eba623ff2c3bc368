"""The family matrix (issue 51): what moverkit promises holds for every encoder family a user brings.

Every speed path of moverkit (the Rust tokenizer's batch call, the square attention mask, token
budgets, chunks tokenized ahead) was first pinned on one encoder, the embedded all-MiniLM-L6-v2.
Here each family of ``families.models`` (tiny seeded random models with tokenizers trained on the
spot; nothing downloaded) is held to an independent computation:

- the token ids are transformers' own call on the stripped texts (``split_special_tokens=True``),
  at several limits, with the exact truncation count in one warning;
- no text spelling a special token gets a special id;
- layer ``k`` is transformers' ``hidden_states[k]``, block ``k``'s output (the model's own output at the top);
- a text's vectors do not depend on the texts it is batched with;
- ``centered_bertscore(centering="none")`` is BERTScore computed by hand (greedy cosine matching
  in float64 on each text encoded alone) and bert-score's own result where bert-score is right;
  where it is not, the test shows why;
- the five metrics give the same scores at ``batch_size=1``, by default, under the CUDA plan, in
  chunks and with chunks tokenized ahead; no NaN and no score out of its documented range on
  hostile texts; exactly one truncation warning per call.

The quick loop holds a few pairs per family; the ``slow`` tests hold every WMT17 pair of the
sample and every hostile text in every family and metric.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import warnings

import pytest
import torch

from families.models import (
    BLOCK_SPARSE,
    FAMILIES,
    FINAL_NORM,
    GPT2_CUT,
    HOSTILE,
    NO_LIMIT,
    NOT_BERT_SCORE,
    PREFIX_SPACE,
    SENTENCE,
    SPECS,
    T5_SPECIALS,
    greedy_scores,
    quiet_transformers,
    reference_clouds,
    reference_model,
    reference_tokenizer,
    wmt17_pairs,
    wmt17_texts,
)
from moverkit import functional
from moverkit._core.call import streaming, temporary_memory_budget
from moverkit._core.encoding.encoder import encode_texts
from moverkit._core.encoding.models import load_encoder
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.tokens import tokenize

FAMILY = pytest.mark.parametrize("name", FAMILIES)
# The two heaviest slow tests (every metric in every setting on the hostile texts; centered_bertscore
# on every pair) run on one family of each tokenizer kind, attention layout and layer stack: the
# others are held by the quick tests of every family, and the suite stays within CI's time.
REPRESENTATIVE = pytest.mark.parametrize(
    "name",
    ["bert-uncased", "bert-slow", "roberta", "xlm-roberta", "deberta-v2", "modernbert", "albert-shared", "gpt2", "t5"],
)

TRUNCATED = "were truncated"
"""What moverkit's truncation warnings say (token and sentence metrics alike)."""

METRICS = ("twmd", "moverscore", "lazy_emd", "sbertscore", "centered_bertscore")

SCORES = {
    "twmd": ("twmd",),
    "moverscore": ("moverscore",),
    "lazy_emd": ("lazy_emd",),
    "sbertscore": ("precision", "recall", "f1"),
    "centered_bertscore": ("precision", "recall", "f1"),
}

RANGES = {
    "twmd": (-1.0, 1.0),  # metrics/twmd/README.md: normalized twmd in [-1, 1]
    "moverscore": (0.0, 1.0),  # 1/(1+wmd): in (0, 1]
    "lazy_emd": (0.0, math.inf),  # a distance, >= 0
    "sbertscore": (-1.0, 1.0),
    "centered_bertscore": (-1.0, 1.0),
}

LONG = " ".join([SENTENCE] * 10)
"""One sentence of 850 characters without a sentence mark: longer than every family's limit
(512 bytes for ByT5), and one sentence to sbertscore's splitter, so every call truncates it."""

TOLERANCE = 1e-6

QUICK_LIMIT = 32
"""The token limit of the quick loop's metric calls."""


# ------------------------------------------------------------------------------------ helpers


@functools.cache
def _encoder(folder: str, layer: int | None = None):
    return load_encoder(folder, layer)


@functools.cache
def _tokenizer(name: str, folder: str):
    return reference_tokenizer(name, folder)


@functools.cache
def _model(name: str, folder: str, layer: int, cut: bool = False):
    return reference_model(name, folder, layer, cut)


@contextlib.contextmanager
def _recorded():
    """Every warning of the block, recorded (moverkit's are errors elsewhere in the suite)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def _truncation_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if TRUNCATED in str(w.message)]


def _fitting_pairs(name: str, folder: str, n: int) -> tuple[list[str], list[str]]:
    """The first ``n`` WMT17 pairs whose texts both fit the family's limit untruncated
    (bert-score truncates at the tokenizer's own limit, moverkit at the model's)."""
    tokenizer, limit = _tokenizer(name, folder), SPECS[name].limit
    predictions, references = wmt17_pairs()
    chosen = ([], [])
    with quiet_transformers():
        for p, r in zip(predictions, references):
            lengths = [len(ids) for ids in tokenizer([p.strip(), r.strip()], split_special_tokens=True)["input_ids"]]
            if max(lengths) <= limit:
                chosen[0].append(p)
                chosen[1].append(r)
            if len(chosen[0]) == n:
                break
    return chosen


def _hostile(start: str) -> str:
    """The hostile text that starts with ``start``."""
    return next(text for text in HOSTILE if text.startswith(start))


def _quick_pairs(name: str, folder: str) -> tuple[list[str], list[str]]:
    """A few pairs for the quick loop: WMT17 pairs within the limit, :data:`LONG` (truncated in
    every family) against a WMT17 text, Japanese against Arabic, emoji against joined emoji."""
    predictions, references = _fitting_pairs(name, folder, 3)
    return (
        [*predictions, LONG, _hostile("猫"), _hostile("🤖")],
        [*references, references[0], _hostile("مرحبا"), _hostile("👩")],
    )


def _hand_scores(name, folder, layer, predictions, references, *, tokenizer=None, specials_weigh=False, cut=False):
    """BERTScore by hand (:func:`greedy_scores`) on transformers' vectors of ``layer``
    (:func:`reference_model`; ``cut``: of the model cut after it, as bert-score cuts), each text
    alone, truncated at the family's limit: one (P, R, F1) per pair."""
    model, tokenizer = _model(name, folder, layer, cut), tokenizer or _tokenizer(name, folder)
    limit = SPECS[name].limit
    clouds = reference_clouds(model, tokenizer, list(dict.fromkeys(predictions + references)), limit, specials_weigh)
    by_text = dict(zip(dict.fromkeys(predictions + references), clouds))
    return [greedy_scores(by_text[p], by_text[r]) for p, r in zip(predictions, references)]


def _assert_scores_close(actual, expected, what: str, tolerance: float = TOLERANCE) -> None:
    """``actual`` (P, R, F1 lists) within ``tolerance`` of ``expected`` ((P, R, F1) per pair)."""
    worst = max(
        (abs(actual[key][i] - scores[j]), i, key)
        for i, scores in enumerate(expected)
        for j, key in enumerate(("precision", "recall", "f1"))
    )
    assert worst[0] <= tolerance, f"{what}: pair {worst[1]} {worst[2]} off by {worst[0]:.3g}"


def _metric(metric: str, name: str, folder: str, predictions, references, **settings):
    """``metric`` on the pairs with the family's layer (sbertscore has none), no centering
    statistic (``centering="none"`` where the default would need one) and ``settings``: its
    result and the truncation warnings it gave."""
    kwargs = {"model_type": folder}
    if metric != "sbertscore":
        kwargs["num_layers"] = SPECS[name].layer
    if metric in ("twmd", "centered_bertscore"):
        kwargs["centering"] = "none"
    if metric == "moverscore" and name == "byt5":
        kwargs["remove_subwords"] = False  # no word pieces in bytes: moverscore asks for it by name
    with _recorded() as caught:
        out = getattr(functional, metric)(predictions, references, **kwargs, **settings)
    return out, _truncation_warnings(caught)


def _expected_truncations(metric: str, name: str) -> int:
    """Truncation warnings a call holding :data:`LONG` gives: one (ByT5's sentence encoder has
    no limit, so sbertscore truncates nothing there)."""
    return 0 if metric == "sbertscore" and name == "byt5" else 1


# ------------------------------------------------------------------------------------ token ids


LIMITS = (None, 64, 16, 5)


def _as_text(tokenizer, ids: list[int], special_mask: list[int]) -> list[int]:
    """transformers' ids of a text with the promise kept that user text is text: a special id the
    text itself produced (a Unigram vocabulary segments a written ``<s>`` into its special piece,
    even with ``split_special_tokens=True``) read as the unknown token, as moverkit reads it."""
    forbidden = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    return [tokenizer.unk_token_id if not m and i in forbidden else i for i, m in zip(ids, special_mask)]


def _check_ids(name: str, folder: str, texts: list[str], limits) -> None:
    """moverkit's ids and special-token masks of ``texts`` at each of ``limits`` (``None``: the
    model's) are the reference tokenizer's (:func:`_as_text`), with one warning of the exact
    truncation count."""
    spec = SPECS[name]
    encoder, reference = _encoder(folder), _tokenizer(name, folder)
    stripped = [t.strip() for t in texts]
    minimum = reference.num_special_tokens_to_add(pair=False) + 1
    assert encoder.max_length == spec.limit
    assert encoder.tokenizer.is_fast == spec.rust  # the family is the kind it says
    with quiet_transformers():
        whole = [len(ids) for ids in reference(stripped, split_special_tokens=True)["input_ids"]]
    for asked in limits:
        max_length = None if asked is None else max(asked, minimum)
        limit = spec.limit if max_length is None else min(max_length, spec.limit)
        expected = reference(
            stripped, truncation=True, max_length=limit, split_special_tokens=True, return_special_tokens_mask=True
        )
        with _recorded() as caught:
            ids, special = tokenize(encoder, texts, max_length)
        expected["input_ids"] = [
            _as_text(reference, row, mask) for row, mask in zip(expected["input_ids"], expected["special_tokens_mask"])
        ]
        wrong = [i for i, (a, b) in enumerate(zip(ids, expected["input_ids"])) if a != b]
        assert not wrong and len(ids) == len(texts), (
            f"limit {limit}: {len(wrong)} texts differ, first {texts[wrong[0]][:60]!r}: "
            f"{encoder.tokenizer.convert_ids_to_tokens(ids[wrong[0]])} != "
            f"{reference.convert_ids_to_tokens(expected['input_ids'][wrong[0]])}"
        )
        assert special == expected["special_tokens_mask"], f"limit {limit}: special-token masks differ"
        n_cut = sum(n > limit for n in whole)
        messages = _truncation_warnings(caught)
        assert len(messages) == (1 if n_cut else 0), f"limit {limit}: {messages}"
        if n_cut:
            assert messages[0].startswith(f"{n_cut} of {len(texts)} texts are longer than {limit} tokens")
    if minimum > 1:
        with pytest.raises(ValueError, match=f"max_length must be an int >= {minimum}"):
            tokenize(encoder, ["hello"], minimum - 1)


@pytest.mark.slow
@FAMILY
def test_ids_equal_transformers_call_with_the_exact_truncation_count(family_model, name):
    """moverkit's ids and special-token mask are transformers' own call on the stripped texts
    (``truncation=True, max_length=L, split_special_tokens=True``) for 100 WMT17 texts and the
    hostile ones, at the model's limit (the tokenizer's ``model_max_length`` capped by the
    position table), 16 and 5 (raised to the minimum moverkit takes: the special tokens and one
    token of text); the call warns once, with the exact number of texts cut. The slow BERT's
    reference is the fast tokenizer of its vocabulary (the slow one turns a written [SEP] into the
    special id)."""
    _check_ids(name, family_model(name), wmt17_texts()[::4] + HOSTILE, (None, 16, 5))


@pytest.mark.slow
@FAMILY
def test_ids_of_every_wmt17_text_at_every_limit(family_model, name):
    """The same on every distinct WMT17 text of the sample and the hostile ones, at 64 too (a text
    cut counts once in the warning, as in a call, whose texts are distinct)."""
    _check_ids(name, family_model(name), list(dict.fromkeys(wmt17_texts() + HOSTILE)), LIMITS)


def _spelled_specials(tokenizer) -> list[str]:
    tokens = [t for t in tokenizer.all_special_tokens if "extra_id" not in t or t == "<extra_id_0>"]
    everyone = "[CLS] [SEP] [PAD] [MASK] [UNK] <s> </s> <pad> <mask> <unk> <|endoftext|> <extra_id_0>"
    return [f"the {token} cat" for token in tokens] + [f"{token}" for token in tokens] + [everyone]


@FAMILY
def test_no_text_injects_a_special_id(family_model, name):
    """User text is text: a text spelling any special token of the family (``[SEP]``,
    ``</s>``, ``<pad>``, ...) gets no special id inside it, and the special-token mask marks
    exactly the tokens the tokenizer adds. (A Unigram vocabulary holds its special tokens as
    pieces of score 0, the most likely there are: a fast tokenizer turns a written ``<s>`` into
    that piece unless kept from it.)"""
    encoder = _encoder(family_model(name))
    tokenizer = encoder.tokenizer
    texts = _spelled_specials(tokenizer)
    with _recorded():  # the text of every special token together is past some limits
        ids, special = tokenize(encoder, texts)
    forbidden = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    injected = {
        text: tokenizer.convert_ids_to_tokens([i for i, s in zip(row, mask) if not s and i in forbidden])
        for text, row, mask in zip(texts, ids, special)
        if any(not s and i in forbidden for i, s in zip(row, mask))
    }
    assert not injected, f"special ids from user text: {injected}"
    added = tokenizer.num_special_tokens_to_add(pair=False)
    assert all(sum(mask) == added for mask in special)


def test_slow_bert_keeps_a_written_sep_as_text(family_model):
    """The Python (slow) BERT tokenizer of transformers 5 turns ``[SEP]`` and ``[MASK]`` written
    in a text into the special ids even with ``split_special_tokens=True``; moverkit gives the
    ids of the fast tokenizer of the same vocabulary: ``[`` ``sep`` ``]``, no special id."""
    folder = family_model("bert-slow")
    encoder = _encoder(folder)
    assert not encoder.tokenizer.is_fast
    ids, special = tokenize(encoder, ["the [SEP] cat [MASK]"])
    fast = _tokenizer("bert-slow", folder)
    expected = fast("the [SEP] cat [MASK]", split_special_tokens=True, return_special_tokens_mask=True)
    assert ids[0] == expected["input_ids"], encoder.tokenizer.convert_ids_to_tokens(ids[0])
    assert special[0] == expected["special_tokens_mask"] == [1] + [0] * (len(ids[0]) - 2) + [1]
    assert ids[0].count(fast.sep_token_id) == 1 and fast.mask_token_id not in ids[0]


def test_unigram_scores_that_do_not_survive_a_json_round_trip_give_transformers_ids(tmp_path):
    """transformers 5 builds a Unigram tokenizer (XLM-R, T5, ALBERT, DeBERTa-v2) in memory from the
    scores it reads; ``tokenizers`` reads a score back from its own JSON to the next float at
    times (-2.4436166186854242 becomes -2.443616618685424), so a copy made through
    ``Tokenizer.from_str(backend.to_str())`` splits a text whose two segmentations differ by
    that last bit otherwise: here ``🎉🎉🎉`` after ``▁``, ``🎉🎉 🎉`` by transformers, ``🎉 🎉🎉``
    by the copy. moverkit's ids are transformers' call's."""
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    specials = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("<mask>", 0.0)]
    pieces = [("▁", -2.4436166186854242), ("🎉", -10.394376287762867), ("🎉🎉", -10.39445148510603)]
    XLMRobertaTokenizer(vocab=specials + pieces + [("▁cat", -5.0)], model_max_length=64).save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=9,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=66,
        pad_token_id=1,
    )
    XLMRobertaModel(config).save_pretrained(tmp_path)
    encoder = load_encoder(str(tmp_path))
    texts = ["🎉🎉🎉", "cat 🎉🎉🎉 cat"]
    expected = encoder.tokenizer(texts, split_special_tokens=True)["input_ids"]
    assert encoder.tokenizer.convert_ids_to_tokens(expected[0])[2:4] == ["🎉🎉", "🎉"]
    ids, _ = tokenize(encoder, texts)
    assert ids == expected, [encoder.tokenizer.convert_ids_to_tokens(row) for row in ids]


# ------------------------------------------------------------------------------------ layers and vectors


@FAMILY
def test_layer_k_is_block_k_s_output(family_model, name):
    """moverkit's layer ``k`` (the scored layer, and ``-1``, the top) is transformers'
    ``hidden_states[k]``, block ``k``'s output, run on the text alone: at the top the model's own
    output (``last_hidden_state``, after a final norm where the model has one, which is also
    ``hidden_states[-1]``). Below the top, a model whose final norm follows its last block (GPT-2,
    Llama, Mistral, Qwen2, T5, ModernBERT) gives block ``k``'s output, not the final norm of it
    (the model cut after block ``k``: issue 60, 0.15 on the scores of a Llama at ``k=2``). An
    ALBERT whose one group holds as many layers as the model (``inner_group_num ==
    num_hidden_layers``) runs the group once per block: its layer ``k`` is the group applied
    ``k`` times, not the group's ``k`` first layers."""
    folder, spec = family_model(name), SPECS[name]
    text = _fitting_pairs(name, folder, 1)[0][0]
    tokenizer = _tokenizer(name, folder)
    ids = torch.tensor([tokenizer(text.strip(), split_special_tokens=True)["input_ids"]])
    for layer in (spec.layer, -1):  # the top is asked for as -1 (the last layer), as a user asks for it
        encoder = load_encoder(folder, layer)
        vectors = encode_texts(encoder, [text], EncoderRequest()).vectors
        expected = _model(name, folder, encoder.layer)(ids)
        torch.testing.assert_close(vectors, expected, atol=1e-5, rtol=1e-5, msg=lambda m, k=layer: f"layer {k}: {m}")
        if spec.cut_is_not_hidden_states is None and layer != -1:
            cut = _model(name, folder, layer, True)(ids)
            differs = not torch.allclose(cut, expected, atol=1e-5, rtol=1e-5)
            assert differs == spec.final_norm, f"{name}: the cut model's output differs from block {layer}'s: {differs}"


@FAMILY
def test_layer_0_is_the_embeddings(family_model, name):
    """``num_layers=0`` (documented: the embedding layer) is transformers' ``hidden_states[0]``
    (no final norm applied to it). It is computed whatever the model does with no block at all
    (DeBERTa-v2's encoder fails on an empty stack of layers)."""
    folder = family_model(name)
    text = _fitting_pairs(name, folder, 1)[0][0]
    ids = torch.tensor([_tokenizer(name, folder)(text.strip(), split_special_tokens=True)["input_ids"]])
    vectors = encode_texts(load_encoder(folder, 0), [text], EncoderRequest()).vectors
    torch.testing.assert_close(vectors, _model(name, folder, 0)(ids), atol=1e-5, rtol=1e-5)


@FAMILY
@pytest.mark.parametrize("plan", ["cpu", "cuda"])
def test_a_texts_vectors_alone_equal_its_vectors_in_a_padded_batch(family_model, name, plan, monkeypatch):
    """A text's vectors do not depend on the texts it is batched with: encoded alone (no
    padding) and in a batch padded to a text several times longer (and under the CUDA plan,
    padded to one of its widths), within float32 rounding. ModernBERT's local layers attend to a
    window of 8 tokens: a mask that lets them attend globally changes the vectors of every
    padded batch."""
    folder, spec = family_model(name), SPECS[name]
    encoder = _encoder(folder, spec.layer)
    predictions, references = _fitting_pairs(name, folder, 40)
    longest = max(predictions + references, key=len)
    texts = [longest, "the cat", predictions[0]]
    monkeypatch.delenv("MOVERKIT_PLAN", raising=False)
    alone = [encode_texts(encoder, [text], EncoderRequest()).vectors for text in texts]
    monkeypatch.setenv("MOVERKIT_PLAN", plan)
    together = encode_texts(encoder, texts, EncoderRequest())
    for i, vectors in enumerate(alone):
        rows = together.vectors[together.offsets[i] : together.offsets[i + 1]]
        torch.testing.assert_close(rows, vectors, atol=1e-5, rtol=1e-4, msg=lambda m, i=i: f"text {i}: {m}")


def test_mpnet_without_model_max_length_takes_its_limit_from_the_position_table(family_model):
    """An MPNet whose tokenizer was saved without ``model_max_length``: its position table has 66
    rows and positions start at ``padding_idx + 1 = 2``, so it takes 64 tokens; a text past them
    is truncated there (one warning) in every metric, never an ``IndexError``."""
    folder = family_model("mpnet-no-max-length")
    encoder = _encoder(folder)
    assert encoder.tokenizer.model_max_length > 10**20  # the sentinel: no limit saved
    assert encoder.max_length == 64
    for metric in METRICS:
        out, messages = _metric(metric, "mpnet-no-max-length", folder, [LONG, "the cat"], ["a cat", LONG])
        assert len(messages) == 1, (metric, messages)
        assert all(math.isfinite(s) for key in SCORES[metric] for s in out[key])


# ------------------------------------------------------------------------------------ centered_bertscore


@FAMILY
def test_centered_bertscore_is_bertscore_by_hand(family_model, name):
    """``centered_bertscore(centering="none", idf=False)`` is BERTScore computed by hand: greedy
    cosine matching in float64 on transformers' model cut after the layer, each text encoded
    alone (special tokens candidates of the match with weight 0), within 1e-6; a call with a text
    past the limit warns once."""
    folder, spec = family_model(name), SPECS[name]
    predictions, references = _quick_pairs(name, folder)
    out, messages = _metric("centered_bertscore", name, folder, predictions, references, idf=False)
    assert len(messages) == 1, messages
    expected = _hand_scores(name, folder, spec.layer, predictions, references)
    _assert_scores_close(out, expected, f"{name} against the hand reference")


def _bert_score(folder: str, layer: int, predictions, references, batch_size: int = 1):
    import bert_score

    with _recorded(), quiet_transformers(), contextlib.redirect_stderr(io.StringIO()):
        precision, recall, f1 = bert_score.score(
            predictions, references, model_type=folder, num_layers=layer, idf=False, batch_size=batch_size
        )
    return {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist()}


@FAMILY
def test_centered_bertscore_equals_bert_score_where_it_is_right(family_model, name):
    """Where bert-score 0.3.13 is right for the family, ``centered_bertscore(centering="none")``
    equals its ``score`` on the same folder and layer within 1e-6 (``batch_size=1``: its greedy
    match lets a token match a padded zero in a batch, see the slow test). Where it is not, the
    test shows why: with RoBERTa's prefix space dropped (transformers 5 ignores the argument
    bert-score passes) or T5's ``</s>`` weighed as content, the hand reference is bert-score's
    result, while moverkit's is the hand reference as intended; with a final norm applied to block
    ``k``'s output (its cut of ModernBERT and T5), the hand reference on the model cut after block
    ``k`` is bert-score's result; a tokenizer without a limit, or a GPT-2, it cannot score at all;
    Llama-like decoders and block-sparse BigBird it does not score as moverkit defines them (the
    hand reference holds moverkit there)."""
    from transformers import AutoTokenizer

    folder, spec = family_model(name), SPECS[name]
    if spec.bert_score_wrong in (NOT_BERT_SCORE, BLOCK_SPARSE):
        pytest.skip(spec.bert_score_wrong)
    predictions, references = _fitting_pairs(name, folder, 6)
    if spec.bert_score_wrong == NO_LIMIT:
        with pytest.raises(OverflowError):
            _bert_score(folder, spec.layer, predictions, references)
        return
    if spec.bert_score_wrong == GPT2_CUT:
        with pytest.raises(ValueError, match="Not supported"):
            _bert_score(folder, spec.layer, predictions, references)
        return
    theirs = _bert_score(folder, spec.layer, predictions, references)
    ours, _ = _metric("centered_bertscore", name, folder, predictions, references, idf=False)
    if spec.bert_score_wrong is None:
        _assert_scores_close(ours, [tuple(theirs[k][i] for k in ("precision", "recall", "f1")) for i in range(6)], name)
        return
    if spec.bert_score_wrong == PREFIX_SPACE:
        with quiet_transformers():
            plain = AutoTokenizer.from_pretrained(folder)  # what bert-score's call tokenizes with
        assert plain("hello world")["input_ids"] != _tokenizer(name, folder)("hello world")["input_ids"]
        mistaken = _hand_scores(name, folder, spec.layer, predictions, references, tokenizer=plain)
    elif spec.bert_score_wrong == FINAL_NORM:
        mistaken = _hand_scores(name, folder, spec.layer, predictions, references, cut=True)
    else:
        assert spec.bert_score_wrong == T5_SPECIALS
        mistaken = _hand_scores(name, folder, spec.layer, predictions, references, specials_weigh=True, cut=True)
    _assert_scores_close(theirs, mistaken, f"bert-score on {name} against its mistake")
    intended = _hand_scores(name, folder, spec.layer, predictions, references)
    _assert_scores_close(ours, intended, f"{name} against the hand reference")
    assert max(abs(a - b) for a, b in zip(ours["f1"], theirs["f1"])) > 1e-5  # the mistake shows


@pytest.mark.slow
@REPRESENTATIVE
def test_centered_bertscore_on_every_pair_and_hostile_text(family_model, name):
    """Every WMT17 pair of the sample and every hostile text (against the hostile texts
    reversed): ``centered_bertscore`` is the hand reference within 1e-6 at the default batch size
    and at ``batch_size=1``, and bert-score's result where bert-score is right and the pair fits
    its limit, whatever bert-score's batch: at ``batch_size=64`` bert-score's greedy match
    multiplies the cosines by the padding mask, so a token whose every real cosine is negative
    matches a padded zero and its score depends on the batch; moverkit equals the hand reference,
    which bert-score gives at ``batch_size=1``."""
    folder, spec = family_model(name), SPECS[name]
    predictions, references = wmt17_pairs()
    predictions, references = predictions + HOSTILE, references + HOSTILE[::-1]
    expected = _hand_scores(name, folder, spec.layer, predictions, references)
    for batch_size in (64, 1):
        out, messages = _metric(
            "centered_bertscore", name, folder, predictions, references, idf=False, batch_size=batch_size
        )
        assert len(messages) == 1, messages
        _assert_scores_close(out, expected, f"{name} at batch_size={batch_size}")
    if spec.bert_score_wrong is None:
        fitting = _fitting_pairs(name, folder, 10**6)
        ours, _ = _metric("centered_bertscore", name, folder, *fitting, idf=False)
        theirs = _bert_score(folder, spec.layer, *fitting, batch_size=1)
        gap = max(abs(a - b) for a, b in zip(ours["f1"], theirs["f1"]))
        assert gap <= TOLERANCE, f"{name}: bert-score at batch_size=1 off by {gap:.3g}"
        batched = _bert_score(folder, spec.layer, *fitting, batch_size=64)
        for key in ("precision", "recall"):  # a padded zero can only raise a token's best match
            assert all(b >= a - TOLERANCE for a, b in zip(ours[key], batched[key])), key


# ------------------------------------------------------------------------------------ the five metrics


def _assert_same_scores(metric: str, a: dict, b: dict, what: str) -> None:
    for key in SCORES[metric]:
        gap = max((abs(x - y) for x, y in zip(a[key], b[key])), default=0.0)
        assert len(a[key]) == len(b[key]) and gap <= TOLERANCE, f"{metric} {key} {what}: off by {gap:.3g}"


def _assert_in_range(metric: str, out: dict) -> None:
    low, high = RANGES[metric]
    for key in SCORES[metric]:
        bad = [s for s in out[key] if not (math.isfinite(s) and low <= s <= high)]
        assert not bad, f"{metric} {key}: {bad[:5]} out of [{low}, {high}]"


SETTINGS = ("batch_size=1", "the CUDA plan", "chunks", "chunks tokenized ahead")


def _check_metric(
    metric, name, folder, predictions, references, monkeypatch, settings=SETTINGS, budget="16KB", **kwargs
):
    """``metric`` gives the scores of its default call (within 1e-6) under each of ``settings``
    (of :data:`SETTINGS`: one text a forward pass, the CUDA plan on the CPU, cut into chunks by
    a tiny memory ``budget``, those chunks tokenized ahead in a thread; the last two exactly
    alike); every score finite and in its range; one truncation warning a call (a sentence call
    is never chunked: sbertscore skips the chunks). ``kwargs`` go to every call."""
    expected_warnings = _expected_truncations(metric, name) if LONG in predictions + references else None
    if "max_length" in kwargs:
        expected_warnings = 1
    plans = []
    plan_chunks = getattr(streaming.plan_chunks, "__wrapped__", streaming.plan_chunks)

    def spy(*args, **kwargs):
        plan = plan_chunks(*args, **kwargs)
        plans.append(len(plan.ranges))
        return plan

    spy.__wrapped__ = plan_chunks
    monkeypatch.setattr(streaming, "plan_chunks", spy)
    monkeypatch.delenv("MOVERKIT_PLAN", raising=False)
    monkeypatch.delenv("MOVERKIT_TOKENIZE_AHEAD", raising=False)
    runs = {"default": _metric(metric, name, folder, predictions, references, **kwargs)}
    if "batch_size=1" in settings:
        runs["batch_size=1"] = _metric(metric, name, folder, predictions, references, batch_size=1, **kwargs)
    if "the CUDA plan" in settings:
        monkeypatch.setenv("MOVERKIT_PLAN", "cuda")
        runs["the CUDA plan"] = _metric(metric, name, folder, predictions, references, **kwargs)
        monkeypatch.delenv("MOVERKIT_PLAN")
    chunked = [setting for setting in settings if setting.startswith("chunks")] if metric != "sbertscore" else []
    for setting in chunked:
        plans.clear()
        monkeypatch.setenv("MOVERKIT_TOKENIZE_AHEAD", "1" if setting.endswith("ahead") else "0")
        with temporary_memory_budget(budget):
            runs[setting] = _metric(metric, name, folder, predictions, references, **kwargs)
        assert plans and min(plans) > 1, f"{metric}: the budget of {budget} did not cut the call ({plans})"
    monkeypatch.delenv("MOVERKIT_TOKENIZE_AHEAD", raising=False)
    default, _ = runs["default"]
    for what, (out, messages) in runs.items():
        _assert_in_range(metric, out)
        _assert_same_scores(metric, out, default, f"{what} against the default")
        if expected_warnings is not None:
            assert len(messages) == expected_warnings, f"{metric} {what}: {messages}"
        else:
            assert len(messages) <= 1, f"{metric} {what}: {messages}"
    if len(chunked) == 2:
        for key in SCORES[metric]:
            assert runs["chunks"][0][key] == runs["chunks tokenized ahead"][0][key], f"{metric} {key}"


def _check_every_metric(name, folder, predictions, references, monkeypatch, settings=SETTINGS, **kwargs) -> None:
    """:func:`_check_metric` for each of the five metrics in turn (one family's encoders stay
    loaded: the model registry keeps four), every metric's failure reported together."""
    failures = []
    for metric in METRICS:
        try:
            _check_metric(metric, name, folder, predictions, references, monkeypatch, settings, **kwargs)
        except Exception as error:  # each metric's failure is reported
            failures.append(f"{metric}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@FAMILY
def test_every_metric_is_batch_invariant_and_warns_once(family_model, name, monkeypatch):
    """Each of the five metrics, on a few pairs (one truncated in every family, hostile scripts
    and emoji), the token metrics at ``max_length=32``: the scores of its default call under the
    CUDA plan and in chunks (within 1e-6; one text a forward pass for centered_bertscore, where
    the other metrics' encoding is the same: the vectors' own test holds it), in range, one
    truncation warning a call. A limit of 32 tokens keeps the quick loop quick (ByT5's 512
    bytes cost seconds a call); the model's own limit is held by the tests of ids, of the hand
    reference and of MPNet's limit, and by the slow test."""
    folder = family_model(name)
    predictions, references = _quick_pairs(name, folder)
    failures = []
    for metric in METRICS:
        if _sentence_model_refused(metric, name, folder, predictions, references):
            continue
        settings = ("the CUDA plan", "chunks") + (("batch_size=1",) if metric == "centered_bertscore" else ())
        limit = {} if metric == "sbertscore" else {"max_length": QUICK_LIMIT}
        try:
            _check_metric(metric, name, folder, predictions, references, monkeypatch, settings, **limit)
        except Exception as error:  # each metric's failure is reported
            failures.append(f"{metric}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
    assert not failures, "\n".join(failures)


LEFT_PADDED_ABSOLUTE = ("bert-left",)
"""Families whose tokenizer pads on the left although their positions are absolute: the token
metrics pad their own rows on the right, but sbertscore's vectors are the model's own ``encode()``,
which pads as the tokenizer says, and so moves a text's vectors with its batch (by 0.97 of their
length): sbertscore refuses such a folder, as it refuses every padding-dependent model."""


def _sentence_model_refused(metric: str, name: str, folder: str, predictions, references) -> bool:
    """Whether ``metric`` is sbertscore on a family it must refuse (:data:`LEFT_PADDED_ABSOLUTE`),
    having checked that it does, with the padding message."""
    if metric != "sbertscore" or name not in LEFT_PADDED_ABSOLUTE:
        return False
    with pytest.raises(ValueError, match="gives a text other vectors when it is padded in a batch"):
        _metric(metric, name, folder, predictions, references)
    return True


@pytest.mark.slow
@FAMILY
def test_empty_texts_score_in_every_metric(family_model, name):
    """Empty and white-space texts, each alone in its forward pass (``batch_size=1``), score in
    range in every metric, never an error: a family whose tokenizer adds no special token (GPT-2)
    gives them no token at all, and a batch of such rows has a length of 0 (so has the last
    batch of a call whose shortest texts are empty, at any batch size)."""
    folder = family_model(name)
    predictions, references = ["", "the cat sat", " \t"], ["a dog", "  ", "\n"]
    failures = []
    for metric in METRICS:
        if _sentence_model_refused(metric, name, folder, predictions, references):
            continue
        try:
            out, _ = _metric(metric, name, folder, predictions, references, batch_size=1)
            _assert_in_range(metric, out)
        except Exception as error:  # each metric's failure is reported
            failures.append(f"{metric}: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@REPRESENTATIVE
def test_every_metric_on_hostile_texts_in_every_setting(family_model, name, monkeypatch):
    """Each metric on 10 WMT17 pairs and every hostile text (against the hostile texts
    reversed; the first ten against themselves) at the model's own limit: no NaN, every score in
    its documented range, the same scores at ``batch_size=1``, under the CUDA plan, in chunks and
    in chunks tokenized ahead; one truncation warning a call."""
    folder = family_model(name)
    predictions, references = wmt17_pairs()
    predictions = predictions[:10] + HOSTILE + HOSTILE[:10] + [LONG]
    references = references[:10] + HOSTILE[::-1] + HOSTILE[:10] + [references[0]]
    _check_every_metric(name, folder, predictions, references, monkeypatch, budget="64KB")


@pytest.mark.slow
def test_a_slow_tokenizer_in_a_chunked_call_warns_once_with_the_call_count(family_model):
    """A tokenizer without a Rust backend in a call cut into many chunks: one truncation warning
    for the call, counting every distinct text cut (one warning per chunk, whose counts add up to
    more than the texts cut, was the defect), as with a fast tokenizer."""
    for name in ("bert-slow", "byt5"):
        folder, spec = family_model(name), SPECS[name]
        predictions, references = wmt17_pairs()
        long = [f"{LONG} {i}" for i in range(12)]
        predictions, references = predictions[:30] + long, references[:30] + references[30:42]
        texts = list(dict.fromkeys(predictions + references))
        with quiet_transformers():
            lengths = [len(ids) for ids in _tokenizer(name, folder)([t.strip() for t in texts])["input_ids"]]
        n_cut = sum(n > spec.limit for n in lengths)
        assert n_cut >= 12
        with temporary_memory_budget("16KB"):
            _, messages = _metric("centered_bertscore", name, folder, predictions, references)
        assert len(messages) == 1, f"{name}: {len(messages)} warnings: {messages[:3]}"
        assert messages[0].startswith(f"{n_cut} of {len(texts)} texts are longer than {spec.limit} tokens")
