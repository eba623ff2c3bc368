r"""Scoring any number of pairs in bounded memory: chunked calls under a memory budget.

A token-level metric holds the token vectors of every distinct text of its call (and a centered
copy), so one call over :math:`N` texts needs memory in :math:`O(N)`. :func:`chunks` prepares a
metric call once and hands it to the metric as chunks: one, the call itself, within the memory
budget (:func:`~moverkit._core.base.environment.set_memory_budget`); past it, consecutive chunks of predictions, each scored the
same way (:meth:`~moverkit._core.call.opening.PreparedChunk.pairs`, the same encoder) and merged
(:meth:`~moverkit._core.call.opening.MetricCall.close`). Every pair's score is the one of the unchunked call:

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

What a chunk takes from the whole call it holds: its
:class:`~moverkit._core.centering.maths.Centering` carries the call's ``batch`` mean
(``call_mean``), and ``call_idf`` the call's IDF table. Distinct
texts are encoded once per chunk: a call that fits the budget is one chunk and encodes each
distinct text once, as before; past the budget, a text shared by pairs of two chunks is encoded
in both (chunks are consecutive predictions, so repeated references of neighbouring predictions
usually share one).

Tokenizing is out of the encoder's way: past the budget, on an accelerator, each chunk's distinct
texts (and each slice of the first passes) are tokenized in a thread while the previous one
encodes (:class:`TokenizingThread`: one thread a call at most, closed when the call ends, however it ends;
on a CPU, in turn); a call planned as one chunk from its texts' real token counts encodes the
tokens counted, not a second tokenization.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, TypeVar

import torch
from tqdm.auto import tqdm

from moverkit._core.base.environment import current_environment
from moverkit._core.base.hardware import tokenizes_ahead
from moverkit._core.base.heap import fix_mmap_threshold
from moverkit._core.base.inputs import CallTexts, call_texts
from moverkit._core.call.opening import MetricCall, PreparedChunk
from moverkit._core.centering.maths import RowMean, warn_small_batch
from moverkit._core.centering.stats_file import CenteringStats
from moverkit._core.encoding.cache import cached_encode
from moverkit._core.encoding.encoder import Encoder
from moverkit._core.encoding.idf import IdfTable
from moverkit._core.encoding.models import encoder_for
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import sentence_encoder_for, sentence_truncations
from moverkit._core.encoding.tokens import AheadTokens, CallTokenizer, TokenizedTexts

DEFAULT_MEMORY_BUDGET = 512 * 2**20
"""Bytes of token vectors one chunk may hold on a CPU when neither :func:`~moverkit._core.base.environment.set_memory_budget` nor
the ``MOVERKIT_MEMORY_BUDGET`` environment variable says otherwise and the memory the machine has
left is unknown (the model, torch and the padded pair batches, a few hundred MB, come on top); the
least budget :data:`HOST_MEMORY_SHARE` gives. On a CUDA device see :data:`CUDA_MEMORY_SHARE`."""

HOST_MEMORY_SHARE = 0.25
"""The share of the memory the machine has available at a call's start
(:func:`available_host_memory`: ``MemAvailable``, within the process's cgroup limit) that a CPU
call's token vectors may take when no budget is set, never less than :data:`DEFAULT_MEMORY_BUDGET`.
A fixed 512 MB cut 2,800 WMT17 pairs into 2 chunks with all-MiniLM-L6-v2 and 3 with
all-mpnet-base-v2 on a 24 GiB machine, and ``batch`` centering then encodes every text twice
(issue 51: 68 CPU s against 34); a quarter of what is free leaves the rest to the model, the
forward passes and the other processes."""

VECTOR_COPIES = 3
"""Float32 copies of each token vector a chunk holds at once: the encoded vectors, the centered
ones, and a margin for the padded batches and the encoder's own buffers."""

CHARS_PER_TOKEN = 3.0
"""A low estimate of characters per token (English word pieces run at about 4), so that chunks
are planned on the safe side before any text is tokenized."""

CUDA_MEMORY_SHARE = 0.5
"""The share of a CUDA device's free memory (at the call's start) that a call's token vectors may
take when no budget is set: there the vectors live in the device's memory, not the host's, and a
call that fits runs as one chunk (issue 40's profile, NVIDIA H200: batch centering under the 512 MB
host default cut 2,800 WMT17 pairs into chunks and encoded every text twice; one chunk took twmd
from 0.47 s to 0.23 s). The other half is left to the forward passes and the pair batches, which
:func:`~moverkit._core.base.batching.cuda_token_budget` and the bucketer bound."""


def memory_budget(device: torch.device | None = None) -> int:
    """The budget in bytes: the one the call's opening read
    (:func:`~moverkit._core.base.environment.read_environment`: the
    :func:`~moverkit._core.base.environment.temporary_memory_budget` block's, else
    :func:`~moverkit._core.base.environment.set_memory_budget`'s, else ``MOVERKIT_MEMORY_BUDGET``'s),
    else, on a CUDA ``device``, :data:`CUDA_MEMORY_SHARE` of its free memory, else
    :data:`HOST_MEMORY_SHARE` of the host's available memory (at least the default)."""
    budget = current_environment().memory_budget
    if budget is not None:
        return budget
    if device is not None and device.type == "cuda":
        return max(int(CUDA_MEMORY_SHARE * torch.cuda.mem_get_info(device)[0]), 1)
    return max(int(HOST_MEMORY_SHARE * (available_host_memory() or 0)), DEFAULT_MEMORY_BUDGET)


def available_host_memory() -> int | None:
    """Bytes of memory this process can still take: the host's ``MemAvailable`` (Linux's
    ``/proc/meminfo``; elsewhere the free pages ``os.sysconf`` reports), capped by the room left in
    the process's cgroup v2 limit (a container's); ``None`` where neither can be read."""
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except OSError:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = None
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as limit_file:
            limit = limit_file.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as current_file:
            current = int(current_file.read().strip())
        if limit != "max":
            room = max(int(limit) - current, 0)
            available = room if available is None else min(available, room)
    except (OSError, ValueError):
        pass
    return available


def chunks(
    call: MetricCall,
    *,
    idf: bool | Mapping = False,
    prediction_idf: bool | Mapping | None = None,
    one_chunk: bool = False,
    vectors_per_token: int = 1,
    name: str = "scoring",
) -> Iterator[PreparedChunk]:
    """``call`` prepared once, as the chunks a metric scores: the texts checked
    (:func:`~moverkit._core.base.inputs.call_texts`), the encoder of ``call.request`` resolved and
    the call's tokenizer made (:class:`~moverkit._core.encoding.tokens.CallTokenizer`: its one
    token limit checked), each put in the :class:`~moverkit._core.call.opening.PreparedChunk`
    every chunk is. Within the memory budget the call is one chunk; past it, consecutive chunks of
    predictions (see the module doc), with the whole call's ``batch`` mean in their centering and,
    for ``idf=True`` (the metric's ``idf``, checked), the whole call's IDF table in ``call_idf``
    (for ``prediction_idf=True``, the predictions' in ``call_prediction_idf``). ``one_chunk``: the
    call is never cut (what its chunks could not take from the whole call, such as a ``batch``
    mean of several layers). ``vectors_per_token``: the vectors a token holds when several layers
    are kept (moverscore v1's five), which the budget counts. ``name`` labels the progress bar of
    a chunked call. The metric scores each chunk and merges them with :meth:`MetricCall.close`;
    it holds this generator in ``contextlib.closing``, so that a call that stops early or raises
    ends the tokenizing thread at once."""
    texts = call_texts(call.predictions, call.references)
    request = call.request
    if call.centering.level == "sentence":
        # One vector per sentence, not per token: a sentence call is one chunk (its vectors take
        # about a twentieth of a token call's), encoded by the sentence encoder.
        encoder = sentence_encoder_for(request)
        sentence_truncations(encoder, call.truncations)
        yield PreparedChunk(call, call.predictions, call.references, texts, encoder, request, call.centering)
        return
    encoder = encoder_for(request)
    tokenizer = CallTokenizer.of(encoder, request.max_length, request.long_texts, call.truncations)
    call.truncations.n_texts = len(texts.unique)
    token_bytes = 4 * encoder.dim * VECTOR_COPIES * vectors_per_token
    max_tokens = memory_budget(encoder.device) // token_bytes
    plan = None if one_chunk else plan_chunks(texts, max_tokens, tokenizer)
    if plan is None or len(plan.ranges) == 1:  # within the budget (or never cut): the bar is the encoding's
        tokens = None if plan is None or plan.tokens is None else AheadTokens(plan.tokens)
        yield PreparedChunk(
            call, call.predictions, call.references, texts, encoder, request, call.centering, tokenizer, tokens=tokens
        )
        return
    fix_mmap_threshold()  # else the heap grows with the number of chunks (see its doc)
    with TokenizingThread(tokenizer, tokenizes_ahead(encoder.device)) as ahead:
        centering = call.centering
        if centering.mode == "batch":
            centering = centering.within_call(batch_mean(encoder, texts, tokenizer, request, max_tokens, ahead))
        call_idf = fit_idf(texts.pair_references, ahead) if idf is True else None
        prediction_table = fit_idf(texts.predictions, ahead) if prediction_idf is True else None
        quiet = request.quiet()  # one bar, over pairs, instead of one per chunk
        bar = tqdm(total=len(texts.group), desc=name, unit="pair", disable=not request.verbose)
        parts = ((start, end, texts.chunk(start, end)) for start, end in plan.ranges)
        with bar:
            for (start, end, part), tokens in ahead.parts(parts, lambda part: part[2].unique):
                yield PreparedChunk(
                    call,
                    list(call.predictions[start:end]),
                    list(call.references[start:end]),
                    part,
                    encoder,
                    quiet,
                    centering,
                    tokenizer,
                    call_idf,
                    prediction_table,
                    tokens,
                )
                bar.update(int((texts.group < end).sum()) - bar.n)


Part = TypeVar("Part")

TOKENIZER_THREAD = "moverkit-tokenize"


class TokenizingThread:
    r"""The parts of a call (its chunks, or slices of its texts), each with its texts tokenized
    by the call's ``tokenizer``: where ``enabled``
    (:func:`~moverkit._core.base.hardware.tokenizes_ahead`: on an accelerator, by default), part
    :math:`k+1` is tokenized in a thread while the caller encodes part :math:`k` (issue 45, item 7:
    the Rust tokenizer releases the GIL, and the host would otherwise wait for the device), so a
    call of :math:`K` parts costs about :math:`t_1 + \sum_k \max(t_{k+1}, f_k)` instead of
    :math:`\sum_k (t_k + f_k)` for tokenizations :math:`t` and forward passes :math:`f`. Elsewhere
    each part is tokenized in turn, when it is handed over.

    One thread for the whole call (all its passes), made on first use and ended when the ``with``
    block ends, however it ends (an error, a generator closed or dropped): nothing of the call
    runs after it."""

    def __init__(self, tokenizer: CallTokenizer, enabled: bool):
        self.tokenizer = tokenizer
        self.enabled = enabled
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> TokenizingThread:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            # A generator left in a reference cycle may be collected on the pool's own thread,
            # which cannot wait for itself.
            own = threading.current_thread().name.startswith(TOKENIZER_THREAD)
            self._pool.shutdown(wait=not own, cancel_futures=True)
            self._pool = None

    def parts(
        self, parts: Iterable[Part], texts_of: Callable[[Part], Sequence[str]]
    ) -> Iterator[tuple[Part, AheadTokens]]:
        """Each of ``parts`` with the tokens of ``texts_of(part)`` (being made in the thread, while
        enabled), in order; at most two parts' tokens held at once."""
        if not self.enabled:
            for part in parts:
                yield part, AheadTokens(self.tokenizer.tokenize(texts_of(part)))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=TOKENIZER_THREAD)
        end = object()
        parts = iter(parts)

        def started(part):
            if part is end:
                return None
            # In the call's context (its environment, its warnings' collector), not the thread's own.
            context = contextvars.copy_context()
            return part, AheadTokens(self._pool.submit(context.run, self.tokenizer.tokenize, texts_of(part)))

        ahead = started(next(parts, end))
        while ahead is not None:
            current, ahead = ahead, started(next(parts, end))
            yield current


def estimated_tokens(text: str, limit: int | None) -> int:
    """A high estimate of the tokens of ``text`` (special tokens included), at most ``limit``."""
    tokens = int(len(text) / CHARS_PER_TOKEN) + 3
    return tokens if limit is None else min(tokens, limit)


class ChunkPlan(NamedTuple):
    """:func:`plan_chunks`' answer: the ``ranges`` of predictions of each chunk and, where the
    texts' real tokens were counted and planned one chunk, the distinct texts' ``tokens``, which
    that chunk encodes."""

    ranges: list[tuple[int, int]]
    tokens: TokenizedTexts | None = None


def plan_chunks(texts: CallTexts, max_tokens: int, tokenizer: CallTokenizer | None = None) -> ChunkPlan:
    """Consecutive ranges of predictions, each with distinct texts of at most about ``max_tokens``
    tokens; a prediction with its references is never split. Tokens are estimated
    (:func:`estimated_tokens`); where the estimate cuts the call and the call's ``tokenizer`` is
    given, the texts' real token counts plan it.

    The estimate of 3 characters a token runs high on most text (WMT17's English has about 4.5),
    and a call cut into chunks pays for it: under ``batch`` centering every text is encoded twice
    (issue 45: 100,000 pairs on an 80 GB GPU were cut by the estimate, 6,109 pairs/s, where one
    chunk fits them). Counting tokenizes the texts, slice by slice (:data:`COUNT_SLICE`); while
    they fit one chunk their tokens are kept for it, not made a second time (issue 45: on 100,000
    pairs that second pass was about 1.2 s of an H100 call)."""
    one = [(0, len(texts.predictions))]
    limit = None if tokenizer is None else tokenizer.truncating
    # A chunk counts its distinct texts, so a call whose distinct texts fit is one chunk: their
    # characters bound their estimates (sum of len / CHARS_PER_TOKEN + 3 each), with no Python
    # step per pair (the loop below was 11 ms of a 0.15 s GPU call on 2,800 pairs, issue 45).
    if sum(map(len, texts.unique)) / CHARS_PER_TOKEN + 3 * len(texts.unique) <= max_tokens:
        return ChunkPlan(one)
    if tokenizer is None:
        return ChunkPlan(_cut(texts, max_tokens, lambda text: estimated_tokens(text, limit)))
    counts, kept, total = {}, [], 0
    for start in range(0, len(texts.unique), COUNT_SLICE):
        part = texts.unique[start : start + COUNT_SLICE]
        tokens = tokenizer.tokenize(part) if kept is not None else None
        lengths = list(map(len, tokens.ids)) if tokens is not None else tokenizer.count(part)
        counts.update(zip(part, lengths))
        total += sum(lengths)
        kept = kept + [tokens] if kept is not None and total <= max_tokens else None
    if kept is not None:  # every text counted fits: one chunk, tokenized already
        return ChunkPlan(one, join_tokens(texts.unique, kept, tokenizer))
    return ChunkPlan(_cut(texts, max_tokens, counts.__getitem__))


COUNT_SLICE = 8192
"""Texts :func:`plan_chunks` tokenizes at once: past the budget their tokens are dropped slice by
slice, so counting a million texts holds a few thousand texts' tokens, not a million."""


def join_tokens(texts: list[str], parts: list[TokenizedTexts], tokenizer: CallTokenizer) -> TokenizedTexts:
    """The tokens of ``texts`` from those of its consecutive slices."""
    if len(parts) == 1:
        return parts[0]
    ids = [row for part in parts for row in part.ids]
    special = [row for part in parts for row in part.special]
    truncated = sum(part.truncated for part in parts)
    return TokenizedTexts(texts, ids, special, tokenizer.limit, tokenizer.long_texts, truncated)


def _cut(texts: CallTexts, max_tokens: int, tokens: Callable[[str], int]) -> list[tuple[int, int]]:
    """:func:`plan_chunks`' ranges, ``tokens`` giving each distinct text's count."""
    chunks, start, seen, total = [], 0, set(), 0
    pair, group = 0, texts.group.tolist()
    for i in range(len(texts.predictions)):
        own = [texts.predictions[i]]
        while pair < len(group) and group[pair] == i:
            own.append(texts.pair_references[pair])
            pair += 1
        new = {t for t in own if t not in seen}
        cost = sum(map(tokens, new))
        if total + cost > max_tokens and i > start:
            chunks.append((start, i))
            start, seen, total = i, set(), 0
            new = set(own)
            cost = sum(map(tokens, new))
        seen |= new
        total += cost
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


def batch_mean(
    encoder: Encoder,
    texts: CallTexts,
    tokenizer: CallTokenizer,
    request: EncoderRequest,
    max_tokens: int,
    ahead: TokenizingThread,
) -> CenteringStats | None:
    r"""First pass of ``batch`` centering: :math:`\mu` over every distinct text of the call, each
    counted as often as it occurs (:class:`~moverkit._core.centering.maths.RowMean`, float64
    sums gathered slice by slice; ``None`` when the call has no token to average: each chunk then
    subtracts its own zero mean, as one call would)."""
    unique, counts = texts.unique, texts.counts()
    mean = RowMean()
    slices = text_chunks(unique, max_tokens, tokenizer.truncating)
    for (start, end), tokens in ahead.parts(slices, lambda r: unique[r[0] : r[1]]):
        clouds = cached_encode(encoder, unique[start:end], tokenizer, request, tokens=tokens.get())
        mean.add(clouds.vectors, offsets=clouds.offsets, scored=~clouds.special, counts=counts[start:end])
        del clouds
    warn_small_batch(mean.sizes(), "texts")  # as an unchunked call warns (its chunks then do not)
    return mean.stats(encoder.name, encoder.layer, len(unique))


def fit_idf(texts: list[str], ahead: TokenizingThread) -> IdfTable:
    """First pass of ``idf=True``: the document frequencies of ``texts``, every reference of the
    call (one document per pair; for ``prediction_idf=True``, every prediction), tokenized slice
    by slice by the call's tokenizer."""
    slices = (texts[start : start + 4096] for start in range(0, len(texts), 4096))
    return IdfTable(row for _, tokens in ahead.parts(slices, lambda part: part) for row in tokens.get().ids)
