"""Padding ragged rows and bucketing pairs: the one padder, the one pair bucketer and the
encoder's batcher.

Every metric compares many (prediction, reference) pairs whose sides have different lengths
(tokens, n-gram units or sentences). Their rows are stored flat (item ``i`` owns rows
``offsets[i]:offsets[i + 1]``); :func:`pad` gathers the rows of a batch of items into one padded
tensor, and :func:`pair_buckets` cuts the pairs into batches of similar shapes, so that each
metric's math is a few tensor operations per batch and little of it is spent on padding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from moverkit._core.base.hardware import cuda_plan

PADDING_FACTOR = 1.5
"""A bucket's padded (pairs x rows x columns) entries stay under this multiple of its pairs' own
entries (plus :data:`PADDING_SLACK`, so that short pairs still batch together): on WMT17 one big
batch padded to the longest pair computed 6.3x the real entries, this bound 1.3x."""
PADDING_SLACK = 4096
MAX_PAIR_ELEMENTS = 100_000_000
"""The largest alignment one pair may need (prediction units x reference units). The metrics hold
a few float64 and float32 copies of a pair's matrix (similarities, the plan, its logarithm): about
20 bytes an entry, measured (1.9 GB for two 10,000-token texts), so this bound keeps one pair near
2 GB. Larger pairs are refused before any matrix is made; without it two 40,000-token texts in
``long_texts="window"`` mode grew past 20 GB and were killed for memory."""


def offsets_from(counts: torch.Tensor) -> torch.Tensor:
    """The ``(n + 1,)`` int64 offsets of ``n`` consecutive items of ``counts[i]`` rows each: item
    ``i`` owns rows ``offsets[i]:offsets[i + 1]`` (on ``counts``' device). The one place offsets are
    made (texts' tokens, sentences, scoring rows, units)."""
    offsets = torch.zeros(len(counts) + 1, dtype=torch.long, device=counts.device)
    torch.cumsum(counts, 0, out=offsets[1:])
    return offsets


def pad(
    offsets: torch.Tensor,
    items: torch.Tensor,
    *values: torch.Tensor,
    rows: torch.Tensor | None = None,
    width: int | None = None,
) -> tuple[torch.Tensor, ...]:
    """The rows of ``items`` padded to one width: ``(mask, *padded)``.

    ``offsets`` (n_items + 1,) says which rows each item owns; ``items`` (B,) picks the items.
    Each tensor of ``values`` (n_rows, ...) is gathered to (B, W, ...), zero at padding; ``mask``
    (B, W) is True at real rows, and W is the longest item's row count (at least 1), or ``width``
    if given (at least that count: the encoder's padded widths on a GPU, :func:`cuda_width`).
    ``rows``, if given, maps the positions that ``offsets`` counts to rows of ``values`` (a subset
    of the rows, such as the non-special tokens, without copying ``values``).
    """
    starts = offsets[items]
    lengths = offsets[items + 1] - starts
    if width is None:
        width = max(int(lengths.max()) if len(items) else 0, 1)
    steps = torch.arange(width, device=starts.device)
    mask = steps[None, :] < lengths[:, None]
    position = torch.where(mask, starts[:, None] + steps[None, :], 0)
    if rows is not None:
        position = rows[position] if rows.numel() else torch.zeros_like(position)
    padded = []
    for value in values:
        if value.shape[0] == 0:
            padded.append(value.new_zeros((*mask.shape, *value.shape[1:])))
            continue
        fill = gather_rows if cuda_plan(value.device) else write_rows
        padded.append(fill(value, position, mask))
    return (mask, *padded)


def write_rows(value: torch.Tensor, position: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Zeros, then the real rows written in: on a CPU 1.3x faster than :func:`gather_rows`
    (measured, 100 x 40 x 384 floats), and the same tensor. Its boolean-mask indexing asks how many
    rows are real, so on a GPU the host would wait for the device at every batch."""
    out = value.new_zeros((*mask.shape, *value.shape[1:]))
    out[mask] = value[position[mask]]
    return out


def gather_rows(value: torch.Tensor, position: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Every slot gathered, the padding then zeroed: the tensor of :func:`write_rows` (bit for bit)
    without a shape that depends on the data, so the host never waits for the device (CUDA)."""
    gathered = value[position]
    return torch.where(
        mask.view(*mask.shape, *(1,) * (value.dim() - 1)),
        gathered,
        torch.zeros((), dtype=value.dtype, device=value.device),
    )


def pair_buckets(rows: torch.Tensor, cols: torch.Tensor, max_elements: int) -> Iterator[torch.Tensor]:
    """Pair indices in batches of similar shapes (CPU tensors).

    Pair ``k`` needs a ``rows[k] x cols[k]`` matrix (its two side lengths). Pairs are ordered by
    their longer side, then by size, so the padded width of a batch grows slowly; a batch is cut
    before its padded (pairs x max rows x max cols) tensor passes ``max_elements`` entries or
    :data:`PADDING_FACTOR` times its pairs' own entries (plus :data:`PADDING_SLACK`). A pair too
    big for ``max_elements`` on its own is a batch of one.
    """
    n_rows = rows.detach().cpu().clamp_min(1)
    n_cols = cols.detach().cpu().clamp_min(1)
    check_pair_sizes(n_rows, n_cols)
    order = torch.argsort(n_rows * n_cols, stable=True)
    order = order[torch.argsort(torch.maximum(n_rows, n_cols)[order], stable=True)]
    sizes_r, sizes_c = n_rows[order].numpy().astype(np.int64), n_cols[order].numpy().astype(np.int64)
    start, n = 0, len(order)
    while start < n:
        end = start + _bucket_length(sizes_r[start:], sizes_c[start:], max_elements)
        yield order[start:end]
        start = end


BUCKET_WINDOW = 1024
"""Pairs :func:`_bucket_length` looks at in one vectorized step before it looks further."""


def _bucket_length(sizes_r: np.ndarray, sizes_c: np.ndarray, max_elements: int) -> int:
    """How many of the ordered pairs (``sizes_r``, ``sizes_c``: their sides) the bucket opening at
    the first one takes: the longest run whose padded (pairs x max rows x max cols) entries stay
    within ``max_elements`` and :data:`PADDING_FACTOR` times its own entries plus
    :data:`PADDING_SLACK` (at least one pair). The running maxima and sums are numpy's, a window
    of :data:`BUCKET_WINDOW` pairs at a time: a loop of one Python step per pair was 22 ms of a
    0.2 s GPU call on 2,800 pairs (issue 45)."""
    taken = 0
    width_r = width_c = 1
    real = 0
    while taken < len(sizes_r):
        rows, cols = sizes_r[taken : taken + BUCKET_WINDOW], sizes_c[taken : taken + BUCKET_WINDOW]
        wr = np.maximum.accumulate(np.maximum(rows, width_r))
        wc = np.maximum.accumulate(np.maximum(cols, width_c))
        count = np.arange(taken + 1, taken + len(rows) + 1, dtype=np.int64)
        padded = count * wr * wc
        reals = real + np.cumsum(rows * cols)
        too_big = (padded > max_elements) | (padded > PADDING_FACTOR * reals + PADDING_SLACK)
        too_big &= count > 1  # the first pair always goes in
        if too_big.any():
            return taken + int(np.argmax(too_big))
        taken += len(rows)
        width_r, width_c, real = int(wr[-1]), int(wc[-1]), int(reals[-1])
    return taken


def check_pair_sizes(rows: torch.Tensor, cols: torch.Tensor) -> None:
    """Refuse a pair whose ``rows x cols`` alignment passes :data:`MAX_PAIR_ELEMENTS`, naming its
    size and what scores such texts."""
    sizes = rows.to(torch.int64) * cols.to(torch.int64)
    if len(sizes) and int(sizes.max()) > MAX_PAIR_ELEMENTS:
        k = int(sizes.argmax())
        raise ValueError(
            f"a pair of {int(rows[k]):,} x {int(cols[k]):,} units needs a {int(sizes[k]):,}-entry alignment, over "
            f"the {MAX_PAIR_ELEMENTS:,} one pair may take (about 2 GB): score texts this long with sbertscore "
            "(sentence level), or long_texts='truncate'"
        )


ENCODE_TOKEN_BUDGET = 4096
"""Padded tokens per forward pass on a CPU (batches also hold at most ``batch_size`` texts).
Measured on the embedded model, one thread, texts sorted by length, 2 interleaved rounds: on the
4,982 WMT17 sentences (about 30 tokens; most batches stay 64 texts) budgets of 2,048, 4,096 and
8,192 tokens gave 1.04x, 1.03x and 0.89x the speed of 64 texts a batch; on 140 long-document texts cut to 512 tokens,
4,096 was 1.54x faster than 64 texts a batch (2,048: 1.40x, 8,192: 1.02x): a 64 x 512 batch's
attention and activations outgrow the CPU caches. On a CUDA device (or under its plan,
:func:`~moverkit._core.base.hardware.cuda_plan`), :func:`cuda_token_budget` sets it instead."""

CUDA_TOKENS_PER_TEXT = {"float32": 256, "float16": 1024, "bfloat16": 1024}
"""On a CUDA device a batch is cut by padded tokens, not texts: ``batch_size`` x this many for the
forward pass's precision (16,384 in float32 and 65,536 in half precision for the default 64
texts), whatever the number of texts. A GPU's forward pass costs per call more than per token at
these sizes, while the padded tokens bound its memory as a number of texts does not. Measured
with ``moverkit bench gpu``'s batch table (NVIDIA H200, 2,800 WMT17 pairs, median of 3, batches of
16k / 65k / 262k padded tokens): centered_bertscore float16 0.223 / 0.181 / 0.213 s, float32
0.295 / 0.310 / 0.428 s; twmd float16 0.241 / 0.220 / 0.245 s, float32 0.317 / 0.317 / 0.490 s
(issue 45's what-if on another H200 gave the same picture): 65k tokens pays in half precision,
16k is as good as any in float32, and the largest batches hurt float32."""


def cuda_token_budget(batch_size: int, dtype: str) -> int:
    """Padded tokens of one forward pass on a CUDA device (:data:`CUDA_TOKENS_PER_TEXT`)."""
    return batch_size * CUDA_TOKENS_PER_TEXT.get(dtype, CUDA_TOKENS_PER_TEXT["float32"])


CUDA_WIDTHS = (16, 32, 64, 128, 256, 512)
"""Padded lengths of a batch on a CUDA device (:func:`cuda_width`): attention kernels build a plan
per input shape (cuDNN's, for float16 and bfloat16), and batches padded to each text's own length
made hundreds of shapes, which cost most of a float16 call (issue 34's profile: 4.4 of 6.0 s)."""


def cuda_width(length: int, limit: int) -> int:
    """The padded length of a CUDA batch whose longest row has ``length`` tokens: the least of
    :data:`CUDA_WIDTHS` that holds it, capped by the model's ``limit`` (its position table),
    never below ``length``."""
    wider = next((w for w in CUDA_WIDTHS if w >= length), length)
    return max(length, min(wider, limit))


def length_batches(
    lengths: list[int], batch_size: int, max_tokens: int | None, width: Callable[[int], int] | None = None
) -> list[list[int]]:
    """Indices of ``lengths`` sorted longest first (ties in index order) and cut into batches of at
    most ``batch_size`` items whose padded size (items x the first's, i.e. longest, length, or
    ``width`` of it) stays within ``max_tokens`` (``None``: no token bound); an item longer than
    ``max_tokens`` is a batch of its own.

    A batch's width is its first item's, so its room is known when it opens: the cut needs one
    Python step per batch, not per item (a per-item loop was 15 ms of a 0.15 s GPU call on 4,982
    texts, issue 45)."""
    sizes = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-sizes, kind="stable")
    width = width or (lambda n: n)
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        padded = width(int(sizes[order[start]]))
        room = batch_size if max_tokens is None or padded <= 0 else min(batch_size, max(max_tokens // padded, 1))
        batches.append(order[start : start + room].tolist())
        start += room
    return batches
