"""A cache of token clouds and sentence vectors across ``compute`` calls.

A training loop scores new predictions against the same references at every evaluation; their
token clouds are the same every time, so encoding them again is wasted work. :func:`cached_encode`
(what :func:`~moverkit._core.prepare_pairs` calls instead of :func:`~moverkit._core.encoding.encoder.encode`)
keeps the raw token vectors of each text, keyed by the text and by everything that changes its
vectors: the loaded model itself, its layer, the device, the token limit, the long-text mode, the
dtype of the forward pass and the layers kept for an aggregation. :func:`cached_sentence_vectors`
does the same for sbertscore's sentences (keyed by the sentence, the loaded sentence model, its
device, its ``max_seq_length``, the prompt put before the sentence and the dtype). The cache sits before centering, IDF and filtering,
which are recomputed on every call from the call's own texts.

It is OFF by default, because it can change the last digits of a score: a text's vectors depend,
at the rounding level, on the texts it is batched with (the matrix products take other shapes:
measured here, up to 4e-6 per vector entry in float32 and 1e-2 in bfloat16), so an uncached call
encodes a reference among this call's predictions, a cached one gives the vectors it got among an
earlier call's. Encoding is otherwise the same: with ``batch_size=1`` (each text alone) cached and
uncached scores are identical to the last bit (tests/core/test_cache.py).

``moverkit.set_cache()`` turns it on (a budget of :data:`DEFAULT_MAX_BYTES` bytes; each text
costs what it holds: its vectors for every layer it stores, its token ids and the text itself,
which keys it; the least recently used texts go first), ``moverkit.set_cache(0)`` off again; the
environment variable ``MOVERKIT_CACHE_BYTES`` (``"768MB"``) sets the budget at import.
``moverkit.release()`` empties it and hands the freed heap back to the operating system. A
trainable encoder (fine-tuning, whose weights change) never uses it.

The budget is in bytes, not tokens: 200 texts of 140 KB truncated to a few tokens each count as
1,600 tokens but hold 28 MB of strings (the keys).

``with cache_enabled():`` (what ``moverkit.compare`` and a combination score in, so that their
metrics encode each distinct text once) turns it on for the calls of that block, in that thread
(context: a :class:`contextvars.ContextVar`), never for another thread's calls, which see the
cache as ``set_cache`` set it. In a process whose cache is off (or with a budget of its own,
``cache_enabled("256MB")``) the block's texts are kept in a least-recently-used map of the
block's own: they count against the block's budget alone, are evicted only to make
room for the block's own texts, are read by no other block, and are forgotten when the block
ends; the cache holds at most the process's budget plus each running block's. Two threads'
blocks over the same texts thus each encode them, as two blocks one after the other do, and each
block scores as it does alone, to the last bit (a cloud encoded in another call's batches could
differ in its last digits, above). In a process whose cache is on, ``cache_enabled()`` changes
nothing: its calls share the process's entries, as every thread's calls do.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from moverkit._core.base.batching import offsets_from
from moverkit._core.base.heap import trim_heap
from moverkit._core.base.sizes import parse_size, size_from_env
from moverkit._core.encoding.clouds import TokenClouds
from moverkit._core.encoding.encoder import Encoder, encode
from moverkit._core.encoding.memory import emptied_by_release
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import SentenceEncoder, encode_sentences, sentence_truncations
from moverkit._core.encoding.tokens import CallTokenizer, TokenizedTexts, Truncations

DEFAULT_MAX_BYTES = 768 * 2**20
"""Bytes :func:`set_cache` keeps unless told otherwise: about 500,000 tokens of a 384-dimensional
model such as the embedded all-MiniLM-L6-v2 (1.5 kB of float32 vectors a token), or 20,000 texts
of 25 tokens."""

ENV_VAR = "MOVERKIT_CACHE_BYTES"
"""Environment variable read at import: the budget in bytes, as ``"768MB"`` (unset or ``0``: the cache is off)."""

_ID_BYTES = 36
"""Bytes of one token id in a Python list: an 8-byte pointer and, past 256, a 28-byte int object."""


@dataclass(frozen=True)
class _Cloud:
    """The raw (not centered) token vectors of one text, as :func:`encode` gives them."""

    vectors: torch.Tensor  # (n, dim)
    token_ids: list[int]
    special: torch.Tensor  # (n,) bool
    layer_vectors: torch.Tensor | None  # (n_layers, n, dim)

    def nbytes(self, text: str) -> int:
        """Bytes this cloud and its key ``text`` hold (tensor storage, the id list, the string)."""
        tensors = self.vectors.nbytes + self.special.nbytes
        tensors += 0 if self.layer_vectors is None else self.layer_vectors.nbytes
        return tensors + sys.getsizeof(self.token_ids) + _ID_BYTES * len(self.token_ids) + sys.getsizeof(text)


@dataclass(frozen=True)
class _SentenceVector:
    """The raw (not centered) embedding of one sentence, as :func:`encode_sentences` gives it, and
    whether the model ``cut`` it at its ``max_seq_length`` (a call that finds it here still counts
    it in its truncation warning)."""

    vector: torch.Tensor  # (dim,)
    cut: bool

    def nbytes(self, text: str) -> int:
        return self.vector.nbytes + sys.getsizeof(text)


class _Scope:
    """Whose entries: the process's (:func:`set_cache`) or one :func:`cache_enabled` block's; its
    budget in bytes (0: off), its ``entries`` (a least-recently-used map of ``(config, text)`` to a
    cloud or sentence vector and its size), the ``bytes`` and ``texts`` they hold, its ``hits`` and
    ``misses``."""

    __slots__ = ("max_bytes", "entries", "bytes", "texts", "hits", "misses")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple, tuple[_Cloud | _SentenceVector, int]] = OrderedDict()
        self.bytes = self.texts = self.hits = self.misses = 0


class _Cache:
    """The scopes' entries under one lock. Each scope keeps its own least-recently-used map and
    counts its own bytes against its own budget, so that evicting takes the least recently used
    entry of that scope at once, and forgetting a block's entries touches no other scope's."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def get(self, scope: _Scope, key: tuple) -> _Cloud | _SentenceVector | None:
        with self._lock:
            entry = scope.entries.get(key)
            if entry is None:
                scope.misses += 1
                return None
            scope.hits += 1
            scope.entries.move_to_end(key)
            return entry[0]

    def put(self, scope: _Scope, key: tuple, cloud: _Cloud | _SentenceVector) -> None:
        size = cloud.nbytes(key[1])
        with self._lock:
            if size > scope.max_bytes or key in scope.entries:
                return
            scope.entries[key] = (cloud, size)
            scope.bytes += size
            scope.texts += 1
            self.shrink(scope)

    def shrink(self, scope: _Scope) -> None:
        """Evict ``scope``'s least recently used entries until it is within its budget."""
        with self._lock:
            while scope.bytes > scope.max_bytes:
                _, (_, size) = scope.entries.popitem(last=False)
                scope.bytes -= size
                scope.texts -= 1

    def drop(self, scope: _Scope) -> None:
        """Forget every entry of ``scope``."""
        with self._lock:
            scope.entries.clear()
            scope.bytes = scope.texts = 0


def _budget_from_env() -> int:
    """The budget ``MOVERKIT_CACHE_BYTES`` gives (0, off, when unset)."""
    return size_from_env(ENV_VAR, 0, allow_zero=True)


_CACHE = _Cache()
_PROCESS = _Scope(_budget_from_env())
_BLOCK: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("moverkit_cache_block", default=None)

# One number per loaded model object, never reused (unlike id()): a model released and loaded
# again gets a new one, so nothing computed by another object is ever returned.
_MODEL_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NEXT_ID = itertools.count()


def _scope() -> _Scope:
    """The scope the calls of this context read and fill: their block's, else the process's."""
    return _BLOCK.get() or _PROCESS


def set_cache(max_bytes: int | str = DEFAULT_MAX_BYTES) -> None:
    """Turn the process's cache of token clouds and sentence vectors on with a budget of
    ``max_bytes`` (bytes, or ``"1GB"``; ``moverkit.set_cache``); ``0`` turns it off and empties it,
    a smaller budget drops the least recently used texts at once. A :func:`cache_enabled` block
    running meanwhile keeps its own budget."""
    max_bytes = parse_size(max_bytes, what="max_bytes (0 turns the cache off)", allow_zero=True)
    with _CACHE._lock:
        _PROCESS.max_bytes = max_bytes
        _CACHE.shrink(_PROCESS)


@contextlib.contextmanager
def cache_enabled(max_bytes: int | str | None = None) -> Iterator[None]:
    """The cache on for the calls of a ``with`` block, in this thread (context), even on an
    error; the other threads see it as :func:`set_cache` set it. What a loop that scores the same
    texts with several metrics or settings uses, so that each distinct text is encoded once.

    ``max_bytes`` (as :func:`set_cache`) is the block's budget: its calls then keep their texts
    apart, forgotten when the block ends. ``None`` keeps the cache the block is in (an outer
    block's, else the process's) when that is on, else gives the block :data:`DEFAULT_MAX_BYTES`
    of its own."""
    if max_bytes is None and _scope().max_bytes:
        yield
        return
    if max_bytes is not None:
        max_bytes = parse_size(max_bytes, what="max_bytes (0 turns the cache off)", allow_zero=True)
    block = _Scope(DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
    token = _BLOCK.set(block)
    try:
        yield
    finally:
        _BLOCK.reset(token)
        _CACHE.drop(block)


def clear_cache() -> None:
    """Empty the cache of token clouds and sentence vectors that this context sees, and the
    process's (:func:`_forget_cached`), and hand the freed heap back to the operating system
    (:func:`trim_heap`)."""
    _forget_cached()
    trim_heap()


@emptied_by_release
def _forget_cached() -> None:
    """Empty the cache of token clouds and sentence vectors that this context sees, and the
    process's, and zero their counts (``moverkit.release()`` calls it). Blocks running in other
    threads keep theirs until they end."""
    with _CACHE._lock:
        for scope in {_scope(), _PROCESS}:
            _CACHE.drop(scope)
            scope.hits = scope.misses = 0


def cache_info() -> dict:
    """The cache this context sees (its block's, else the process's): ``max_bytes``, ``bytes``
    (held now), ``texts``, and the ``hits`` and ``misses`` so far."""
    scope = _scope()
    with _CACHE._lock:
        return {
            "max_bytes": scope.max_bytes,
            "bytes": scope.bytes,
            "texts": scope.texts,
            "hits": scope.hits,
            "misses": scope.misses,
        }


def cached_encode(
    encoder: Encoder,
    texts: Sequence[str],
    tokenizer: CallTokenizer,
    request: EncoderRequest,
    *,
    layers: Sequence[int] | None = None,
    tokens: TokenizedTexts | None = None,
) -> TokenClouds:
    """The :func:`~moverkit._core.encoding.encoder.encode` of ``texts`` by the call's
    ``tokenizer`` (``tokens``: those texts tokenized already, ahead of their turn), encoding only
    the texts the cache does not hold, tokenized only then, and keeping the new ones. When every
    text misses, ``encode``'s own result is returned."""
    if tokens is not None and (len(tokens) != len(texts) or list(tokens.texts) != list(texts)):
        raise ValueError(f"cached_encode was given the tokens of other texts than its {len(texts)} texts")
    scope = _scope()
    if scope.max_bytes == 0 or encoder.trainable or encoder.model.training:
        return encode(encoder, tokenizer.tokenize(texts) if tokens is None else tokens, request, layers=layers)
    config = (_model_id(encoder.model), encoder.name, encoder.layer, str(encoder.device))
    config += (tokenizer.limit, tokenizer.long_texts, request.dtype, None if layers is None else tuple(layers))
    clouds = [_CACHE.get(scope, (config, text)) for text in texts]
    missing = [i for i, cloud in enumerate(clouds) if cloud is None]
    if not missing:
        return _join(encoder, list(texts), clouds, config[-1])
    if tokens is not None:
        tokens = tokens.subset(missing) if len(missing) < len(texts) else tokens
    else:
        tokens = tokenizer.tokenize([texts[i] for i in missing])
    encoded = encode(encoder, tokens, request, layers=layers)
    split = _split(encoded)
    for text, cloud in zip(tokens.texts, split):
        _CACHE.put(scope, (config, text), cloud)
    if len(missing) == len(texts):
        return encoded
    new = iter(split)
    return _join(encoder, list(texts), [next(new) if cloud is None else cloud for cloud in clouds], encoded.layers)


def cached_sentence_vectors(
    encoder: SentenceEncoder,
    sentences: Sequence[str],
    request: EncoderRequest,
    truncations: Truncations | None = None,
) -> torch.Tensor:
    """The :func:`~moverkit._core.encoding.sentences.encode_sentences` of ``sentences`` (distinct),
    encoding only the sentences the cache does not hold and keeping the new ones. The sentences
    cut at the model's limit, encoded now or found cut in the cache, go into ``truncations`` (the
    call's, :func:`~moverkit._core.encoding.sentences.sentence_truncations`), whose call warns
    once; without one, into a tally of their own, which warns here."""
    tally = sentence_truncations(encoder) if truncations is None else truncations
    scope = _scope()
    if scope.max_bytes == 0 or encoder.model.training:
        vectors = encode_sentences(encoder, sentences, request, tally)
    else:
        config = ("sentences", _model_id(encoder.model), encoder.name, str(encoder.device))
        config += (encoder.model.max_seq_length, encoder.prompt, request.dtype)
        found = [_CACHE.get(scope, (config, sentence)) for sentence in sentences]
        missing = [i for i, entry in enumerate(found) if entry is None]
        if len(missing) == len(sentences):
            vectors = encode_sentences(encoder, sentences, request, tally)
        else:
            blank = torch.zeros(encoder.dim, dtype=torch.float32, device=encoder.device)
            vectors = torch.stack([blank if entry is None else entry.vector for entry in found])
            if missing:
                vectors[missing] = encode_sentences(encoder, [sentences[i] for i in missing], request, tally)
        tally.add(sentence for sentence, entry in zip(sentences, found) if entry is not None and entry.cut)
        for i in missing:
            entry = _SentenceVector(vectors[i].clone(), tally.holds(sentences[i]))
            _CACHE.put(scope, (config, sentences[i]), entry)
    if truncations is None:
        tally.close(len(sentences))
    return vectors


def _model_id(model) -> int:
    """The number of the loaded model object ``model`` in the cache's keys."""
    with _CACHE._lock:
        return _MODEL_IDS.setdefault(model, next(_NEXT_ID))


def _split(clouds: TokenClouds) -> list[_Cloud]:
    """Each text's own rows of ``clouds`` (copies, so a cached text does not hold the whole call)."""
    offsets = clouds.offsets.tolist()
    return [
        _Cloud(
            vectors=clouds.vectors[a:b].clone(),
            token_ids=clouds.token_ids[i],
            special=clouds.special[a:b].clone(),
            layer_vectors=None if clouds.layer_vectors is None else clouds.layer_vectors[:, a:b].clone(),
        )
        for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:]))
    ]


def _join(encoder: Encoder, texts: list[str], clouds: list[_Cloud], layers) -> TokenClouds:
    """The :class:`TokenClouds` of ``texts`` from their clouds, in order."""
    device = encoder.device
    dim = encoder.dim
    offsets = offsets_from(torch.tensor([len(c.token_ids) for c in clouds], dtype=torch.long))
    empty = torch.empty(0, dim, dtype=torch.float32, device=device)
    vectors = torch.cat([c.vectors for c in clouds]) if clouds else empty
    special = torch.cat([c.special for c in clouds]) if clouds else torch.empty(0, dtype=torch.bool, device=device)
    layer_vectors = None
    if layers is not None:
        layer_vectors = (
            torch.cat([c.layer_vectors for c in clouds], dim=1) if clouds else empty.expand(len(layers), 0, dim)
        )
    return TokenClouds(
        texts=texts,
        vectors=vectors,
        offsets=offsets.to(device),
        token_ids=[c.token_ids for c in clouds],
        special=special,
        tokenizer=encoder.tokenizer,
        layer_vectors=layer_vectors,
        layers=layers,
    )
