"""Tokenizing texts for the encoder: token ids with special tokens, truncated to a checked limit.

The ids come from the Rust tokenizer behind the model's fast tokenizer, in one batch call for a
call's texts (:func:`rust_encode`; a tokenizer without one: :func:`python_encode`): the ids transformers' own call gives, without its per-text
conversion to Python lists and dicts, which does not run in parallel (issue 45). That call
releases the GIL, so a call cut into parts tokenizes the next part in a thread while the device
encodes this one (:func:`tokenized_ahead`).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from moverkit._core.base import checks
from moverkit._core.base.hardware import tokenizes_ahead
from moverkit._core.base.user_warnings import warn_user

if TYPE_CHECKING:
    from moverkit._core.encoding.encoder import Encoder

_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_transformers():
    """Silence the expected load-time messages (unused pooler weights, weight-loading bars)."""
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


def check_max_length(encoder: Encoder, max_length: int | None) -> int:
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


def tokenize(
    encoder: Encoder, texts: Sequence[str], max_length: int | None = None, long_texts: str = "truncate"
) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids with special tokens, truncated to :func:`check_max_length` (warns once, with a
    count), and the mask of the special tokens the tokenizer added ([CLS], [SEP], ...; not [UNK]).
    With ``long_texts="window"`` nothing is truncated: :func:`encode` cuts long texts into windows
    (:mod:`~moverkit._core.base.windows`).

    User text is text: a text that spells a special token (``"[CLS]"``, ``"[MASK]"``, ``"<s>"``) is
    split into ordinary tokens (``split_special_tokens``), so special ids only ever mark what the
    tokenizer adds, and no text can inject them.
    """
    return token_ids(encoder, texts, check_max_length(encoder, max_length), long_texts)


def token_ids(
    encoder: Encoder,
    texts: Sequence[str],
    limit: int,
    long_texts: str = "truncate",
    encodings: list | None = None,
) -> tuple[list[list[int]], list[list[int]]]:
    """:func:`tokenize` to a token ``limit`` already checked (:func:`check_max_length`): what a
    prepared call, which checked its limit once, tokenizes with. ``encodings``: the
    :func:`encodings_of` of these ``texts``, ``limit`` and ``long_texts``, made ahead (in a
    thread, :func:`tokenized_ahead`, or by the count that planned the call, :func:`token_counts`):
    their truncation is not reported here, since the call that made them ahead reports it once for
    all its texts (:func:`~moverkit._core.call.streaming.chunks`, from that count), not once a
    chunk."""
    if not texts:
        return [], []
    reported = encodings is not None
    if encodings is None:
        encodings = encodings_of(encoder, texts, limit, long_texts)
    if len(encodings) != len(texts):
        raise ValueError(f"{len(encodings)} encodings made ahead for {len(texts)} texts")
    n_cut = 0 if reported else truncated(encodings, None if long_texts == "window" else limit)
    if n_cut:
        warn_truncated(encoder, n_cut, len(texts), limit)
    return text_only(encoder.tokenizer, texts, [e.ids for e in encodings], [e.special_tokens_mask for e in encodings])


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


def encodings_of(encoder: Encoder, texts: Sequence[str], limit: int | None, long_texts: str = "truncate") -> list:
    """The encodings :func:`token_ids` reads (each with ``ids``, ``special_tokens_mask`` and
    ``overflowing``): ``texts`` stripped, encoded to ``limit`` tokens (whole for ``None``, or for
    ``long_texts="window"``, which cuts them into windows) by :func:`rust_encode`, or by
    :func:`python_encode` for a tokenizer without a Rust backend. Safe to call from a thread: it
    changes no setting of the user's tokenizer (its Rust copy is configured once, under a lock)."""
    stripped = [t.strip() for t in texts]
    limit = None if long_texts == "window" else limit
    encoded = rust_encode(encoder.tokenizer, stripped, limit)
    return python_encode(encoder.tokenizer, stripped, limit) if encoded is None else encoded


class Ahead:
    """A part's encodings made ahead (:func:`encodings_of`): being made in a thread (a
    ``Future``), or made already (by the count that planned the call). :meth:`take` hands them
    over once and lets them go, so that nothing holds them while the part is scored (about 140
    bytes a token, against the 4,608 bytes of a token's vectors with all-MiniLM-L6-v2)."""

    def __init__(self, encodings: Future | list | None):
        self._encodings = encodings

    def take(self) -> list | None:
        """The encodings (waiting for them, and raising what making them raised); ``None`` once
        taken: the caller then tokenizes itself."""
        encodings, self._encodings = self._encodings, None
        return encodings.result() if isinstance(encodings, Future) else encodings


Part = TypeVar("Part")

TOKENIZER_THREAD = "moverkit-tokenize"


def tokenized_ahead(
    encoder: Encoder,
    parts: Iterable[Part],
    texts_of: Callable[[Part], Sequence[str]],
    limit: int,
    long_texts: str = "truncate",
) -> Iterator[tuple[Part, Ahead]]:
    r"""Each of ``parts`` (a call's chunks, or slices of its texts) with its :class:`Ahead`, the
    :func:`encodings_of` of ``texts_of(part)``, in order. Where
    :func:`~moverkit._core.base.hardware.tokenizes_ahead` (on an accelerator, by default), one
    background thread tokenizes, and part :math:`k+1`'s tokenization starts before part :math:`k`
    is handed over: it runs while the caller encodes part :math:`k` (issue 45, item 7: the Rust
    tokenizer releases the GIL, and the host would otherwise wait for the device), so a call of
    :math:`K` parts costs about :math:`t_1 + \sum_k \max(t_{k+1}, f_k)` instead of
    :math:`\sum_k (t_k + f_k)` for tokenizations :math:`t` and forward passes :math:`f`. At most
    two parts' encodings are held at once (the next one's, and this one's until it is taken).
    Elsewhere each part is tokenized in turn, when it is handed over. Closing the generator (use
    :func:`contextlib.closing`) waits for the tokenization in flight."""
    parts = iter(parts)
    if not tokenizes_ahead(encoder.device):
        for part in parts:
            yield part, Ahead(encodings_of(encoder, texts_of(part), limit, long_texts))
        return
    end = object()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=TOKENIZER_THREAD)

    def started(part):
        if part is end:
            return None
        return part, Ahead(pool.submit(encodings_of, encoder, texts_of(part), limit, long_texts))

    try:
        ahead = started(next(parts, end))
        while ahead is not None:
            current, ahead = ahead, started(next(parts, end))
            yield current
    finally:
        # A generator left in a reference cycle may be collected on the pool's own thread, which
        # cannot wait for itself.
        pool.shutdown(wait=not threading.current_thread().name.startswith(TOKENIZER_THREAD), cancel_futures=True)


def truncated(encodings: list, limit: int | None) -> int:
    """How many of :func:`rust_encode`'s ``encodings`` (at token ``limit``; ``None``: none) were
    cut: only one at the limit can have been, so the others' ``overflowing`` is not built."""
    if limit is None:
        return 0
    return sum(bool(e.overflowing) for e in encodings if len(e) >= limit)


COUNT_SLICE = 8192
"""Texts a :func:`token_counts` batch call encodes at once: past ``keep_within`` their encodings
are dropped slice by slice, so counting a million texts holds a few thousand encodings, not a
million."""


@dataclass(frozen=True)
class TokenCounts:
    """:func:`token_counts`' answer: each text's ``counts``, how many texts were ``truncated``
    (:func:`truncated`), and the texts' ``encodings`` (as :func:`encodings_of` gives them) where
    they were kept, else ``None``."""

    counts: dict[str, int]
    truncated: int
    encodings: list | None


def token_counts(encoder: Encoder, texts: Sequence[str], limit: int | None, keep_within: int = 0) -> TokenCounts:
    """The token count of each of ``texts`` as :func:`token_ids` would give it (special tokens
    included, truncated at ``limit``, ``None``: whole), from the Rust tokenizer's batch call
    (or :func:`python_encode` for a tokenizer without a Rust backend). The encodings are kept while the texts'
    tokens total at most ``keep_within``: a call planned as one chunk from these counts is then
    not tokenized a second time (issue 45: on 100,000 pairs that second pass was about 1.2 s of
    an H100 call). ``limit`` is :func:`encodings_of`' (``None`` for windows)."""
    counts, kept, total, n_cut = {}, [], 0, 0
    for start in range(0, len(texts), COUNT_SLICE):
        part = texts[start : start + COUNT_SLICE]
        encodings = encodings_of(encoder, part, limit)  # the ones token_ids reads, kept or not
        lengths = list(map(len, encodings))
        counts.update(zip(part, lengths))
        total += sum(lengths)
        n_cut += truncated(encodings, limit)
        if kept is not None and total <= keep_within:
            kept.extend(encodings)
        else:
            kept = None
    return TokenCounts(counts, n_cut, kept)


def rust_encode(tokenizer, texts: list[str], limit: int | None) -> list | None:
    """``texts`` encoded by the Rust tokenizer behind a fast ``tokenizer`` in one batch call
    (``tokenizers.Tokenizer.encode_batch_fast``: no character offsets, which nothing here reads),
    with its special tokens added, truncated to ``limit`` tokens (``None``: whole; a truncated
    text's ``overflowing`` is not empty) and user text read as text (``encode_special_tokens``:
    ``"[CLS]"`` in a text is ordinary tokens, as ``split_special_tokens=True`` makes it in
    transformers); ``None`` for a tokenizer without a Rust backend.

    These are the ids transformers' own call gives (tests: every WMT17 text and fuzzed texts),
    without its per-text conversion to Python lists and dicts, which does not run in parallel:
    on 4,982 WMT17 texts transformers' call took 2.0x ``encode_batch_fast`` on 16 cores and 1.6x
    on two (issue 45). The Rust tokenizer is a copy per ``(tokenizer, limit)``, configured once
    (no padding: :func:`~moverkit._core.base.batching.pad` pads), so that no call changes the
    settings of the tokenizer a user or another thread holds."""
    backend = _rust_tokenizer(tokenizer, limit)
    if backend is None:
        return None
    encode_batch = getattr(backend, "encode_batch_fast", backend.encode_batch)  # tokenizers < 0.21: no _fast
    return encode_batch(texts, add_special_tokens=True)


_RUST_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per tokenizer (as long as it lives), its Rust copies of :func:`rust_encode` by token limit."""


def _rust_tokenizer(tokenizer, limit: int | None):
    """The Rust tokenizer of :func:`rust_encode` for ``tokenizer`` and ``limit``, made once."""
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None:
        return None
    with _LOCK:
        copies = _RUST_TOKENIZERS.setdefault(tokenizer, {})
        if limit not in copies:
            from tokenizers import Tokenizer

            copy = Tokenizer.from_str(backend.to_str())
            # The model itself, not its JSON: a Unigram score read back from JSON can be one ulp
            # off and change which of two near-tied segmentations wins (issue 51).
            copy.model = backend.model
            copy.no_padding()
            if limit is None:
                copy.no_truncation()
            else:
                copy.enable_truncation(limit, strategy="longest_first", direction=tokenizer.truncation_side)
            copy.encode_special_tokens = True
            copies[limit] = copy
        return copies[limit]


@dataclass(frozen=True)
class PythonEncoding:
    """One text's encoding by a tokenizer without a Rust backend (:func:`python_encode`), with
    the fields of a Rust ``Encoding`` that :func:`token_ids` and :func:`truncated` read."""

    ids: list[int]
    special_tokens_mask: list[int]
    overflowing: bool  # whether the text was cut

    def __len__(self) -> int:
        return len(self.ids)


def python_encode(tokenizer, texts: list[str], limit: int | None) -> list[PythonEncoding]:
    """``texts`` encoded by a Python ``tokenizer`` (no Rust backend: a slow BERT tokenizer,
    ByT5's) as transformers' own call with ``truncation=True, max_length=limit`` and
    ``split_special_tokens=True`` gives them: the text's tokens, cut to the room ``limit`` leaves
    beside the special tokens (on the tokenizer's ``truncation_side``), then the special tokens
    added (``build_inputs_with_special_tokens``).

    Built here, because transformers 5's Python tokenizers do not keep the promise that a text is
    text: their ``tokenize(..., split_special_tokens=True)`` calls the model's ``_tokenize``
    without it, and a slow BERT tokenizer then keeps a written ``"[SEP]"`` whole, a real [SEP] id
    (issue 51). :func:`_python_tokens` passes it on; a special id that a text still yields is
    replaced where :func:`token_ids` reads it (:func:`text_only`)."""
    room = None if limit is None else max(limit - tokenizer.num_special_tokens_to_add(pair=False), 0)
    left = getattr(tokenizer, "truncation_side", "right") == "left"
    encoded = []
    with quiet_transformers():  # a text past the model's limit is logged: the caller counts and warns once
        for text in texts:
            content = tokenizer.convert_tokens_to_ids(_python_tokens(tokenizer, text))
            cut = room is not None and len(content) > room
            if cut:
                content = content[len(content) - room :] if left else content[:room]
            encoded.append(
                PythonEncoding(
                    ids=tokenizer.build_inputs_with_special_tokens(content),
                    special_tokens_mask=tokenizer.get_special_tokens_mask(content),
                    overflowing=cut,
                )
            )
    return encoded


def _python_tokens(tokenizer, text: str) -> list[str]:
    """A Python tokenizer's tokens of ``text`` with written special tokens split as text: its own
    ``tokenize(text, split_special_tokens=True)``, which is ``prepare_for_tokenization`` then
    ``_tokenize``, with the flag passed on to a ``_tokenize`` that takes it (transformers 5 drops
    it there; a slow BERT tokenizer needs it not to keep "[SEP]" whole)."""
    inner = getattr(tokenizer, "_tokenize", None)
    if inner is None or "split_special_tokens" not in inspect.signature(inner).parameters:
        return tokenizer.tokenize(text, split_special_tokens=True)
    text, _ = tokenizer.prepare_for_tokenization(text)
    return tokenizer._tokenize(text, split_special_tokens=True)


def warn_truncated(encoder: Encoder, n_cut: int, n_texts: int, limit: int) -> None:
    """The one warning of a call whose ``n_cut`` of ``n_texts`` texts were cut at ``limit`` tokens."""
    warn_user(
        f"{n_cut} of {n_texts} texts are longer than {limit} tokens and were truncated "
        + (
            f"(the limit of {encoder.name})."
            if limit == encoder.max_length
            else f"(max_length={limit}; the model takes up to {encoder.max_length})."
        )
        + " long_texts='window' scores them whole, encoded in overlapping windows.",
    )
