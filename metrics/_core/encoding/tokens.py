"""Tokenizing a call's texts, once, before anything is encoded.

A call's :class:`CallTokenizer` is made when the call is prepared: the encoder's tokenizer, the
call's one token limit (``max_length`` checked against the model's), its long-text mode and a Rust
copy of the tokenizer as it is at that moment. It turns texts into :class:`TokenizedTexts` (ids,
special-token masks, how many were cut), the typed value the encoder takes
(:func:`~moverkit._core.encoding.encoder.encode`), and counts the texts it cut over the whole call,
which :meth:`CallTokenizer.close` reports in one warning. Tokenizing changes no setting of the
user's tokenizer, no warnings filter and no log level, so it may run in a thread while the device
encodes the previous part of a call (:mod:`~moverkit._core.call.streaming`).

The ids come from the Rust tokenizer behind a fast tokenizer
(:func:`~moverkit._core.encoding.rust_tokens.rust_copy`), in one batch call (``encode_batch_fast``):
the ids transformers' own call gives, without its per-text conversion to Python lists and dicts,
which does not run in parallel (issue 45: 2.0x slower on 16 cores). A tokenizer without one is
read by :func:`~moverkit._core.encoding.python_tokens.python_encode`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from moverkit._core.base import checks
from moverkit._core.base.user_warnings import warn_user
from moverkit._core.encoding.python_tokens import python_encode
from moverkit._core.encoding.rust_tokens import rust_copy


class HasTokenizer(Protocol):
    """What tokenizing reads of an encoder (:class:`~moverkit._core.encoding.encoder.Encoder`, the
    one encoder type): its name, its tokenizer and its token limit, named as a protocol so that
    tokenizing does not import the model's code."""

    name: str
    tokenizer: object
    max_length: int


def check_max_length(encoder: HasTokenizer, max_length: int | None) -> int:
    """The token limit texts are truncated to: ``max_length`` capped by the model's own, or the
    model's. It must hold the special tokens the tokenizer adds and one token of text ([CLS] x
    [SEP]: 3 for BERT-like and RoBERTa-like tokenizers, 1 for one that adds none); any less leaves
    nothing of any text to score, so it is a ``ValueError`` naming ``max_length``."""
    if max_length is None:
        return encoder.max_length
    minimum = encoder.tokenizer.num_special_tokens_to_add(pair=False) + 1
    checks.positive_int("max_length", max_length)
    if max_length < minimum:
        raise ValueError(
            f"max_length must be an int >= {minimum} for {encoder.name} (its {minimum - 1} special tokens and "
            f"one token of text), got {max_length!r}"
        )
    return min(int(max_length), encoder.max_length)


@dataclass
class Truncations:
    """The texts a call cut at its token ``limit``, gathered from every part and thread of the
    call and reported once, by :meth:`close`: the one place moverkit warns of truncation. A text
    cut in two parts of a call (a reference shared by two chunks) counts once. Made empty when a
    metric call opens; its tokenizer (:meth:`CallTokenizer.of`) says the limit and why."""

    unit: str = "texts"  # or "sentences"
    limit: int = 0
    reason: str = ""  # why the limit is what it is, said in the warning
    n_texts: int = 0  # the call's distinct texts
    cut: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, texts) -> None:
        with self._lock:
            self.cut.update(texts)

    def holds(self, text: str) -> bool:
        """Whether ``text`` was cut in this call so far (what a cache keeps beside its vectors)."""
        with self._lock:
            return text in self.cut

    def close(self, n_texts: int | None = None) -> None:
        """The call's one warning, if it cut any of its ``n_texts`` (default :attr:`n_texts`)
        distinct texts; forgotten once given."""
        with self._lock:
            n_cut, self.cut = len(self.cut), set()
        if n_cut:
            n = self.n_texts if n_texts is None else n_texts
            warn_user(f"{n_cut} of {n} {self.unit} are longer than {self.limit} tokens {self.reason}")


@dataclass(frozen=True)
class TokenizedTexts:
    """``texts`` tokenized by a :class:`CallTokenizer`: each text's ``ids`` with special tokens and
    the mask of the ``special`` ones the tokenizer added ([CLS], [SEP]; not [UNK]), the call's token
    ``limit`` and ``long_texts`` mode (``"window"``: nothing was cut; the encoder cuts windows), and
    how many texts were ``truncated``."""

    texts: Sequence[str]
    ids: list[list[int]]
    special: list[list[int]]
    limit: int
    long_texts: str
    truncated: int = 0

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: Sequence[int]) -> TokenizedTexts:
        """The texts at ``indices``, in that order (what a cache that holds the others encodes)."""
        ids, special = self.ids, self.special
        return TokenizedTexts(
            [self.texts[i] for i in indices],
            [ids[i] for i in indices],
            [special[i] for i in indices],
            self.limit,
            self.long_texts,
        )


@dataclass(frozen=True)
class AheadTokens:
    """Texts tokenized ahead of their turn (a chunk's, or a slice of a call's texts): made already
    (``made`` is their :class:`TokenizedTexts`), or being made in the call's tokenizing thread (a
    ``Future`` of them; :class:`~moverkit._core.call.streaming.TokenizingThread`)."""

    made: TokenizedTexts | Future

    def get(self) -> TokenizedTexts:
        """The tokens, waited for where the thread is making them (raising what it raised): the one
        place a ``Future`` of tokens is resolved."""
        return self.made.result() if isinstance(self.made, Future) else self.made


def cut_at(limit: int, long_texts: str) -> int | None:
    """The token count texts are cut at under ``long_texts`` (``None`` for ``"window"``: tokenized
    whole, the encoder cuts windows)."""
    return None if long_texts == "window" else limit


@dataclass(frozen=True)
class CallTokenizer:
    """One call's tokenizer (:meth:`of`): made once, when the call is prepared, and frozen."""

    tokenizer: object
    limit: int
    long_texts: str
    backend: object | None  # the Rust copy (None: a tokenizer without a Rust backend)
    truncations: Truncations

    @classmethod
    def of(
        cls,
        encoder: HasTokenizer,
        max_length: int | None = None,
        long_texts: str = "truncate",
        truncations: Truncations | None = None,
    ) -> CallTokenizer:
        """The tokenizer of a call of ``encoder`` with ``max_length`` (:func:`check_max_length`),
        counting what it cuts into the call's ``truncations`` (a new tally if not given)."""
        limit = check_max_length(encoder, max_length)
        if limit == encoder.max_length:
            reason = f"and were truncated (the limit of {encoder.name})."
        else:
            reason = f"and were truncated (max_length={limit}; the model takes up to {encoder.max_length})."
        reason += " long_texts='window' scores them whole, encoded in overlapping windows."
        truncations = Truncations() if truncations is None else truncations
        truncations.limit, truncations.reason = limit, reason
        backend = rust_copy(encoder.tokenizer, cut_at(limit, long_texts))
        return cls(encoder.tokenizer, limit, long_texts, backend, truncations)

    @property
    def truncating(self) -> int | None:
        """The limit texts are cut at (:func:`cut_at`)."""
        return cut_at(self.limit, self.long_texts)

    def encodings(self, texts: Sequence[str]) -> list:
        """Each text's encoding (``ids``, ``special_tokens_mask``, ``overflowing``): stripped,
        with the special tokens added, cut at :attr:`truncating`, a written special token read as
        text (``encode_special_tokens``, as ``split_special_tokens=True`` in transformers)."""
        stripped = [t.strip() for t in texts]
        if self.backend is None:
            return python_encode(self.tokenizer, stripped, self.truncating)
        encode_batch = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)  # tokenizers < 0.21
        return encode_batch(stripped, add_special_tokens=True)

    def tokenize(self, texts: Sequence[str]) -> TokenizedTexts:
        """``texts`` as :class:`TokenizedTexts`; the ones cut are counted for :meth:`close`."""
        encodings = self.encodings(texts)
        cut = self._cut(texts, encodings)
        ids, special = text_only(
            self.tokenizer, texts, [e.ids for e in encodings], [e.special_tokens_mask for e in encodings]
        )
        return TokenizedTexts(list(texts), ids, special, self.limit, self.long_texts, len(cut))

    def count(self, texts: Sequence[str]) -> list[int]:
        """The token count of each of ``texts`` as :meth:`tokenize` gives it (cut ones counted)."""
        encodings = self.encodings(texts)
        self._cut(texts, encodings)
        return list(map(len, encodings))

    def _cut(self, texts: Sequence[str], encodings: list) -> list[str]:
        """The texts cut at the limit: only one of its full length can have been, so the others'
        ``overflowing`` is not built."""
        if self.truncating is None:
            return []
        cut = [t for t, e in zip(texts, encodings) if len(e) >= self.truncating and e.overflowing]
        self.truncations.add(cut)
        return cut

    def close(self, n_texts: int | None = None) -> None:
        """The call's one truncation warning (:meth:`Truncations.close`)."""
        self.truncations.close(n_texts)


def tokenize(
    encoder: HasTokenizer, texts: Sequence[str], max_length: int | None = None, long_texts: str = "truncate"
) -> tuple[list[list[int]], list[list[int]]]:
    """The ids and special masks of ``texts`` as a call with ``max_length`` and ``long_texts``
    tokenizes them (:class:`CallTokenizer`; one warning if some were cut, each distinct text once)."""
    tokenizer = CallTokenizer.of(encoder, max_length, long_texts)
    tokens = tokenizer.tokenize(texts)
    tokenizer.close(len(texts))
    return tokens.ids, tokens.special


def text_only(tokenizer, texts: Sequence[str], ids: list, special: list) -> tuple[list, list]:
    """``ids`` and ``special`` (the special-token masks) of ``texts``, with every special id that
    a text itself produced (not one the tokenizer added) replaced by the unknown token's id (left
    out where there is none): user text is text. ``split_special_tokens`` keeps most tokenizers
    from reading a written ``[SEP]`` as the special token, but a Unigram vocabulary (XLM-R, T5,
    ALBERT, DeBERTa-v2) holds its special tokens as pieces of score 0, the likeliest there are,
    and segments a written ``<s>`` into that piece (issue 51: transformers' own call does too).
    Only texts that spell a special token are read again, so the cost is a substring test a text."""
    spelled = [token for token in tokenizer.all_special_tokens if token]
    flagged = [i for i, text in enumerate(texts) if any(token in text for token in spelled)]
    if not flagged:
        return ids, special
    unk = tokenizer.unk_token_id
    forbidden = set(tokenizer.all_special_ids) - {unk}
    ids, special = list(ids), list(special)
    for i in flagged:
        kept = [(t, m) for t, m in zip(ids[i], special[i]) if m or t not in forbidden or unk is not None]
        ids[i] = [unk if not m and t in forbidden else t for t, m in kept]
        special[i] = [m for _, m in kept]
    return ids, special
