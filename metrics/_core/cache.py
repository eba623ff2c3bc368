"""A cache of token clouds across ``compute`` calls.

A training loop scores new predictions against the same references at every evaluation; their
token clouds are the same every time, so encoding them again is wasted work. :func:`cached_encode`
(what :func:`~moverkit._core.prepare_pairs` calls instead of :func:`~moverkit._core.encoder.encode`)
keeps the raw token vectors of each text, keyed by the text and by everything that changes its
vectors: the loaded model itself, its layer, the device, the token limit, the long-text mode, the
dtype of the forward pass and the layers kept for an aggregation. The cache sits before centering,
IDF and filtering, which are recomputed on every call from the call's own texts.

It is OFF by default, because it can change the last digits of a score: a text's vectors depend,
at the rounding level, on the texts it is batched with (the matrix products take other shapes:
measured here, up to 4e-6 per vector entry in float32 and 1e-2 in bfloat16), so an uncached call
encodes a reference among this call's predictions, a cached one gives the vectors it got among an
earlier call's. Encoding is otherwise the same: with ``batch_size=1`` (each text alone) cached and
uncached scores are identical to the last bit (tests/core/test_cache.py).

``moverkit.set_cache()`` turns it on (a budget of :data:`DEFAULT_MAX_TOKENS` token rows; each
text costs its number of tokens times the number of layers it stores; the least recently used
texts go first), ``moverkit.set_cache(max_tokens=0)`` off again; the environment variable
``MOVERKIT_CACHE_TOKENS`` sets the budget at import. ``moverkit.release()`` empties it. A
trainable encoder (fine-tuning, whose weights change) never uses it.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from . import checks
from .encoder import Encoder, TokenClouds, check_max_length, encode

DEFAULT_MAX_TOKENS = 500_000
"""Token rows :func:`set_cache` keeps unless told otherwise: about 770 MB of float32 vectors for a 384-dimensional model such as
the embedded all-MiniLM-L6-v2 (1.5 kB a token), or 20,000 texts of 25 tokens."""

ENV_VAR = "MOVERKIT_CACHE_TOKENS"
"""Environment variable read at import: the token budget (unset or ``0``: the cache is off)."""


@dataclass(frozen=True)
class _Cloud:
    """The raw (not centered) token vectors of one text, as :func:`encode` gives them."""

    vectors: torch.Tensor  # (n, dim)
    token_ids: list[int]
    special: torch.Tensor  # (n,) bool
    layer_vectors: torch.Tensor | None  # (n_layers, n, dim)

    @property
    def cost(self) -> int:
        layers = 0 if self.layer_vectors is None else self.layer_vectors.shape[0]
        return len(self.token_ids) * (1 + layers)


class _Cache:
    """A least-recently-used map of texts' clouds under a budget of token rows."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.tokens = 0
        self.hits = 0
        self.misses = 0
        self._clouds: OrderedDict[Hashable, _Cloud] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable) -> _Cloud | None:
        with self._lock:
            cloud = self._clouds.get(key)
            if cloud is None:
                self.misses += 1
                return None
            self.hits += 1
            self._clouds.move_to_end(key)
            return cloud

    def put(self, key: Hashable, cloud: _Cloud) -> None:
        with self._lock:
            if cloud.cost > self.max_tokens or key in self._clouds:
                return
            self._clouds[key] = cloud
            self.tokens += cloud.cost
            self.shrink(self.max_tokens)

    def shrink(self, max_tokens: int) -> None:
        with self._lock:
            while self.tokens > max_tokens:
                _, cloud = self._clouds.popitem(last=False)
                self.tokens -= cloud.cost

    def __len__(self) -> int:
        return len(self._clouds)


def _budget_from_env() -> int:
    value = os.environ.get(ENV_VAR)
    if value is None:
        return 0
    try:
        budget = int(value)
    except ValueError as err:
        raise ValueError(f"{ENV_VAR} must be a number of tokens (0 turns the cache off), got {value!r}") from err
    if budget < 0:
        raise ValueError(f"{ENV_VAR} must be >= 0 (0 turns the cache off), got {value!r}")
    return budget


_CACHE = _Cache(_budget_from_env())

# One number per loaded model object, never reused (unlike id()): a model released and loaded
# again gets a new one, so nothing computed by another object is ever returned.
_MODEL_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NEXT_ID = itertools.count()


def set_cache(max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
    """Turn the cache of token clouds on with a budget of ``max_tokens`` token rows
    (``moverkit.set_cache``); ``0`` turns it off and empties it, a smaller budget drops the least
    recently used texts at once."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, got {type(max_tokens).__name__}")
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0 (0 turns the cache off), got {max_tokens}")
    with _CACHE._lock:
        _CACHE.max_tokens = max_tokens
        _CACHE.shrink(max_tokens)


def clear_cache() -> None:
    """Empty the cache of token clouds (``moverkit.release()`` calls it)."""
    with _CACHE._lock:
        _CACHE.shrink(0)
        _CACHE.hits = _CACHE.misses = 0


def cache_info() -> dict:
    """``max_tokens``, ``tokens`` (held now), ``texts``, and the ``hits`` and ``misses`` so far."""
    with _CACHE._lock:
        return {
            "max_tokens": _CACHE.max_tokens,
            "tokens": _CACHE.tokens,
            "texts": len(_CACHE),
            "hits": _CACHE.hits,
            "misses": _CACHE.misses,
        }


def cached_encode(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_length: int | None = None,
    verbose: bool = False,
    layers: Sequence[int] | None = None,
    long_texts: str = "truncate",
    dtype: str = "float32",
) -> TokenClouds:
    """:func:`~moverkit._core.encoder.encode` (same arguments, same result), encoding only the
    texts the cache does not hold and keeping the new ones."""
    if _CACHE.max_tokens == 0 or encoder.trainable or encoder.model.training:
        return encode(
            encoder, texts, batch_size=batch_size, max_length=max_length, verbose=verbose,
            layers=layers, long_texts=long_texts, dtype=dtype,
        )  # fmt: skip
    checks.positive_int("batch_size", batch_size)
    layers = None if layers is None else encoder.check_layers(layers)
    with _CACHE._lock:
        model_id = _MODEL_IDS.setdefault(encoder.model, next(_NEXT_ID))
    config = (model_id, encoder.name, encoder.layer, str(encoder.device))
    config += (check_max_length(encoder, max_length), long_texts, dtype, layers)
    clouds = [_CACHE.get((config, text)) for text in texts]
    missing = [text for text, cloud in zip(texts, clouds) if cloud is None]
    if missing:
        fresh = encode(
            encoder, missing, batch_size=batch_size, max_length=max_length, verbose=verbose,
            layers=layers, long_texts=long_texts, dtype=dtype,
        )  # fmt: skip
        split = _split(fresh)
        for text, cloud in zip(missing, split):
            _CACHE.put((config, text), cloud)
        new = iter(split)
        clouds = [next(new) if cloud is None else cloud for cloud in clouds]
    return _join(encoder, list(texts), clouds, layers)


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
    lengths = torch.tensor([len(c.token_ids) for c in clouds], dtype=torch.long)
    offsets = torch.zeros(len(clouds) + 1, dtype=torch.long)
    torch.cumsum(lengths, 0, out=offsets[1:])
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
