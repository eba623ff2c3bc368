"""A cache of token clouds and sentence vectors across ``compute`` calls.

A training loop scores new predictions against the same references at every evaluation; their
token clouds are the same every time, so encoding them again is wasted work. :func:`cached_encode`
(what :func:`~moverkit._core.prepare_pairs` calls instead of :func:`~moverkit._core.encoding.encoder.encode`)
keeps the raw token vectors of each text, keyed by the text and by everything that changes its
vectors: the loaded model itself, its layer, the device, the token limit, the long-text mode, the
dtype of the forward pass and the layers kept for an aggregation. :func:`cached_sentence_vectors`
does the same for sbertscore's sentences (keyed by the sentence, the loaded sentence model, its
device, its ``max_seq_length`` and the dtype). The cache sits before centering, IDF and filtering,
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
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

import torch

from moverkit._core.base.batching import offsets_from
from moverkit._core.base.heap import trim_heap
from moverkit._core.base.sizes import parse_size, size_from_env
from moverkit._core.encoding.encoder import Encoder, TokenClouds, encode
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import SentenceEncoder, encode_sentences
from moverkit._core.encoding.tokens import CallTokenizer, TokenizedTexts

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
    """The raw (not centered) embedding of one sentence, as :func:`encode_sentences` gives it."""

    vector: torch.Tensor  # (dim,)

    def nbytes(self, text: str) -> int:
        return self.vector.nbytes + sys.getsizeof(text)


class _Cache:
    """A least-recently-used map of texts' clouds (and sentences' vectors) under a budget of
    bytes. A key is ``(config, text)``; each entry remembers its size."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._clouds: OrderedDict[Hashable, tuple[_Cloud, int]] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable) -> _Cloud | None:
        with self._lock:
            entry = self._clouds.get(key)
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
            self._clouds.move_to_end(key)
            return entry[0]

    def put(self, key: tuple, cloud: _Cloud | _SentenceVector) -> None:
        size = cloud.nbytes(key[1])
        with self._lock:
            if size > self.max_bytes or key in self._clouds:
                return
            self._clouds[key] = (cloud, size)
            self.bytes += size
            self.shrink(self.max_bytes)

    def shrink(self, max_bytes: int) -> None:
        with self._lock:
            while self.bytes > max_bytes:
                _, (_, size) = self._clouds.popitem(last=False)
                self.bytes -= size

    def __len__(self) -> int:
        return len(self._clouds)


def _budget_from_env() -> int:
    """The budget ``MOVERKIT_CACHE_BYTES`` gives (0, off, when unset)."""
    return size_from_env(ENV_VAR, 0, allow_zero=True)


_CACHE = _Cache(_budget_from_env())

# One number per loaded model object, never reused (unlike id()): a model released and loaded
# again gets a new one, so nothing computed by another object is ever returned.
_MODEL_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NEXT_ID = itertools.count()


def set_cache(max_bytes: int | str = DEFAULT_MAX_BYTES) -> None:
    """Turn the cache of token clouds and sentence vectors on with a budget of ``max_bytes`` (bytes, or ``"1GB"``;
    ``moverkit.set_cache``); ``0`` turns it off and empties it, a smaller budget drops the least
    recently used texts at once."""
    max_bytes = parse_size(max_bytes, what="max_bytes (0 turns the cache off)", allow_zero=True)
    with _CACHE._lock:
        _CACHE.max_bytes = max_bytes
        _CACHE.shrink(max_bytes)


@contextlib.contextmanager
def cache_enabled(max_bytes: int | str | None = None) -> Iterator[None]:
    """The cache on for the duration of a ``with`` block, then back to the budget it had before
    (off and emptied if it was off), even on an error. What a loop that scores the same texts
    with several metrics or settings uses, so that each distinct text is encoded once.

    ``max_bytes`` (as :func:`set_cache`) sets the budget for the block; ``None`` keeps a budget
    the user already set, else :data:`DEFAULT_MAX_BYTES`."""
    before = cache_info()["max_bytes"]
    set_cache(max_bytes if max_bytes is not None else before or DEFAULT_MAX_BYTES)
    try:
        yield
    finally:
        set_cache(before)


def clear_cache() -> None:
    """Empty the cache of token clouds and sentence vectors (``moverkit.release()`` calls it) and hand the freed heap
    back to the operating system (:func:`trim_heap`)."""
    with _CACHE._lock:
        _CACHE.shrink(0)
        _CACHE.hits = _CACHE.misses = 0
    trim_heap()


def cache_info() -> dict:
    """``max_bytes``, ``bytes`` (held now), ``texts``, and the ``hits`` and ``misses`` so far."""
    with _CACHE._lock:
        return {
            "max_bytes": _CACHE.max_bytes,
            "bytes": _CACHE.bytes,
            "texts": len(_CACHE),
            "hits": _CACHE.hits,
            "misses": _CACHE.misses,
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
    if _CACHE.max_bytes == 0 or encoder.trainable or encoder.model.training:
        return encode(encoder, tokenizer.tokenize(texts) if tokens is None else tokens, request, layers=layers)
    config = (_model_id(encoder.model), encoder.name, encoder.layer, str(encoder.device))
    config += (tokenizer.limit, tokenizer.long_texts, request.dtype, None if layers is None else tuple(layers))
    clouds = [_CACHE.get((config, text)) for text in texts]
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
        _CACHE.put((config, text), cloud)
    if len(missing) == len(texts):
        return encoded
    new = iter(split)
    return _join(encoder, list(texts), [next(new) if cloud is None else cloud for cloud in clouds], encoded.layers)


def cached_sentence_vectors(
    encoder: SentenceEncoder, sentences: Sequence[str], request: EncoderRequest
) -> torch.Tensor:
    """The :func:`~moverkit._core.encoding.sentences.encode_sentences` of ``sentences`` (distinct),
    encoding only the sentences the cache does not hold and keeping the new ones."""
    if _CACHE.max_bytes == 0 or encoder.model.training:
        return encode_sentences(encoder, sentences, request)
    config = ("sentences", _model_id(encoder.model), encoder.name, str(encoder.device))
    config += (encoder.model.max_seq_length, request.dtype)
    found = [_CACHE.get((config, sentence)) for sentence in sentences]
    missing = [i for i, entry in enumerate(found) if entry is None]
    if len(missing) == len(sentences):
        vectors = encode_sentences(encoder, sentences, request)
    else:
        blank = torch.zeros(encoder.dim, dtype=torch.float32, device=encoder.device)
        vectors = torch.stack([blank if entry is None else entry.vector for entry in found])
        if missing:
            vectors[missing] = encode_sentences(encoder, [sentences[i] for i in missing], request)
    for i in missing:
        _CACHE.put((config, sentences[i]), _SentenceVector(vectors[i].clone()))
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
    dim = encoder.model.config.hidden_size
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
