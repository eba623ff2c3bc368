"""Tokenizing texts for the encoder: token ids with special tokens, truncated to a checked limit.

The ids come from the Rust tokenizer behind the model's fast tokenizer, in one batch call for a
call's texts (:func:`rust_encode`): the ids transformers' own call gives, without its per-text
conversion to Python lists and dicts, which does not run in parallel (issue 45). That call
releases the GIL, so a call cut into parts tokenizes the next part in a thread while the device
encodes this one (:func:`tokenized_ahead`).
"""

from __future__ import annotations

import contextlib
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
    :func:`rust_encodings` of these ``texts``, ``limit`` and ``long_texts``, made ahead (in a
    thread, :func:`tokenized_ahead`, or by the count that planned the call, :func:`token_counts`):
    their truncation is not reported here, since the call that made them ahead reports it once for
    all its texts (:func:`~moverkit._core.call.streaming.chunks`, from that count), not once a
    chunk."""
    window = long_texts == "window"  # checked once, in EncoderRequest
    if not texts:
        return [], []
    reported = encodings is not None
    if encodings is None:
        encodings = rust_encodings(encoder, texts, limit, long_texts)
    if encodings is None:  # a tokenizer without a Rust backend
        return _python_token_ids(encoder, texts, limit, window)
    if len(encodings) != len(texts):
        raise ValueError(f"{len(encodings)} encodings made ahead for {len(texts)} texts")
    n_cut = 0 if reported else truncated(encodings, None if window else limit)
    if n_cut:
        warn_truncated(encoder, n_cut, len(texts), limit)
    return [e.ids for e in encodings], [e.special_tokens_mask for e in encodings]


def rust_encodings(
    encoder: Encoder, texts: Sequence[str], limit: int | None, long_texts: str = "truncate"
) -> list | None:
    """The Rust encodings :func:`token_ids` reads: ``texts`` stripped, encoded by
    :func:`rust_encode` to ``limit`` tokens (whole for ``None``, or for ``long_texts="window"``,
    which cuts them into windows); ``None`` for a tokenizer without a Rust backend. Safe to call from a thread: it
    changes no setting of the user's tokenizer (its Rust copy is configured once, under a lock)."""
    return rust_encode(encoder.tokenizer, [t.strip() for t in texts], None if long_texts == "window" else limit)


class Ahead:
    """A part's Rust encodings made ahead (:func:`rust_encodings`): being made in a thread (a
    ``Future``), or made already (by the count that planned the call). :meth:`take` hands them
    over once and lets them go, so that nothing holds them while the part is scored (about 140
    bytes a token, against the 4,608 bytes of a token's vectors with all-MiniLM-L6-v2)."""

    def __init__(self, encodings: Future | list | None):
        self._encodings = encodings

    def take(self) -> list | None:
        """The encodings (waiting for them, and raising what making them raised); ``None`` once
        taken, or for a tokenizer without a Rust backend: the caller then tokenizes itself."""
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
    :func:`rust_encodings` of ``texts_of(part)``, in order. Where
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
            yield part, Ahead(rust_encodings(encoder, texts_of(part), limit, long_texts))
        return
    end = object()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=TOKENIZER_THREAD)

    def started(part):
        if part is end:
            return None
        return part, Ahead(pool.submit(rust_encodings, encoder, texts_of(part), limit, long_texts))

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
    (:func:`truncated`), and the texts' ``encodings`` (as :func:`rust_encodings` gives them) where
    they were kept, else ``None``."""

    counts: dict[str, int]
    truncated: int
    encodings: list | None


def token_counts(encoder: Encoder, texts: Sequence[str], limit: int | None, keep_within: int = 0) -> TokenCounts | None:
    """The token count of each of ``texts`` as :func:`token_ids` would give it (special tokens
    included, truncated at ``limit``, ``None``: whole), from the Rust tokenizer's batch call;
    ``None`` for a tokenizer without a Rust backend. The encodings are kept while the texts'
    tokens total at most ``keep_within``: a call planned as one chunk from these counts is then
    not tokenized a second time (issue 45: on 100,000 pairs that second pass was about 1.2 s of
    an H100 call). ``limit`` is :func:`rust_encodings`' (``None`` for windows)."""
    counts, kept, total, n_cut = {}, [], 0, 0
    for start in range(0, len(texts), COUNT_SLICE):
        part = texts[start : start + COUNT_SLICE]
        encodings = rust_encodings(encoder, part, limit)  # the ones token_ids reads, kept or not
        if encodings is None:
            return None
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
            copy.no_padding()
            if limit is None:
                copy.no_truncation()
            else:
                copy.enable_truncation(limit, strategy="longest_first", direction=tokenizer.truncation_side)
            copy.encode_special_tokens = True
            copies[limit] = copy
        return copies[limit]


def _python_token_ids(
    encoder: Encoder, texts: Sequence[str], limit: int, window: bool
) -> tuple[list[list[int]], list[list[int]]]:
    """:func:`token_ids` through transformers' call, for a tokenizer with no Rust backend."""
    stripped = [t.strip() for t in texts]
    # Untruncated, the tokenizer would log that the ids exceed the model's limit: windows handle that.
    with quiet_transformers() if window else contextlib.nullcontext():
        encoded = encoder.tokenizer(
            stripped,
            add_special_tokens=True,
            truncation=not window,
            max_length=None if window else limit,
            return_special_tokens_mask=True,
            split_special_tokens=True,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
    ids = encoded["input_ids"]
    at_limit = [] if window else [i for i, row in enumerate(ids) if len(row) >= limit]
    if at_limit:
        with quiet_transformers():
            full = encoder.tokenizer(
                [stripped[i] for i in at_limit], add_special_tokens=True, split_special_tokens=True
            )["input_ids"]
        n_cut = sum(len(row) > limit for row in full)
        if n_cut:
            warn_truncated(encoder, n_cut, len(texts), limit)
    return ids, encoded["special_tokens_mask"]


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
