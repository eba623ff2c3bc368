"""Tiny seeded random encoders of many families, each with a tokenizer made on the spot.

Users bring their own encoders (issue 51): every speed path of moverkit must hold for them, not
only for the embedded all-MiniLM-L6-v2. This module makes, for each family of :data:`FAMILIES`,
a model folder as a user would pass it (``model_type=<folder>``): a transformers config of the
family with random weights (``torch.manual_seed`` before the model is made), and a tokenizer of the
family's own class built from a vocabulary of the WMT17 sample and the :data:`HOSTILE` texts
(1,500 to 2,000 tokens; nothing is downloaded), both saved with ``save_pretrained``. Byte-level
BPE vocabularies (RoBERTa, GPT-2, ModernBERT) are trained by ``tokenizers``' BPE trainer;
WordPiece and Unigram vocabularies are counted here, since ``tokenizers``' trainers of those
give another vocabulary in every process (they break ties in hash-map order), and the matrix
must test the same tokenizers every run (every folder is the same to the byte from run to run).
The models are tiny (hidden size 32, 2 to 4 layers, 2 heads) and their position tables short
(64 to 128), so that truncation is exercised by ordinary texts.

Get a folder with the ``family_model`` fixture (``tests/families/conftest.py``: each family built
once per session) or, outside pytest, :func:`family_model` (once per process, in a temporary
folder). :data:`SPECS` says, for each family, which layer the tests score and where bert-score
is not the reference (and why); :data:`REFUSED` holds the families moverkit refuses at load; :func:`reference_tokenizer`, :func:`reference_model`,
:func:`reference_clouds` and :func:`greedy_scores` are the independent computations the tests
compare moverkit with.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "wmt17_sample.tsv"

HIDDEN = 32
HEADS = 2
INTERMEDIATE = 64


@contextlib.contextmanager
def quiet_transformers():
    """transformers' log and progress bars off while test models are built and loaded (a test may
    change the process's settings; moverkit itself never does)."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()


def wmt17_texts() -> list[str]:
    """The 400 texts (hypotheses, then references) of the 200 WMT17 pairs of the sample."""
    with open(SAMPLE, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row["hypothesis"] for row in rows] + [row["reference"] for row in rows]


def wmt17_pairs() -> tuple[list[str], list[str]]:
    """The 200 WMT17 (hypothesis, reference) pairs of the sample."""
    texts = wmt17_texts()
    return texts[: len(texts) // 2], texts[len(texts) // 2 :]


SENTENCE = "the council approved a new budget for schools while markets fell sharply on monday"
"""A sentence of plain lower-case words, repeated into long texts."""

_WORDS = SENTENCE.split()

HOSTILE = [
    "",
    " ",
    "\t\n \r\n",
    "   leading and trailing spaces   ",
    "😀",
    "🤖 robots 🤖 everywhere 🎉🎉🎉",
    "👩\u200d👩\u200d👧\u200d👦 a family of four joined by zero-width joiners",
    "🇺🇸🇩🇪 flags and skin tones 👍🏽",
    "猫が好きです。東京は大きい。",
    "我爱自然语言处理，也爱机器翻译。",
    "한국어 텍스트입니다",
    "مرحبا بالعالم، هذا نص عربي",
    "שלום עולם",
    "Привет, мир! Это текст.",
    "Γειά σου Κόσμε",
    "हिन्दी पाठ का उदाहरण",
    "e\u0301\u0301\u0301 combining acute accents on e",
    "z\u0336\u0353a\u0337l\u0338g\u0335o\u0334 text",
    "zero\u200bwidth\u200bspaces\u200bbetween\u200bwords",
    "join\u200dner and non\u200cjoiner",
    "\u200b\u200c\u200d\u2060",
    "\ufeffbyte order mark at the start",
    "the [SEP] cat [MASK]",
    "[CLS] [SEP] [PAD] [MASK] [UNK] written as text",
    "<s> </s> <pad> <mask> <unk> written as text",
    "<|endoftext|> and <extra_id_0> written as text",
    "[SEP]",
    "</s>",
    "<pad>",
    "a" * 2000,
    ("the cat sat on the mat . " * 80)[:2000],
    " ".join(_WORDS[(i * 7) % len(_WORDS)] for i in range(400))[:2000],
    "control \x00 \x01 \x07 \x1b characters inside",
    "\x0b\x0c\x1c\x1d\x1e\x1f",
    "tab\tseparated\tvalues and line\nbreaks\r\nhere",
    "&quot; &amp; &lt; html entities &apos;s",
    "numbers 3.14159 1,000,000 and 42 !!! ??? ...",
    "MiXeD CaSe TeXt With CAPITALS",
    "https://example.com/a?b=c#d and user@example.com",
    "\u00a0non-breaking\u00a0spaces\u2028line separator\u2029paragraph",
    "Ångström naïve café résumé ﬁ ligature ＦＵＬＬＷＩＤＴＨ",
]
"""Texts a hostile user sends: empty and white space only, emoji and joined emoji, CJK, Arabic,
Hebrew, Cyrillic, Greek, Devanagari, combining marks, zero-width characters, texts spelling
special tokens of every family, 2,000-character texts, control characters."""


def corpus() -> list[str]:
    """What every tokenizer is trained on: the WMT17 texts and the hostile ones."""
    return wmt17_texts() + HOSTILE


# ------------------------------------------------------------------------------------ tokenizers


def _word_counts(normalizer, pre_tokenizer) -> Counter:
    """How often each word of :func:`corpus` occurs, as ``normalizer`` and ``pre_tokenizer``
    (``tokenizers`` objects, those of the family's pipeline) cut it."""
    counts = Counter()
    for text in corpus():
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        counts.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalized))
    return counts


def _most_frequent(candidates: Counter, first: list[str], size: int) -> list[str]:
    """``first``, then the most frequent of ``candidates`` (ties in alphabetical order) up to
    ``size`` tokens in all."""
    vocab = list(dict.fromkeys(first))
    known = set(vocab)
    for token, _ in sorted(candidates.items(), key=lambda item: (-item[1], item[0])):
        if len(vocab) >= size:
            break
        if token not in known:
            vocab.append(token)
            known.add(token)
    return vocab


def _wordpiece_vocab(specials: list[str], lowercase: bool, vocab_size: int = 2000) -> dict[str, int]:
    """A WordPiece vocabulary of :func:`corpus` as BERT's normalizer and pre-tokenizer cut it:
    ``specials`` first (ids 0, 1, ...), every character alone and as a continuation (``##x``),
    then the most frequent words, word beginnings and endings (``##ing``) of 2 to 4 characters.

    Counted here, not by ``tokenizers``' WordPiece trainer: its vocabulary changes from process
    to process (its merges break ties of equal counts in hash-map order), and the matrix must
    test the same tokenizers every run."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase)
    words = _word_counts(normalizer, pre_tokenizers.BertPreTokenizer())
    chars = sorted({c for word in words for c in word})
    candidates = Counter()
    for word, n in words.items():
        candidates[word] += n
        for k in range(2, 5):
            if len(word) > k:
                candidates[word[:k]] += n
                candidates["##" + word[-k:]] += n
    vocab = _most_frequent(candidates, specials + chars + ["##" + c for c in chars], vocab_size)
    return {token: i for i, token in enumerate(vocab)}


def _write_vocab_file(vocab: dict[str, int], path: Path) -> Path:
    path.write_text("".join(token + "\n" for token, _ in sorted(vocab.items(), key=lambda kv: kv[1])), "utf-8")
    return path


def _byte_level_bpe(specials: list[str], vocab_size: int = 1500) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE (GPT-2's and RoBERTa's kind) trained on :func:`corpus`: its vocabulary
    (``specials`` first) and merges."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus(), vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    state = json.loads(bpe._tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    return state["vocab"], merges


def _unigram(specials: list[str], vocab_size: int = 1500) -> list[tuple[str, float]]:
    """A Unigram vocabulary (sentencepiece's kind: XLM-R, ALBERT, DeBERTa-v2, T5) of
    :func:`corpus` as the Metaspace pre-tokenizer cuts it (``▁`` before each word):
    ``(piece, log probability)``, ``specials`` first with score 0 (as converted sentencepiece
    models hold them), then every character and ``▁``, then the most frequent pieces of 2 to 5
    characters of the words; each piece's score the log of its share of the pieces counted.

    Counted here, not by ``tokenizers``' Unigram trainer, whose scores change from process to
    process (by up to 8e-4 here: its sums run in hash-map order)."""
    from tokenizers import pre_tokenizers

    pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace()])
    words = _word_counts(None, pre_tokenizer)
    candidates = Counter()
    for word, n in words.items():
        for k in range(1, 6):
            for start in range(len(word) - k + 1):
                candidates[word[start : start + k]] += n
    chars = sorted({c for word in words for c in word} | {"▁"})
    pieces = _most_frequent(candidates, chars, vocab_size - len(specials))
    total = sum(candidates[piece] for piece in pieces)
    scores = [(piece, math.log(max(candidates[piece], 1) / total)) for piece in pieces]
    return [(token, 0.0) for token in specials] + scores


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _bert_tokenizer(folder: Path, lowercase: bool = True, **kwargs):
    from transformers import BertTokenizer

    tokenizer = BertTokenizer(
        vocab=_wordpiece_vocab(BERT_SPECIALS, lowercase), do_lower_case=lowercase, model_max_length=64, **kwargs
    )
    tokenizer.save_pretrained(folder)
    return tokenizer


# ------------------------------------------------------------------------------------ models


def _save(model, folder: Path, **config_entries) -> None:
    """Save ``model`` (eval mode) to ``folder``; ``config_entries`` are written into its
    config.json as a user's file would hold them (``attn_implementation``)."""
    model.eval().save_pretrained(folder)
    if config_entries:
        path = folder / "config.json"
        config = json.loads(path.read_text("utf-8"))
        config.update(config_entries)
        path.write_text(json.dumps(config, indent=2), "utf-8")


def _bert_model(folder: Path, tokenizer, **config_entries) -> None:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(BertModel(config), folder, **config_entries)


def build_bert_uncased(folder: Path) -> None:
    """BERT, uncased WordPiece (``[CLS] x [SEP]``), 3 layers, 64 positions."""
    _bert_model(folder, _bert_tokenizer(folder, lowercase=True))


def build_bert_cased(folder: Path) -> None:
    """BERT, cased WordPiece (accents kept)."""
    _bert_model(folder, _bert_tokenizer(folder, lowercase=False))


def build_bert_eager(folder: Path) -> None:
    """BERT whose config.json asks for eager attention (the mask is added to the scores: no
    square-mask path)."""
    _bert_model(folder, _bert_tokenizer(folder), attn_implementation="eager")


def build_bert_left(folder: Path) -> None:
    """BERT whose tokenizer pads and truncates on the left (``padding_side`` and
    ``truncation_side`` ``"left"``): a truncated text keeps its end."""
    _bert_model(folder, _bert_tokenizer(folder, padding_side="left", truncation_side="left"))


def build_bert_slow(folder: Path) -> None:
    """BERT with a Python (slow) tokenizer: transformers' ``BertTokenizerLegacy`` from a
    vocab.txt, no Rust backend (no tokenizer.json)."""
    from transformers import BertTokenizerLegacy

    vocab_file = _write_vocab_file(_wordpiece_vocab(BERT_SPECIALS, True), folder / "vocab.txt")
    tokenizer = BertTokenizerLegacy(str(vocab_file), do_lower_case=True, model_max_length=64)
    tokenizer.save_pretrained(folder)
    _bert_model(folder, tokenizer)


def slow_bert_fast_twin(folder: str | Path):
    """The fast (Rust) BERT tokenizer of the slow family's vocab.txt: the reference its ids are
    compared with (the slow tokenizer turns a written ``[SEP]`` into the special id)."""
    from transformers import BertTokenizer

    return BertTokenizer(vocab=str(Path(folder) / "vocab.txt"), do_lower_case=True, model_max_length=64)


def build_distilbert(folder: Path) -> None:
    """DistilBERT: WordPiece, no token type ids, 2 layers."""
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizer

    tokenizer = DistilBertTokenizer(vocab=_wordpiece_vocab(BERT_SPECIALS, True), model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=len(tokenizer),
        dim=HIDDEN,
        n_layers=2,
        n_heads=HEADS,
        hidden_dim=INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(DistilBertModel(config), folder)


def build_electra(folder: Path) -> None:
    """ELECTRA (discriminator): WordPiece, embeddings of 16 projected to 32, 3 layers."""
    from transformers import ElectraConfig, ElectraModel, ElectraTokenizer

    tokenizer = ElectraTokenizer(vocab=_wordpiece_vocab(BERT_SPECIALS, True), model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = ElectraConfig(
        vocab_size=len(tokenizer),
        embedding_size=16,
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(ElectraModel(config), folder)


MPNET_SPECIALS = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]


def _mpnet(folder: Path, max_length: int | None) -> None:
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    kwargs = {} if max_length is None else {"model_max_length": max_length}
    tokenizer = MPNetTokenizer(vocab=_wordpiece_vocab(MPNET_SPECIALS, True), **kwargs)
    tokenizer.save_pretrained(folder)
    if max_length is None:  # as some saved checkpoints have it: no limit in the tokenizer's files
        path = folder / "tokenizer_config.json"
        config = json.loads(path.read_text("utf-8"))
        config.pop("model_max_length", None)
        path.write_text(json.dumps(config, indent=2), "utf-8")
    torch.manual_seed(0)
    config = MPNetConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=66,  # positions start at padding_idx + 1 = 2: 64 tokens
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    _save(MPNetModel(config), folder)


def build_mpnet(folder: Path) -> None:
    """MPNet: WordPiece with ``<s> x </s>``, relative attention buckets, a position table of 66
    whose first two rows are before the first position (padding index 1)."""
    _mpnet(folder, 64)


def build_mpnet_no_max_length(folder: Path) -> None:
    """MPNet whose saved tokenizer has no ``model_max_length``: the limit must come from the
    position table (64 tokens, not 66)."""
    _mpnet(folder, None)


def build_roberta(folder: Path) -> None:
    """RoBERTa: byte-level BPE (``<s> x </s>``; moverkit and bert-score add the prefix space),
    positions from padding index 1 (66 rows: 64 tokens)."""
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    vocab, merges = _byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer = RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=66,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    _save(RobertaModel(config), folder)


def build_xlm_roberta(folder: Path) -> None:
    """XLM-R: a Unigram vocabulary (sentencepiece's kind, Metaspace ``▁``), ``<s> x </s>``."""
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    vocab = _unigram(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer = XLMRobertaTokenizer(vocab=vocab, model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=66,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    _save(XLMRobertaModel(config), folder)


def build_deberta_v2(folder: Path) -> None:
    """DeBERTa-v2/v3: a Unigram vocabulary, ``[CLS] x [SEP]``, relative attention (position
    buckets, no absolute positions), as DeBERTa-v3 is configured."""
    from transformers import DebertaV2Config, DebertaV2Model, DebertaV2Tokenizer

    vocab = _unigram(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"])
    tokenizer = DebertaV2Tokenizer(vocab=vocab, model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = DebertaV2Config(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=64,
        relative_attention=True,
        position_buckets=16,
        max_relative_positions=-1,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        type_vocab_size=0,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(DebertaV2Model(config), folder)


def build_albert_shared(folder: Path) -> None:
    """ALBERT with shared layers: one group (``num_hidden_groups=1``) of as many layers as the
    model has (``inner_group_num == num_hidden_layers == 2``): the group runs once per layer, so
    the model's layer ``k`` is the group applied ``k`` times, and the group's own list of two
    layers is not the model's stack of blocks."""
    from transformers import AlbertConfig, AlbertModel, AlbertTokenizer

    vocab = _unigram(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer = AlbertTokenizer(vocab=vocab, model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=len(tokenizer),
        embedding_size=16,
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_hidden_groups=1,
        inner_group_num=2,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    _save(AlbertModel(config), folder)


def _t5(folder: Path, tokenizer, whole: bool) -> None:
    """A T5 of 2 encoder layers: the encoder alone (``T5EncoderModel``, whose saved config says
    ``is_encoder_decoder: false``) or, ``whole``, the encoder-decoder as T5 and ByT5 are released
    (``T5ForConditionalGeneration``, one decoder layer)."""
    from transformers import T5Config, T5EncoderModel, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=HIDDEN,
        d_kv=HIDDEN // HEADS,
        d_ff=INTERMEDIATE,
        num_layers=2,
        num_decoder_layers=1,
        num_heads=HEADS,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    model = (T5ForConditionalGeneration if whole else T5EncoderModel)(config)
    with torch.no_grad():  # a trained T5's final norm is not all ones: make it tell layers apart
        model.encoder.final_layer_norm.weight.uniform_(0.5, 1.5)
    _save(model, folder)


def build_t5(folder: Path) -> None:
    """A T5 encoder saved alone (``T5EncoderModel``, as sentence-T5 and text-encoder checkpoints
    are): a Unigram vocabulary with ``x </s>`` (no [CLS]; ``cls_token_id`` and ``sep_token_id``
    are ``None``), 10 sentinel ids, relative position buckets, a final RMS norm."""
    from transformers import T5Tokenizer

    extra = 10
    vocab = _unigram(["<pad>", "</s>", "<unk>"])
    vocab += [(f"<extra_id_{i}>", 0.0) for i in range(extra - 1, -1, -1)]
    tokenizer = T5Tokenizer(vocab=vocab, extra_ids=extra, model_max_length=64)
    tokenizer.save_pretrained(folder)
    _t5(folder, tokenizer, whole=False)


def build_byt5(folder: Path) -> None:
    """ByT5: transformers' Python (slow) byte tokenizer (no Rust backend, no
    ``model_max_length``: 512 by moverkit's cap) with a whole T5 (encoder-decoder, as released)."""
    from transformers import ByT5Tokenizer

    tokenizer = ByT5Tokenizer()
    tokenizer.save_pretrained(folder)
    _t5(folder, tokenizer, whole=True)


def build_gpt2(folder: Path) -> None:
    """GPT-2: byte-level BPE, no special tokens added, no padding token (as the released
    tokenizer), causal attention, 64 positions, a final layer norm."""
    from transformers import GPT2Config, GPT2Model, GPT2Tokenizer

    vocab, merges = _byte_level_bpe(["<|endoftext|>"])
    tokenizer = GPT2Tokenizer(vocab=vocab, merges=merges, model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=HIDDEN,
        n_layer=3,
        n_head=HEADS,
        n_inner=INTERMEDIATE,
        n_positions=64,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    _save(GPT2Model(config), folder)


def build_modernbert(folder: Path) -> None:
    """ModernBERT: a byte-level BPE with ``[CLS] x [SEP]`` (its own kind), rotary positions, four
    layers alternating global and local attention (``global_attn_every_n_layers=2``) with a
    local window of 8 tokens (``local_attention=8``), shorter than most texts; a final norm."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1500,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer)
    cls, sep = bpe.token_to_id("[CLS]"), bpe.token_to_id("[SEP]")
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        model_max_length=128,
        model_input_names=["input_ids", "attention_mask"],
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = ModernBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=4,
        num_attention_heads=HEADS,
        local_attention=8,
        global_attn_every_n_layers=2,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=cls,
        eos_token_id=sep,
        cls_token_id=cls,
        sep_token_id=sep,
    )
    model = ModernBertModel(config)
    with torch.no_grad():  # a trained final norm is not the identity: make it tell layers apart
        model.final_norm.weight.uniform_(0.5, 1.5)
    _save(model, folder)


def _metaspace_bpe(specials: list[str], vocab_size: int = 1500) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A BPE of :func:`corpus` cut by the Metaspace pre-tokenizer (``▁`` before each word), as
    Llama's and Mistral's tokenizers are: its vocabulary (``specials`` first, then the 256 byte
    pieces ``<0x00>`` to ``<0xFF>`` that byte fallback spells unknown characters with) and merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials + byte_pieces, show_progress=False)
    bpe.train_from_iterator(corpus(), trainer)
    state = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    return state["vocab"], merges


def _decoder_model(folder: Path, model_class, config_class, tokenizer, **config_entries) -> None:
    """A decoder of 3 layers (2 heads, 1 key-value head, rotary positions, 64 of them) with
    its final norm drawn at random, as a trained one is (all ones would hide it)."""
    torch.manual_seed(0)
    config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **config_entries,
    )
    model = model_class(config)
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
    _save(model, folder)


def _llama_tokenizer(folder: Path):
    from transformers import LlamaTokenizer

    vocab, merges = _metaspace_bpe(["<unk>", "<s>", "</s>"])
    tokenizer = LlamaTokenizer(vocab=vocab, merges=merges, model_max_length=64, pad_token="</s>")
    tokenizer.save_pretrained(folder)
    return tokenizer


def build_llama(folder: Path) -> None:
    """Llama: a Metaspace BPE with byte fallback that adds ``<s>`` before a text (no end token),
    padding with ``</s>`` (Llama has no padding token); causal attention, rotary positions, grouped
    key-value heads, a final RMS norm."""
    from transformers import LlamaConfig, LlamaModel

    _decoder_model(folder, LlamaModel, LlamaConfig, _llama_tokenizer(folder))


def build_mistral(folder: Path) -> None:
    """Mistral: Llama's tokenizer and layout with a sliding window of 8 tokens, shorter than most
    texts (a layer attends to the 8 tokens before each)."""
    from transformers import MistralConfig, MistralModel

    _decoder_model(folder, MistralModel, MistralConfig, _llama_tokenizer(folder), sliding_window=8)


def build_qwen2(folder: Path) -> None:
    """Qwen2: a byte-level BPE that adds no special token, ``<|endoftext|>`` for padding; causal
    attention, rotary positions, biases on the queries, keys and values, a final RMS norm."""
    from transformers import Qwen2Config, Qwen2Model, Qwen2Tokenizer

    vocab, merges = _byte_level_bpe(["<|endoftext|>"])
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, model_max_length=64)
    tokenizer.save_pretrained(folder)
    _decoder_model(folder, Qwen2Model, Qwen2Config, tokenizer)


def build_bigbird(folder: Path) -> None:
    """BigBird in its released setting, ``attention_type="block_sparse"``: a Unigram vocabulary
    with ``[CLS] x [SEP]``, blocks of 4 tokens and one random block, so that block-sparse
    attention needs more than (5 + 2 x 1) x 4 = 28 tokens (transformers runs shorter rows with full
    attention, and switches the model to it for good when it does)."""
    from transformers import BigBirdConfig, BigBirdModel, BigBirdTokenizer

    vocab = _unigram(["<pad>", "</s>", "<s>", "<unk>", "[SEP]", "[MASK]", "[CLS]"])
    tokenizer = BigBirdTokenizer(vocab=vocab, model_max_length=128)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BigBirdConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=128,
        attention_type="block_sparse",
        block_size=4,
        num_random_blocks=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        sep_token_id=tokenizer.sep_token_id,
    )
    _save(BigBirdModel(config), folder)


FUNNEL_SPECIALS = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>"]


def build_funnel(folder: Path) -> None:
    """Funnel Transformer: WordPiece with ``<cls> x <sep>``, three blocks of one layer, each
    after the first pooling the sequence to half its length (mean pooling: over padding too), and
    a decoder that upsamples back to every token."""
    from transformers import FunnelConfig, FunnelModel, FunnelTokenizer

    tokenizer = FunnelTokenizer(vocab=_wordpiece_vocab(FUNNEL_SPECIALS, True), model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = FunnelConfig(
        vocab_size=len(tokenizer),
        block_sizes=[1, 1, 1],
        num_decoder_layers=1,
        d_model=HIDDEN,
        n_head=HEADS,
        d_head=HIDDEN // HEADS,
        d_inner=INTERMEDIATE,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(FunnelModel(config), folder)


def build_canine(folder: Path) -> None:
    """CANINE: characters as ids (its tokenizer has no vocabulary), ``[CLS] x [SEP]`` as private
    code points, characters downsampled 4 to 1 by a strided convolution before the deep
    layers and upsampled after them."""
    from transformers import CanineConfig, CanineModel, CanineTokenizer

    tokenizer = CanineTokenizer(model_max_length=64)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = CanineConfig(
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=64,
        num_hash_functions=4,
        num_hash_buckets=256,
        downsampling_rate=4,
        local_transformer_stride=16,
    )
    _save(CanineModel(config), folder)


# ------------------------------------------------------------------------------------ widths and stacks


def build_opt_projected(folder: Path) -> None:
    """OPT shaped as facebook/opt-350m: embeddings of 16 projected in to 32 wide blocks and the
    last block's output projected back out to 16 (``word_embed_proj_dim < hidden_size``), no
    final norm (``do_layer_norm_before=False``); 3 layers. Its top layer is narrower than the
    others. A WordPiece tokenizer: the layer stack is what this family tests."""
    from transformers import OPTConfig, OPTModel

    tokenizer = _bert_tokenizer(folder)
    torch.manual_seed(0)
    config = OPTConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        word_embed_proj_dim=HIDDEN // 2,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        ffn_dim=INTERMEDIATE,
        max_position_embeddings=64,
        do_layer_norm_before=False,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(OPTModel(config), folder)


def build_reformer(folder: Path) -> None:
    """Reformer as an encoder of 3 local-attention layers (chunks of 8 tokens; axial positions
    8 x 8): two reversible streams, whose concatenation (64 wide, twice ``hidden_size``) is the
    model's output while ``hidden_states[k]`` holds one stream (32 wide), and rows padded by the
    model itself to a multiple of the chunk length. Each chunk attends to itself alone
    (``local_num_chunks_before=0``): with the released look-back of one chunk, the first chunk
    looks back around the row to its last chunk, padding or text, so a text's vectors depend on
    its padding (moverkit refuses that at load where the probe sees it: 6e-3 of their length at
    the top of this model). LSH layers (random rotations per pass unless ``hash_seed``) likewise.
    A WordPiece tokenizer."""
    from transformers import ReformerConfig, ReformerModel

    tokenizer = _bert_tokenizer(folder)
    torch.manual_seed(0)
    config = ReformerConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        attention_head_size=HIDDEN // HEADS,
        feed_forward_size=INTERMEDIATE,
        attn_layers=["local", "local", "local"],
        local_attn_chunk_length=8,
        local_num_chunks_before=0,
        axial_pos_shape=[8, 8],
        axial_pos_embds_dim=[HIDDEN // 2, HIDDEN // 2],
        max_position_embeddings=64,
        is_decoder=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    _save(ReformerModel(config), folder)


def _xlm(folder: Path, model_class, config_class) -> None:
    """An XLM-shaped model of 3 layers: four parallel lists per layer (attentions, layer_norm1,
    ffns, layer_norm2) and a loop over ``range(n_layers)``. A WordPiece tokenizer (XLM's own
    needs sacremoses, and the stack is what the family tests)."""
    tokenizer = _bert_tokenizer(folder)
    torch.manual_seed(0)
    config = config_class(
        vocab_size=len(tokenizer),
        emb_dim=HIDDEN,
        n_layers=3,
        n_heads=HEADS,
        max_position_embeddings=64,
        pad_index=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    _save(model_class(config), folder)


def build_xlm(folder: Path) -> None:
    """XLM (``XLMModel``, xlm-mlm-* checkpoints' architecture)."""
    from transformers import XLMConfig, XLMModel

    _xlm(folder, XLMModel, XLMConfig)


def build_flaubert(folder: Path) -> None:
    """FlauBERT (``FlaubertModel``: XLM's stack, with layer drop and pre-norm options)."""
    from transformers import FlaubertConfig, FlaubertModel

    _xlm(folder, FlaubertModel, FlaubertConfig)


# ------------------------------------------------------------------------------------ the families


@dataclass(frozen=True)
class Spec:
    """A family: how its folder is built; its blocks (``n_layers``) and the layer the matrix
    scores (``layer``: one below the top where the family allows it, so that the cut of the model
    is exercised); the token limit its model takes (``limit``: the tokenizer's
    ``model_max_length`` capped by the position table, or 512 where neither says); the arguments
    transformers' reference tokenizer is loaded with (``add_prefix_space`` for the byte-level BPE
    families, as moverkit and bert-score load them); whether its tokenizer has a Rust backend;
    why bert-score is not the reference for it, if it is not; whether a final norm follows its
    last block (so that the model cut after block ``k`` is not block ``k``'s output); and why
    moverkit's layer ``k < n_layers`` is not transformers' ``hidden_states[k]``, where it is not."""

    build: Callable[[Path], None]
    layer: int
    n_layers: int
    limit: int = 64
    tokenizer_kwargs: dict = field(default_factory=dict)
    rust: bool = True
    bert_score_wrong: str | None = None
    final_norm: bool = False
    cut_is_not_hidden_states: str | None = None


PREFIX_SPACE = (
    "bert-score 0.3.13 passes add_prefix_space=True to tokenizer.encode, which transformers 5 ignores: "
    "the first word is tokenized without the space that bert-score intends (and moverkit gives)"
)
T5_SPECIALS = (
    "bert-score zeroes the weights of cls_token_id and sep_token_id, both None for T5: it scores the "
    "appended </s> as content (and cuts the model after block k: the final norm applied to block k's output)"
)
NO_LIMIT = (
    "bert-score truncates at tokenizer.model_max_length, 1e30 for a tokenizer saved without one: "
    "the Rust tokenizer refuses it (OverflowError)"
)
GPT2_CUT = (
    "bert-score 0.3.13 cannot cut a GPT2Model (no encoder or layers attribute): ValueError 'Not supported' "
    "(and it would ignore add_prefix_space, as for RoBERTa)"
)
FINAL_NORM = (
    "bert-score cuts the model after block k, and the model's final norm follows its last block: bert-score's "
    "layer k is the final norm of block k's output, moverkit's is block k's output (hidden_states[k])"
)
NOT_BERT_SCORE = (
    "bert-score 0.3.13 does not score it as moverkit defines it: a decoder's cut applies its final norm, and the "
    "start token its tokenizer adds (Llama's <s>) or none at all (Qwen2) is scored as content or leaves an empty "
    "text no token; held by the hand reference instead"
)
BLOCK_SPARSE = (
    "bert-score runs BigBird as loaded, block-sparse: its first row of 28 tokens or fewer switches the model to "
    "full attention for good, so its scores depend on the order of the texts; moverkit runs full attention"
)
SHARED_GROUP = (
    "transformers 5 records hidden_states after every layer of the shared group (2 x 2 + 1 = 5 of them): "
    "hidden_states[k] is not block k; block k is the group applied k times (num_hidden_layers=k, bert-score's cut)"
)

SPECS: dict[str, Spec] = {
    "bert-uncased": Spec(build_bert_uncased, 2, 3),
    "bert-cased": Spec(build_bert_cased, 2, 3),
    "bert-eager": Spec(build_bert_eager, 2, 3),
    "bert-left": Spec(build_bert_left, 2, 3),
    "bert-slow": Spec(build_bert_slow, 2, 3, rust=False),
    "distilbert": Spec(build_distilbert, 1, 2),
    "electra": Spec(build_electra, 2, 3),
    "mpnet": Spec(build_mpnet, 2, 3),
    "mpnet-no-max-length": Spec(build_mpnet_no_max_length, 2, 3, bert_score_wrong=NO_LIMIT),
    "roberta": Spec(build_roberta, 2, 3, tokenizer_kwargs={"add_prefix_space": True}, bert_score_wrong=PREFIX_SPACE),
    "xlm-roberta": Spec(build_xlm_roberta, 2, 3),
    "deberta-v2": Spec(build_deberta_v2, 2, 3),
    "albert-shared": Spec(build_albert_shared, 1, 2, cut_is_not_hidden_states=SHARED_GROUP),
    "t5": Spec(build_t5, 1, 2, bert_score_wrong=T5_SPECIALS, final_norm=True),
    "byt5": Spec(build_byt5, 1, 2, limit=512, rust=False, bert_score_wrong=T5_SPECIALS, final_norm=True),
    "gpt2": Spec(
        build_gpt2, 2, 3, tokenizer_kwargs={"add_prefix_space": True}, bert_score_wrong=GPT2_CUT, final_norm=True
    ),
    "modernbert": Spec(build_modernbert, 3, 4, limit=128, bert_score_wrong=FINAL_NORM, final_norm=True),
    "llama": Spec(build_llama, 2, 3, bert_score_wrong=NOT_BERT_SCORE, final_norm=True),
    "mistral": Spec(build_mistral, 2, 3, bert_score_wrong=NOT_BERT_SCORE, final_norm=True),
    "qwen2": Spec(build_qwen2, 2, 3, bert_score_wrong=NOT_BERT_SCORE, final_norm=True),
    "bigbird": Spec(build_bigbird, 2, 3, limit=128, bert_score_wrong=BLOCK_SPARSE),
}

READS_PADDING = "reads padded positions"
"""What moverkit's refusal of a model whose vectors move with padding says."""

REFUSED: dict[str, Callable[[Path], None]] = {"funnel": build_funnel, "canine": build_canine}
"""Families moverkit refuses at load, each with an error saying why (:data:`READS_PADDING`):
their vectors of a text depend on the padding of its batch (Funnel pools the sequence, CANINE
downsamples characters), so scores would move with the batch size."""

FAMILIES = list(SPECS)
"""The names of the families, in a fixed order (the parameters of the matrix)."""

STACKS: dict[str, Callable[[Path], None]] = {
    "opt-projected": build_opt_projected,
    "reformer": build_reformer,
    "xlm": build_xlm,
    "flaubert": build_flaubert,
}
"""Families of unusual widths and layer stacks (issue 66), held at every layer by
``tests/families/test_every_layer.py`` (not the whole matrix): OPT whose top layer is projected
to another width, Reformer whose output is twice ``hidden_size``, XLM and FlauBERT whose blocks
are four parallel lists."""


def build_family(name: str, folder: str | Path) -> str:
    """Build family ``name`` into ``folder`` (created if missing); its path as a string."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        (SPECS[name].build if name in SPECS else {**REFUSED, **STACKS}[name])(folder)
    return str(folder)


_BUILT: dict[tuple[str, str], str] = {}
_LOCK = threading.Lock()
_ROOT: list[str] = []


def family_model(name: str, root: str | Path | None = None) -> str:
    """The folder of family ``name``, ``root/name``, built once (default ``root``: a temporary
    folder of this process). Processes sharing ``root`` (pytest-xdist workers) share the
    folders: each is built in a folder of its own and renamed into place, so that no process
    reads a half-written one; a process that finds it there takes it. The folder's name is the
    family's (bert-score reads ``"t5"`` in a model's path as "load a T5 encoder": only the T5
    families hold it)."""
    if name not in SPECS and name not in REFUSED and name not in STACKS:
        raise KeyError(f"unknown family {name!r}; families: {', '.join([*FAMILIES, *REFUSED, *STACKS])}")
    with _LOCK:
        if root is None:
            if not _ROOT:
                _ROOT.append(tempfile.mkdtemp(prefix="moverkit-families-"))
            root = _ROOT[0]
        key = (str(root), name)
        if key not in _BUILT:
            folder = Path(root) / name
            if not folder.is_dir():
                Path(root).mkdir(parents=True, exist_ok=True)
                staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
                build_family(name, staging)
                try:
                    staging.rename(folder)
                except OSError:  # another process put it there first
                    shutil.rmtree(staging, ignore_errors=True)
            _BUILT[key] = str(folder)
        return _BUILT[key]


def reference_tokenizer(name: str, folder: str | Path):
    """transformers' tokenizer of family ``name``'s ``folder``, the reference for ids:
    ``AutoTokenizer.from_pretrained`` with the family's arguments; for the slow BERT, the fast
    tokenizer of the same vocabulary (:func:`slow_bert_fast_twin`)."""
    from transformers import AutoTokenizer

    with quiet_transformers():
        if name == "bert-slow":
            return slow_bert_fast_twin(folder)
        return AutoTokenizer.from_pretrained(str(folder), **SPECS[name].tokenizer_kwargs)


def reference_model(
    name: str, folder: str | Path, layer: int, cut: bool = False
) -> Callable[[torch.Tensor], torch.Tensor]:
    """transformers' own vectors of moverkit's layer ``layer`` of family ``name``: a function of
    a (1, length) tensor of ids giving (length, dim). Layer ``k`` is block ``k``'s output,
    ``hidden_states[k]`` of the whole model (at the top its own output, ``last_hidden_state``);
    an ALBERT whose one group is its stack (:attr:`Spec.cut_is_not_hidden_states`) has the output
    of its model of ``k`` blocks. ``cut=True``: the output of the model cut after block ``k`` (a
    config of ``k`` blocks: ``num_hidden_layers``, which each config maps to its own name), as
    bert-score cuts a model: where a final norm follows the last block, it is applied to block
    ``k``'s output. T5 families load as ``T5EncoderModel``; BigBird runs full attention, as
    moverkit runs it (block-sparse attention depends on the padding of the row)."""
    from transformers import AutoConfig, AutoModel, T5EncoderModel

    spec = SPECS[name]
    shortened = layer != spec.n_layers and (cut or spec.cut_is_not_hidden_states is not None)
    with quiet_transformers():
        config = AutoConfig.from_pretrained(str(folder))
        if getattr(config, "attention_type", None) == "block_sparse":
            config.attention_type = "original_full"
        if shortened:
            config.num_hidden_layers = layer
            if getattr(config, "layer_types", None) is not None:
                config.layer_types = config.layer_types[:layer]
        loader = T5EncoderModel if config.model_type == "t5" else AutoModel
        model = loader.from_pretrained(str(folder), config=config).eval()

    def vectors(ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
        return (out.last_hidden_state if shortened or layer == spec.n_layers else out.hidden_states[layer])[0]

    return vectors


def reference_clouds(
    model: Callable[[torch.Tensor], torch.Tensor], tokenizer, texts: list[str], limit: int, specials_weigh: bool = False
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each text's token vectors by ``model`` (:func:`reference_model`), in float64, and their
    weights: the text stripped, tokenized alone by ``tokenizer`` (:func:`reference_tokenizer`)
    with ``split_special_tokens=True``, truncated at ``limit`` and run alone (no padding), a
    special id the text itself produced (a Unigram vocabulary's written ``<s>``) read as the
    unknown token, as moverkit reads user text. The special tokens the tokenizer added weigh 0
    (1 with ``specials_weigh``), the others 1."""
    forbidden = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    clouds = []
    for text in texts:
        encoded = tokenizer(
            text.strip(),
            truncation=True,
            max_length=limit,
            split_special_tokens=True,
            return_special_tokens_mask=True,
        )
        text_ids = [
            tokenizer.unk_token_id if not m and i in forbidden else i
            for i, m in zip(encoded["input_ids"], encoded["special_tokens_mask"])
        ]
        ids = torch.tensor([text_ids], dtype=torch.long)
        if not ids.numel():  # an empty text where the tokenizer adds nothing (GPT-2): no token
            clouds.append((torch.zeros(0, HIDDEN, dtype=torch.float64), torch.zeros(0)))
            continue
        vectors = model(ids).double()
        weights = torch.ones(len(vectors), dtype=torch.float64)
        if not specials_weigh:
            weights = 1.0 - torch.tensor(encoded["special_tokens_mask"], dtype=torch.float64)
        clouds.append((vectors, weights))
    return clouds


def greedy_scores(
    prediction: tuple[torch.Tensor, torch.Tensor], reference: tuple[torch.Tensor, torch.Tensor]
) -> tuple[float, float, float]:
    """BERTScore's precision, recall and F1 (no IDF) of two weighted token clouds
    (:func:`reference_clouds`), as its paper and package define them: each token of one side
    matched to its most similar token (cosine) of the other, special tokens included among the
    candidates; the matches averaged with the tokens' weights (0 for special tokens). A side with
    no weight (an empty text) scores 0, as bert-score and moverkit score it."""
    (p, p_weights), (r, r_weights) = prediction, reference
    if not len(p_weights) or not len(r_weights) or not p_weights.sum() or not r_weights.sum():
        return 0.0, 0.0, 0.0
    similarity = (p / p.norm(dim=1, keepdim=True)) @ (r / r.norm(dim=1, keepdim=True)).T
    precision = float((similarity.max(dim=1).values * p_weights).sum() / p_weights.sum())
    recall = float((similarity.max(dim=0).values * r_weights).sum() / r_weights.sum())
    total = precision + recall
    return precision, recall, 2 * precision * recall / total if total else 0.0
