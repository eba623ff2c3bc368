r"""Scoring any number of pairs in bounded memory: chunked calls under a memory budget.

A token-level metric holds the token vectors of every distinct text of its call (and a centered
copy), so one call over :math:`N` texts needs memory in :math:`O(N)`. :func:`streamed` wraps a
metric function so that a call whose texts would pass the memory budget (:func:`set_memory_budget`)
runs as consecutive chunks of predictions, each an ordinary call of the function (the same
:func:`~moverkit._core.pairs.prepare_pairs` path, the same encoder), with the per-example results
concatenated. Every pair's score is the one of the unchunked call:

- ``none``, ``dim``, ``sentence`` and ``corpus`` centering are per text (or fitted once), so
  chunks are independent;
- ``batch`` centering subtracts the mean of every text of the call,
  :math:`\mu = \sum_i c_i \sum_k w_{i,k} / \sum_i c_i N_i` (:mod:`~moverkit._core.centering`):
  a first pass encodes the distinct texts chunk by chunk and accumulates the float64 sum
  :math:`\sum_i c_i \sum_k w_{i,k}` and the count :math:`\sum_i c_i N_i`, then the chunks are
  scored with that :math:`\mu` (a second encoding pass);
- ``idf=True`` fits its table on every reference of the call (and ``prediction_idf=True`` on every
  prediction): a first pass tokenizes the call chunk by chunk into the document frequencies.

With ``verbose=True`` a chunked call shows one progress bar over the pairs scored (the chunks
themselves run quietly); a call within the budget shows the encoding bar as before.

The chunks reach ``prepare_pairs`` through :func:`~moverkit._core.pairs.call_scope`. Distinct
texts are encoded once per chunk: a call that fits the budget is one chunk and encodes each
distinct text once, as before; past the budget, a text shared by pairs of two chunks is encoded
in both (chunks are consecutive predictions, so repeated references of neighbouring predictions
usually share one).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import torch
from tqdm.auto import tqdm

from .centering import CenteringStats, row_mean, warn_small_batch
from .encoder import check_max_length, encode, get_encoder, tokenize
from .idf import IdfTable
from .inputs import CallTexts, call_texts
from .pairs import CallScope, call_scope
from .sizes import parse_size, size_from_env

DEFAULT_MEMORY_BUDGET = 512 * 2**20
"""Bytes of token vectors one chunk may hold when neither :func:`set_memory_budget` nor the
``MOVERKIT_MEMORY_BUDGET`` environment variable says otherwise (the model, torch and the padded
pair batches, a few hundred MB, come on top)."""

VECTOR_COPIES = 3
"""Float32 copies of each token vector a chunk holds at once: the encoded vectors, the centered
ones, and a margin for the padded batches and the encoder's own buffers."""

CHARS_PER_TOKEN = 3.0
"""A low estimate of characters per token (English word pieces run at about 4), so that chunks
are planned on the safe side before any text is tokenized."""

MEMORY_BUDGET_VARIABLE = "MOVERKIT_MEMORY_BUDGET"

_budget: int | None = None


def set_memory_budget(size) -> None:
    """Bound the token vectors a metric call holds at once (``"1GB"``, ``"512MB"``, bytes; ``None``
    restores the default: ``MOVERKIT_MEMORY_BUDGET`` or :data:`DEFAULT_MEMORY_BUDGET`). Calls
    over the budget run in chunks (:func:`streamed`); scores do not change."""
    global _budget
    _budget = None if size is None else parse_size(size)


def memory_budget() -> int:
    """The budget in bytes: :func:`set_memory_budget`'s, else ``MOVERKIT_MEMORY_BUDGET``'s, else the default."""
    if _budget is not None:
        return _budget
    return size_from_env(MEMORY_BUDGET_VARIABLE, DEFAULT_MEMORY_BUDGET)


def streamed(metric: Callable[..., dict]) -> Callable[..., dict]:
    """Run ``metric(predictions, references, **kwargs)`` in chunks when its texts pass the memory
    budget (see the module doc). ``metric`` is a token-level metric function: it takes
    ``model_type``, ``num_layers``, ``device``, ``batch_size``, ``max_length``, ``long_texts``,
    ``centering`` (and may take ``idf``), goes through ``prepare_pairs`` once, and returns lists
    with one item per prediction plus a ``hashcode``."""
    signature = inspect.signature(metric)

    @functools.wraps(metric)
    def run(predictions, references, **kwargs):
        bound = signature.bind(predictions, references, **kwargs)
        bound.apply_defaults()
        args = bound.arguments
        texts = call_texts(predictions, references)
        encoder = get_encoder(args["model_type"], args["num_layers"], args["device"])
        token_bytes = 4 * encoder.model.config.hidden_size * VECTOR_COPIES
        limit = None if args["long_texts"] == "window" else check_max_length(encoder, args["max_length"])
        chunks = plan_chunks(texts, memory_budget() // token_bytes, limit)
        if len(chunks) == 1:  # within the budget: one ordinary call (its bar is the encoding's)
            return metric(predictions, references, **kwargs)
        scope = CallScope(
            batch_mean=batch_mean(encoder, texts, args, memory_budget() // token_bytes, limit)
            if args["centering"] == "batch"
            else None,
            idf=fit_idf(encoder, texts.pair_references, args) if args.get("idf") is True else None,
        )
        results = []
        chunk_kwargs = {**kwargs, "verbose": False}  # one bar, over pairs, instead of one per chunk
        bar = tqdm(total=len(texts.group), desc=metric.__name__, unit="pair", disable=not args["verbose"])
        with call_scope(scope), bar:
            for start, end in chunks:
                results.append(metric(list(predictions[start:end]), list(references[start:end]), **chunk_kwargs))
                bar.update(int((texts.group < end).sum()) - bar.n)
        return merge(results)

    return run


def estimated_tokens(text: str, limit: int | None) -> int:
    """A high estimate of the tokens of ``text`` (special tokens included), at most ``limit``."""
    tokens = int(len(text) / CHARS_PER_TOKEN) + 3
    return tokens if limit is None else min(tokens, limit)


def plan_chunks(texts: CallTexts, max_tokens: int, limit: int | None) -> list[tuple[int, int]]:
    """Consecutive ranges of predictions, each with distinct texts of at most about ``max_tokens``
    tokens (by :func:`estimated_tokens`); a prediction with its references is never split."""
    chunks, start, seen, tokens = [], 0, set(), 0
    pair, group = 0, texts.group.tolist()
    for i in range(len(texts.predictions)):
        own = [texts.predictions[i]]
        while pair < len(group) and group[pair] == i:
            own.append(texts.pair_references[pair])
            pair += 1
        new = {t for t in own if t not in seen}
        cost = sum(estimated_tokens(t, limit) for t in new)
        if tokens + cost > max_tokens and i > start:
            chunks.append((start, i))
            start, seen, tokens = i, set(), 0
            new = set(own)
            cost = sum(estimated_tokens(t, limit) for t in new)
        seen |= new
        tokens += cost
    chunks.append((start, len(texts.predictions)))
    return chunks


def text_chunks(texts: list[str], max_tokens: int, limit: int | None) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of ``texts`` of at most about ``max_tokens`` estimated tokens each."""
    start, tokens = 0, 0
    for i, text in enumerate(texts):
        cost = estimated_tokens(text, limit)
        if tokens + cost > max_tokens and i > start:
            yield start, i
            start, tokens = i, 0
        tokens += cost
    if start < len(texts):
        yield start, len(texts)


def batch_mean(encoder, texts: CallTexts, args: dict, max_tokens: int, limit: int | None) -> CenteringStats | None:
    r"""First pass of ``batch`` centering: :math:`\mu` over every distinct text of the call, each
    counted as often as it occurs, from float64 sums accumulated chunk by chunk (``None`` when the
    call has no token to average: each chunk then subtracts its own zero mean, as one call would)."""
    unique, counts = texts.unique, texts.counts()
    total = torch.zeros(encoder.model.config.hidden_size, dtype=torch.float64)
    n, sizes = 0, []
    for start, end in text_chunks(unique, max_tokens, limit):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation is reported once, by the scoring pass
            clouds = encode(encoder, unique[start:end], **encode_kwargs(args))
        mean, rows = row_mean(clouds.vectors, offsets=clouds.offsets, scored=~clouds.special, counts=counts[start:end])
        total += mean.cpu() * rows
        n += rows
        scored = (~clouds.special).long().cpu()
        sizes.append(torch.zeros(end - start, dtype=torch.long).index_add_(0, clouds.text_index().cpu(), scored))
        del clouds
    warn_small_batch(torch.cat(sizes), "texts")  # as an unchunked call warns (its chunks then do not)
    if n == 0:
        return None
    return CenteringStats(
        mean=(total / n).numpy().astype(np.float64),
        model=encoder.name,
        layer=encoder.layer,
        n_texts=len(unique),
        n_tokens=n,
    )


def fit_idf(encoder, references: list[str], args: dict) -> IdfTable:
    """First pass of ``idf=True``: the document frequencies of every reference of the call (one
    document per pair), tokenized chunk by chunk."""

    def documents():
        for start in range(0, len(references), 4096):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ids, _ = tokenize(encoder, references[start : start + 4096], args["max_length"], args["long_texts"])
            yield from ids

    return IdfTable(documents())


def encode_kwargs(args: dict) -> dict:
    """The arguments of :func:`~moverkit._core.encoder.encode` among the metric's ``args``."""
    accepted = inspect.signature(encode).parameters
    return {
        name: args[name]
        for name in ("batch_size", "max_length", "long_texts", "dtype")
        if name in args and name in accepted
    }


def merge(results: list[dict]) -> dict:
    """One result from the chunks' results: lists concatenated, the hashcode (the same in every
    chunk) once."""
    merged = {}
    for key, value in results[0].items():
        if isinstance(value, list):
            merged[key] = [item for result in results for item in result[key]]
        else:
            if any(result[key] != value for result in results):
                raise RuntimeError(f"chunks of one call disagree on {key!r}")
            merged[key] = value
    return merged
