"""Sentences: splitting texts into sentences, and sentence-transformers models loaded once.

The sentence-level metric (sBERTScore) compares texts sentence by sentence. This is where texts
are split (pysbd, a rule-based splitter installed from PyPI: no data downloaded at run time), and
where a ``sentence_transformers.SentenceTransformer`` is loaded through the model registry (once
per (model, device) for the process, freed by ``moverkit.release()``) and run.
"""

from __future__ import annotations

import functools
import html
import itertools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from moverkit._core.base.batching import pad
from moverkit._core.base.hardware import precision, resolve_device
from moverkit._core.encoding.architecture import (
    PROBE_TOKENS,
    load_settings,
    position_limit,
    probe_rows,
    square_mask,
    takes_square_mask,
)
from moverkit._core.encoding.encoder import (
    all_finite,
    cached_model,
    check_finite,
    check_padding,
    encode_batches,
    forward_region,
    non_finite_error,
    offsets_of,
)
from moverkit._core.encoding.request import EncoderRequest, check_lang, identify_model, local_files_only, resolve_model
from moverkit._core.encoding.tokens import CallTokenizer, Truncations, rust_copy

SENTENCE_LAYER = -1
"""The layer tag of sentence vectors, in hashcodes (``_L-1``) and in centering statistics: the
model's pooled sentence embedding (what ``SentenceTransformer.encode`` returns), not a transformer
block. Token-level statistics always carry a block index >= 0, so the two never mix."""


def splitter_languages() -> list[str]:
    """The language codes pysbd splits (``codes`` of :func:`~moverkit._core.encoding.request.check_lang`)."""
    from pysbd.languages import LANGUAGE_CODES

    return sorted(LANGUAGE_CODES)


def splitter_tag(lang: str) -> str:
    """The splitter and its version, for hashcodes: ``pysbd-0.3.4:en``; checks ``lang``."""
    import pysbd

    return f"pysbd-{pysbd.__version__}:{check_lang(lang, splitter_languages())}"


def split_sentences(text: str, lang: str = "en") -> list[str]:
    """The sentences of ``text``, stripped of surrounding white space; ``[]`` for an empty or
    white-space-only text.

    pysbd (Sadvilkar and Neumann, 2020) follows the "Golden Rules" of sentence boundaries:
    abbreviations (``Dr.``, ``U.S.``, ``e.g.``) and decimals (``3.50``) do not end a sentence,
    a closing quote stays with the sentence it closes (``He said "Stop." | Then he ran.``), and
    ``?``, ``!`` and ``...`` end one as ``.`` does. A text without final punctuation is one sentence.

    A fragment pysbd cuts off without a letter or digit (a lone closing quote, ``&quot;`` as WMT
    texts spell it, a run of ``!``) is no sentence: it joins its neighbour (:func:`join_fragments`).
    """
    return _split(text, check_lang(lang, splitter_languages()))


def split_texts(texts: Sequence[str], lang: str = "en") -> dict[str, list[str]]:
    """:func:`split_sentences` of each of ``texts`` (expected distinct), ``lang`` checked once."""
    code = check_lang(lang, splitter_languages())
    return {text: _split(text, code) for text in texts}


def _split(text: str, lang: str) -> list[str]:
    """:func:`split_sentences` for a checked ``lang``."""
    if not text.strip():
        return []
    if one_sentence(text, lang):
        return [text.strip()]
    try:
        segments = pysbd_segments(text, lang)
    except ValueError:
        # pysbd's list rules read "\x1c1." as a numbered item (its \s takes the information
        # separators U+001C-U+001F) and then fail on int("\x1c1"): split the text with them as spaces.
        segments = pysbd_segments(text.translate(SEPARATORS_AS_SPACES), lang)
    return [s.strip() for s in join_fragments(segments) if s.strip()]


SEPARATORS_AS_SPACES = str.maketrans(dict.fromkeys("\x1c\x1d\x1e\x1f", " "))

PYSBD_MARKERS = frozenset("\u01aa\u01c3\u0238\u0239\u02bc\u14f0\u14f1\u14f3\u14f4\u14f7\u14f8")
"""Letters pysbd writes into a text as markers while it splits (``ȸ``, ``ȹ``, ``ƪ``, ``ᓷ`` in
``&ᓷ&``, ...) and rewrites after: in a user's text they are split on, rewritten or dropped."""


PLAIN_MARKS = frozenset(",;:&#%/+=-_@*")
"""Marks a one-sentence text may hold between its words (unless the language ends sentences with
one: Greek's ``;``, Arabic's ``:``): none of pysbd's rules reads them."""

CLOSING_QUOTES = "\"'\u201d\u2019"


def one_sentence(text: str, lang: str) -> bool:
    """True where pysbd gives ``text`` whole, as one sentence, by a test cheap enough to run first
    (about 3 microseconds a WMT17 text, in string methods without a Python step per character;
    pysbd costs about 0.3 ms): :func:`split_sentences` then skips pysbd.

    The text, stripped, must be words (letters and digits, any script) with single spaces between
    them, the :data:`PLAIN_MARKS`, and at most one apostrophe right after a letter or digit, then at
    most one of the language's sentence marks (pysbd's ``Punctuations``) and one closing quote. What
    this leaves out is what pysbd's rules read: a sentence mark inside the text, quotes, brackets
    and parentheses (pysbd splits ``1) eggs 2) milk`` as a list, ``"no" Then`` at the quote), line
    breaks, tabs and runs of spaces, an ellipsis or ``?!`` at the end, and the letters pysbd uses as
    its own markers (:data:`PYSBD_MARKERS`). Held to pysbd by tests: every WMT17 text that passes
    (4,152 of 4,982), and seeded random texts of quotes, brackets, list markers, marks, marker letters
    and white space in 6 languages; and to its first form, which tested the body a character at a
    time in Python (a copy in the tests), on the WMT17 texts, on every character between two
    letters, and on seeded random texts of every script in every language pysbd splits."""
    marks = _marks(lang)
    text = text.strip()
    body = text.rstrip(marks + CLOSING_QUOTES)
    end = text[len(body) :]
    closing = end[1:] if end[:1] and end[0] in marks else end
    if not body or len(closing) > 1 or (closing and closing not in CLOSING_QUOTES) or "  " in body:
        return False
    apostrophe = body.find("'")
    if apostrophe >= 0 and (body.count("'") > 1 or not body[apostrophe - 1 : apostrophe].isalnum()):
        return False
    return body.translate(_letters_for_allowed(lang)).isalnum()


@functools.cache
def _letters_for_allowed(lang: str) -> dict[int, str]:
    """The ``str.translate`` table that lets ``str.isalnum`` test a body character by character at
    C speed (:func:`one_sentence`): a space, the apostrophe and :data:`PLAIN_MARKS` become ``a``,
    the language's marks and :data:`PYSBD_MARKERS` a space (a mark among the plain ones is a mark)."""
    allowed = dict.fromkeys(" '" + "".join(PLAIN_MARKS), "a")
    return str.maketrans(allowed | dict.fromkeys(_marks(lang) + "".join(PYSBD_MARKERS), " "))


@functools.cache
@functools.cache
def _marks(lang: str) -> str:
    """pysbd's sentence marks of ``lang`` (its ``Punctuations``) and the ellipsis."""
    from pysbd.languages import Language

    return "".join(Language.get_language_code(lang).Punctuations) + "\u2026"


SPLIT_WINDOW = 3_000
"""Characters pysbd reads at a time (:func:`pysbd_segments`). pysbd's time grows with the square of
the text's length past a few thousand characters (here: 0.09 s for 5,000 characters, 2.1 s for
40,000, 7.9 s for 100,000); up to 3,000 it is close to linear (15 microseconds a character)."""

SPLIT_MARGIN = 1_000
"""Characters at the end of a window whose segments are read again in the next window: pysbd keeps
a quotation or a bracket whole (no boundary inside), so a boundary is only final once the text
that could close such a span has been seen. Quotations in WMT17 news run to a few hundred."""


def pysbd_segments(text: str, lang: str) -> list[str]:
    r"""pysbd's segments of ``text`` (white space kept), in time linear in its length.

    A text of at most :data:`SPLIT_WINDOW` characters is segmented whole, as pysbd does. A longer
    one is read a window of :data:`SPLIT_WINDOW` characters at a time: the window's segments that
    end before its last :data:`SPLIT_MARGIN` characters are kept, and the next window starts at the
    first segment not kept, a boundary pysbd drew with the margin's context after it. pysbd's rules
    look a few characters around a candidate boundary (an abbreviation before it, a capital after
    it), and across a quotation or bracket, which the margin covers: this gives the segments of the
    whole text wherever no quotation or bracket is open over more than the margin (tests: WMT17
    documents and a text of quotes, abbreviations and decimals). A window with no segment to keep (a
    sentence longer than the window less the margin) is widened, doubling. The time is
    :math:`O(n \cdot W)` for ``n`` characters and window ``W``; pysbd's own is :math:`O(n^2)`.
    """
    segments: list[str] = []
    start, width = 0, SPLIT_WINDOW
    while True:
        piece = text[start : start + width]
        found = segment_with_pysbd(piece, lang)
        if start + width >= len(text):
            return segments + found
        starts = _starts(piece, found)
        # Segments after the first that start before the margin: the ones before each are complete
        # (the first may start past 0, after white space pysbd drops).
        kept = 0 if starts is None else sum(starts[0] < at <= width - SPLIT_MARGIN for at in starts)
        if not kept:
            width *= 2
            continue
        segments += found[:kept]
        start += starts[kept]
        width = SPLIT_WINDOW


FOLLOWING_SPACE = re.compile(r"\s*")


def segment_with_pysbd(text: str, lang: str) -> list[str]:
    r"""pysbd's ``Segmenter(language=lang, clean=False).segment(text)``: its sentences as pieces of
    ``text``, each with the white space after it, without a regular expression per sentence.

    ``segment`` finds each sentence back in the text by the pattern ``re.escape(sentence) + r"\s*"``
    (``sentences_with_char_spans``): a pattern compiled for that one sentence, which also pushes
    pysbd's own rules out of Python's ``re`` cache (512 patterns on Python 3.11, the oldest dropped
    first), to be compiled again: 2,852 compilations (0.68 s under cProfile) for the 830 WMT17 texts
    that reach pysbd, where English's rules, under 500 patterns, are compiled once. Here the
    sentence is found as that pattern finds it, by ``str.find``: its first match, in the order
    ``re.finditer`` reads them (without overlap), whose end, white space included, lies past the end
    of the sentence before; a sentence not found in the text is left out, as ``segment`` leaves it
    out. Held to ``segment`` by tests (WMT17 texts, and seeded random texts in every language pysbd
    splits).
    """
    import pysbd

    if not text:
        return []
    # A new Segmenter per text (under a microsecond): its processor reads the language's rules.
    sentences = pysbd.Segmenter(language=lang, clean=False).processor(text).process()
    segments, prior_end = [], 0
    for sentence in sentences:
        at = text.find(sentence)
        while at >= 0:
            end = FOLLOWING_SPACE.match(text, at + len(sentence)).end()
            if end > prior_end:
                segments.append(text[at:end])
                prior_end = end
                break
            # The next match starts where this one ends (one further for an empty one), as in re.finditer.
            at = text.find(sentence, max(end, at + 1))
    return segments


def _starts(piece: str, segments: list[str]) -> list[int] | None:
    """Where each of ``segments`` (pysbd's pieces of ``piece``, in order; pysbd drops the white
    space before a segment) begins in ``piece``; ``None`` if one is not found verbatim."""
    starts, cursor = [], 0
    for segment in segments:
        at = piece.find(segment, cursor)
        if at < 0:
            return None
        starts.append(at)
        cursor = at + len(segment)
    return starts


LETTER_OR_DIGIT = re.compile(r"[^\W_]")
r"""A letter or digit of any script: a character ``str.isalnum`` accepts (``\w`` less ``_``; held
equal to ``str.isalnum`` on every code point by a test)."""


def join_fragments(segments: list[str]) -> list[str]:
    """``segments`` (pieces of a text, in order, white space kept) with every piece that has no
    letter or digit (after reading HTML character references such as ``&quot;`` as the characters
    they stand for) appended to the piece before it, or, at the start, prepended to the piece after
    it; a text with no letter or digit at all stays one piece. An embedding of a lone ``"`` is no
    sentence, and as one it would drop recall sharply (one of very few sentences matched to nothing)."""
    joined: list[str] = []
    pending = ""  # leading pieces without a letter or digit, waiting for the first real one
    for piece in segments:
        if not LETTER_OR_DIGIT.search(html.unescape(piece)):
            if joined:
                joined[-1] += piece
            else:
                pending += piece
            continue
        joined.append(pending + piece)
        pending = ""
    return joined or ([pending] if pending else [])


@dataclass(eq=False)
class SentenceEncoder:
    """A ``SentenceTransformer`` on ``device``; get one with :func:`get_sentence_encoder`."""

    name: str
    path: str
    device: torch.device
    model: object  # sentence_transformers.SentenceTransformer
    layer: int = SENTENCE_LAYER
    square_mask: bool = False  # its transformer takes the (batch, 1, length, length) mask (takes_square_mask)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The sentence embeddings of a padded batch: the model's modules in turn, its transformer
        given :func:`~moverkit._core.encoding.architecture.square_mask`'s mask where it takes it (an
        argument of the module's call, which overrides the features' mask for the transformer
        alone: pooling reads the (batch, length) mask)."""
        features = {"input_ids": input_ids, "attention_mask": attention_mask}
        if not self.square_mask:
            return self.model(features)["sentence_embedding"]
        modules = list(self.model)
        features = modules[0](features, attention_mask=square_mask(attention_mask))
        for module in modules[1:]:
            features = module(features)
        return features["sentence_embedding"]

    @property
    def dim(self) -> int:
        # sentence-transformers 5 renamed get_sentence_embedding_dimension to get_embedding_dimension.
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())


def get_sentence_encoder(
    model_type: str | os.PathLike | None = None, device: str | int | torch.device | None = None
) -> SentenceEncoder:
    """The sentence-transformers model ``model_type`` (a Hugging Face id, from the local cache
    when offline, or a local folder; ``None`` is the embedded all-MiniLM-L6-v2), loaded once per
    (model, device) through the model registry. A plain transformers model (no
    sentence-transformers config) gets sentence-transformers' default, mean pooling."""
    return _shared_sentence_encoder(model_type, resolve_device(device))


def _shared_sentence_encoder(model_type, device: torch.device) -> SentenceEncoder:
    name, path = resolve_model(model_type)
    return cached_model(("sentence", path, str(device)), lambda: _load_sentence_encoder(name, path, device))


def sentence_encoder_for(request: EncoderRequest) -> SentenceEncoder:
    """The process-wide sentence encoder of ``request`` (:func:`get_sentence_encoder`; its
    ``num_layers``, ``max_length`` and ``long_texts`` do not apply), on the device the request
    resolved and checked when it was made."""
    return _shared_sentence_encoder(request.model_type, request.device)


def _load_sentence_encoder(name: str, path: str, device: torch.device) -> SentenceEncoder:
    """The sentence encoder of ``path``, loaded as the token encoder is
    (:func:`~moverkit._core.encoding.encoder.load_encoder`): float32 weights whatever the folder
    holds, the config's :func:`~moverkit._core.encoding.architecture.load_settings`, and a model
    whose sentence vectors move when a text is padded refused
    (:func:`~moverkit._core.encoding.encoder.check_padding`)."""
    from sentence_transformers import SentenceTransformer

    local_only = local_files_only(path)
    try:
        model = SentenceTransformer(
            path,
            device=str(device),
            local_files_only=local_only,
            model_kwargs={"dtype": torch.float32},
            config_kwargs=_config_settings(path, local_only),
        )
    except (OSError, ValueError) as err:
        where = "a local folder" if os.path.isdir(path) else "a Hugging Face id (offline: from the local cache)"
        raise ValueError(f"model_type={path!r} ({where}) could not be loaded: {err}") from err
    if getattr(model, "tokenizer", None) is not None:
        model.tokenizer.split_special_tokens = True  # user text is text: "[CLS]" is not the [CLS] id
    transformer = getattr(model[0], "auto_model", None) if len(model) else None
    encoder = SentenceEncoder(name=name, path=path, device=device, model=model.eval())
    if isinstance(transformer, torch.nn.Module):
        encoder.name, _ = identify_model(name, path, transformer, transformer.config)  # a known model, wherever it is
        # sentence-transformers reads max_seq_length from its config or the tokenizer, past the
        # position table of a model whose positions start after a padding index (MPNet: 66 of 64).
        positions = position_limit(transformer, transformer.config)
        if None not in (positions, model.max_seq_length) and model.max_seq_length > positions:
            model.max_seq_length = positions
        limit = model.max_seq_length or PROBE_TOKENS
        pad_id = getattr(model.tokenizer, "pad_token_id", None) or 0
        with forward_region("float32", device):
            check_padding(
                f"model_type={path!r} ({encoder.name}, sentence vectors)",
                transformer,
                encoder.embed,
                limit,
                device,
                pad_id,
            )
        encoder.square_mask = takes_square_mask(transformer, device, limit) and _module_takes_mask(model, device, limit)
    return encoder


def _config_settings(path: str, local_only: bool) -> dict:
    """:func:`~moverkit._core.encoding.architecture.load_settings` of the config at ``path``, for
    sentence-transformers to build its transformer with; none where no config is there to read."""
    from transformers import AutoConfig

    try:
        return load_settings(AutoConfig.from_pretrained(path, local_files_only=local_only))
    except (OSError, ValueError):
        return {}


def _module_takes_mask(model, device: torch.device, limit: int) -> bool:
    """Whether the model's first module, called with ``attention_mask=`` beside its features,
    passes that mask to its transformer (sentence-transformers >= 5 lets a call's arguments
    override the features), bit for bit as its own call: probed on the rows of
    :func:`~moverkit._core.encoding.architecture.probe_rows`."""
    ids, mask = probe_rows(limit, device)
    try:
        with torch.no_grad():
            plain = model[0]({"input_ids": ids, "attention_mask": mask})["token_embeddings"]
            square = model[0]({"input_ids": ids, "attention_mask": mask}, attention_mask=square_mask(mask))
    except Exception:  # any refusal of the argument means: no square mask for this model
        return False
    kept = mask.bool()
    return bool(torch.equal(plain[kept], square["token_embeddings"][kept]))


def encode_sentences(encoder: SentenceEncoder, sentences: Sequence[str], request: EncoderRequest) -> torch.Tensor:
    """Sentence embeddings of ``sentences``, shape (n, dim), float32 on the encoder's device, as
    ``SentenceTransformer.encode`` gives them (its pooling; not yet centered or re-normalized).
    Sentences longer than the model's ``max_seq_length`` are truncated by it, with one warning.
    ``request`` (:class:`~moverkit._core.encoding.request.EncoderRequest`) gives the batch size, the
    progress bar and ``dtype``, the precision of the forward pass; the embeddings are float32
    whatever it is.

    A model whose first module is a transformer with a fast tokenizer (sentence-transformers'
    ``Transformer``, as every sentence-transformers text model) runs as the token encoder does:
    its sentences tokenized in one Rust batch call
    (:class:`~moverkit._core.encoding.tokens.CallTokenizer`, the ids sentence-transformers' own
    tokenization gives: stripped, truncated at ``max_seq_length``), sorted by token length and cut
    into the shared batches (:func:`~moverkit._core.encoding.encoder.encode_batches`), each padded
    (:func:`~moverkit._core.base.batching.pad`) and run through the modules (transformer, pooling,
    normalization) in one forward region (:func:`~moverkit._core.encoding.encoder.forward_region`):
    no per-batch tokenizer call, no move or cast of the model per call, each weight cast once.
    Other models go through ``SentenceTransformer.encode``, a batch at a time.
    """
    vectors = torch.zeros(len(sentences), encoder.dim, dtype=torch.float32, device=encoder.device)
    if not sentences:
        return vectors
    described = f"model_type={encoder.path!r} ({encoder.name}, sentence vectors)"
    ids = _sentence_ids(encoder, sentences)
    if ids is None:
        return _encode_with_sentence_transformers(encoder, sentences, request, vectors, described)
    lengths = [len(row) for row in ids]
    offsets = offsets_of(lengths, len(ids))
    flat_ids = torch.from_numpy(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(offsets[-1])))
    limit = encoder.model.max_seq_length or max(lengths)  # caps the padded widths on a CUDA device
    pad_id = encoder.model[0].tokenizer.pad_token_id or 0
    finite = torch.ones((), dtype=torch.bool, device=encoder.device)
    batches = encode_batches(lengths, request.batch_size, encoder.device, limit, request.dtype)
    bar = tqdm(total=len(sentences), desc="encoding sentences", unit="sentence", disable=not request.verbose)
    with bar, forward_region(request.dtype, encoder.device):
        for batch, width in batches:
            attention, input_ids = pad(offsets, torch.tensor(batch), flat_ids, width=width)
            input_ids = input_ids.masked_fill_(~attention, pad_id).to(encoder.device, non_blocking=True)
            attention = attention.long().to(encoder.device, non_blocking=True)
            out = encoder.embed(input_ids, attention)
            finite &= all_finite(out)
            vectors[torch.tensor(batch, device=encoder.device)] = out.float()
            bar.update(len(batch))
    if not bool(finite):
        raise non_finite_error(described, request.dtype)
    return vectors


def _sentence_ids(encoder: SentenceEncoder, sentences: Sequence[str]) -> list[list[int]] | None:
    """The token ids sentence-transformers' ``Transformer`` module gives ``sentences`` (stripped,
    lower-cased if the module says so, truncated at ``max_seq_length``), from one Rust batch call,
    warning once about the sentences truncated; ``None`` for a model this path does not take."""
    from sentence_transformers.models import Transformer

    first = encoder.model[0] if len(encoder.model) else None
    if not isinstance(first, Transformer) or not getattr(first.tokenizer, "is_fast", False):
        return None
    limit = encoder.model.max_seq_length
    texts = [s.strip().lower() if getattr(first, "do_lower_case", False) else s.strip() for s in sentences]
    backend = rust_copy(first.tokenizer, limit)
    if backend is None:
        return None
    tokenizer = CallTokenizer(first.tokenizer, limit, "truncate", backend, _truncations(encoder, limit))
    ids = tokenizer.tokenize(texts).ids
    tokenizer.close(len(sentences))
    return ids


def _encode_with_sentence_transformers(
    encoder: SentenceEncoder, sentences: Sequence[str], request: EncoderRequest, vectors: torch.Tensor, described: str
) -> torch.Tensor:
    """:func:`encode_sentences` through ``SentenceTransformer.encode``, ``batch_size`` sentences at a
    time sorted by token length (character length for a model without a callable tokenizer)."""
    lengths = _token_lengths(encoder, sentences)
    order = sorted(range(len(sentences)), key=lambda i: -lengths[i])
    starts = range(0, len(order), request.batch_size)
    for start in tqdm(starts, desc="encoding sentences", unit="batch", disable=not request.verbose):
        batch = order[start : start + request.batch_size]
        with precision(request.dtype, encoder.device):
            out = encoder.model.encode(
                [sentences[i] for i in batch], batch_size=len(batch), show_progress_bar=False, convert_to_tensor=True
            )
        check_finite(described, out, request.dtype)
        vectors[batch] = out.to(vectors)
    return vectors


def _token_lengths(encoder: SentenceEncoder, sentences: Sequence[str]) -> list[int]:
    """Token counts (special tokens included) by the model's tokenizer, warning once about those
    over ``max_seq_length``; character counts for a model without a callable tokenizer."""
    tokenizer = getattr(encoder.model, "tokenizer", None)
    if not sentences or not callable(tokenizer):
        return [len(s) for s in sentences]
    lengths = [len(ids) for ids in tokenizer(list(sentences), add_special_tokens=True)["input_ids"]]
    limit = getattr(encoder.model, "max_seq_length", None)
    if limit:
        truncations = _truncations(encoder, limit)
        truncations.add(s for s, n in zip(sentences, lengths) if n > limit)
        truncations.close(len(sentences))
    return lengths


def _truncations(encoder: SentenceEncoder, limit: int) -> Truncations:
    return Truncations("sentences", limit, f"and were truncated (the max_seq_length of {encoder.name}).")
