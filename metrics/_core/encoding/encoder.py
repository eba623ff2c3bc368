"""The forward pass: an encoder's tokenized texts into token clouds.

A *token cloud* is the sequence of contextual vectors one layer of a transformer gives to the
tokens of a text. Every moverkit metric compares two token clouds; this is the one place that
batches tokenized texts and runs the forward pass (:func:`encode`), in one region per call
(:func:`forward_region`), and refuses vectors that are not finite. Loading an encoder, with its
probes, and keeping it for the process are :mod:`~moverkit._core.encoding.models`'.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from tqdm.auto import tqdm

from moverkit._core.base.batching import (
    ENCODE_TOKEN_BUDGET,
    cuda_token_budget,
    cuda_width,
    length_batches,
    offsets_from,
    pad,
)
from moverkit._core.base.hardware import cuda_plan, precision
from moverkit._core.base.windows import WindowPlan, plan_windows
from moverkit._core.encoding.architecture import square_mask
from moverkit._core.encoding.clouds import TokenClouds
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.tokens import CallTokenizer, TokenizedTexts


@dataclass(eq=False)
class Encoder:
    """A tokenizer and a transformer cut after layer ``layer``, on ``device``.

    Get one with :func:`~moverkit._core.encoding.models.get_encoder`, which keeps one per (model, layer, device) for the process.
    """

    name: str
    path: str
    layer: int
    n_layers: int
    device: torch.device
    tokenizer: object
    model: torch.nn.Module
    max_length: int
    hidden_states_only: bool  # the layer is read from hidden_states, not the model's output (cut_after says when)
    blocks: int  # the transformer blocks the cut model runs (cut_after): layer, layer + 1, or n_layers
    trainable: bool = False  # fine-tuning (moverkit.finetune): forward keeps autograd instead of inference mode
    square_mask: bool = False  # the model takes the (batch, 1, length, length) mask (takes_square_mask)
    widths: tuple[int, ...] = ()  # the width of the vectors of layers 0 to layer, measured at load (layer_widths)

    @property
    def dim(self) -> int:
        """The width of the vectors of layer ``layer``, as the model gives them: not always the
        config's ``hidden_size`` (opt-350m projects its last block's output from 1,024 to 512;
        Reformer's output concatenates two streams, twice as wide)."""
        return self.widths[-1]

    def region(self, dtype: str = "float32") -> contextlib.AbstractContextManager:
        """The one context of all of a call's forward passes (:func:`forward_region`)."""
        return forward_region(dtype, self.device, self.trainable)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Token vectors of layer ``layer``, shape (batch, length, dim), float32; run inside
        :meth:`region`. ``attention_mask`` ``None``: no padding (transformers then skips the mask,
        and the read of whether it holds padding)."""
        return self.outputs(input_ids, attention_mask, self.hidden_states_only)[0].float()

    def forward_layers(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, layers: Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Token vectors of layer ``layer`` (as :meth:`forward`) and of each of ``layers`` (one
        width: :meth:`check_layers`) from the same forward pass: shapes (batch, length, dim) and
        (len(layers), batch, length, width). Layer ``layer`` among ``layers`` is :meth:`forward`'s
        vectors, the model's own output at the top (Reformer's ``hidden_states`` hold one of its
        two streams, its output both)."""
        vectors, states = self.outputs(input_ids, attention_mask, True)
        stacked = torch.stack([(vectors if layer == self.layer else states[layer]).float() for layer in layers])
        return vectors.float(), stacked

    def outputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, hidden_states: bool
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
        """The vectors of layer ``layer`` and, with ``hidden_states``, transformers' hidden states,
        one row of vectors per token of ``input_ids`` each: a model that pads its rows itself
        (Reformer, to a multiple of its chunk length) records its hidden states at the padded
        length, and cuts only its output back (:func:`_rows`)."""
        out = self.model(
            input_ids=input_ids, attention_mask=self.mask(attention_mask), output_hidden_states=hidden_states
        )
        length = input_ids.shape[1]
        states = tuple(_rows(state, length) for state in out.hidden_states) if hidden_states else None
        return (states[self.layer] if self.hidden_states_only else _rows(out[0], length)), states

    def mask(self, attention_mask: torch.Tensor | None) -> torch.Tensor | None:
        """The mask the model is given: the (batch, 1, length, length) :func:`square_mask` of a
        (batch, length) ``attention_mask`` where the model takes it, bit for bit the same vectors
        without transformers' read, per batch, of whether the mask holds padding; else as it is."""
        return square_mask(attention_mask) if self.square_mask and attention_mask is not None else attention_mask

    def check_layers(self, layers: Sequence[int]) -> tuple[int, ...]:
        """``layers`` as a tuple of block outputs this (truncated) encoder computes: 0 (the
        embeddings) to ``layer``, all of one width (stacked, their vectors are one tensor: opt-350m's
        top layer is narrower than the others); a ``ValueError`` names the valid range, or the
        widths, otherwise."""
        checked = tuple(layers)
        for layer in checked:
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= self.layer:
                raise ValueError(
                    f"layers must be ints in [0, {self.layer}] for {self.name} cut after layer {self.layer}, "
                    f"got {layer!r}"
                )
        if not checked:
            raise ValueError("layers must name at least one layer")
        widths = {layer: self.widths[layer] for layer in checked}
        if len(set(widths.values())) > 1:
            raise ValueError(
                f"layers must be of one width to be taken together: {self.name}'s layers {checked} give vectors "
                f"of widths {widths}"
            )
        return checked


def _rows(vectors: torch.Tensor, length: int) -> torch.Tensor:
    """``vectors`` (batch, rows, width) cut to their first ``length`` rows, where they have more
    (a view; as they are, with no op dispatched, where they have ``length``)."""
    return vectors if vectors.shape[1] == length else vectors[:, :length]


@contextlib.contextmanager
def forward_region(dtype: str, device: torch.device, trainable: bool = False):
    """The context of a call's forward passes, entered once around all of them: autograd off
    (``torch.no_grad``) unless ``trainable``, and the precision ``dtype``
    (:func:`~moverkit._core.base.hardware.precision`: autocast for half precisions).

    Autocast casts a float32 weight to half precision where a matrix product reads it, and keeps
    the cast copy only until its region ends, and never under ``torch.inference_mode``: with a
    region per batch, each weight was cast once per batch (1,625 casts for 2,800 WMT17 pairs on an
    H100, issue 45). Under ``no_grad``, one region around every batch of a call casts each weight
    once (counted by a test), with the same vectors and no second copy of the model."""
    with contextlib.ExitStack() as stack:
        if not trainable:
            stack.enter_context(torch.no_grad())
        stack.enter_context(precision(dtype, device))
        yield


class NonFiniteOutputs(ValueError):
    """An encoder's vectors hold NaN or infinite values. A NaN or infinite vector would turn the
    scores computed from it into NaN, or into plausible-looking constants (a plan of NaNs, a clamped
    cosine), and nothing downstream could tell. A model whose weights are NaN (a fine-tuning that
    diverged) gives NaN everywhere; a forward pass in float16 can overflow to infinity.
    :func:`encode` and the sentence encoder check every batch after its forward pass
    (:func:`all_finite`: one reduction on the device, negligible next to the pass) and refuse the
    call with :func:`non_finite_error`."""


def non_finite_error(model: str, dtype: str) -> NonFiniteOutputs:
    """The :class:`NonFiniteOutputs` (a ``ValueError``) that refuses the vectors of ``model`` (how
    the message names the model and its layer), with a hint for ``float16``."""
    hint = f"; the forward pass in dtype={dtype!r} may overflow: try dtype='float32'" if dtype == "float16" else ""
    return NonFiniteOutputs(
        f"the outputs of {model} are not finite (NaN or infinite vectors): its weights may be NaN or "
        f"infinite, as after a fine-tuning that diverged{hint}; no score can be computed with it"
    )


def all_finite(vectors: torch.Tensor, attention: torch.Tensor | None = None) -> torch.Tensor:
    """Whether every real vector of ``vectors``, ``(..., batch, [length,] dim)``, is finite (with
    ``attention`` (batch, length), only where it is 1: padding is never read), as a 0-d bool
    tensor on their device: :func:`encode` combines the batches' answers on the device and reads
    the result once, after the last batch, so that no batch waits for the device."""
    finite = torch.isfinite(vectors).all(-1)
    if attention is not None:
        finite = finite | (attention == 0)
    return finite.all()


def offsets_of(lengths, n: int) -> torch.Tensor:
    """``(n + 1,)`` int64 offsets of ``n`` consecutive items of ``lengths`` (an iterable of ints)."""
    return offsets_from(torch.from_numpy(np.fromiter(lengths, dtype=np.int64, count=n)))


def encode_batches(
    lengths: list[int], batch_size: int, device: torch.device, limit: int, dtype: str = "float32"
) -> list[tuple[list[int], int]]:
    """The forward passes of rows of ``lengths`` tokens: ``(rows, padded width)`` each, rows sorted
    longest first (:func:`~moverkit._core.base.batching.length_batches`).

    On a CPU a batch holds at most ``batch_size`` rows and
    :data:`~moverkit._core.base.batching.ENCODE_TOKEN_BUDGET` padded tokens, padded to its longest row:
    these batches fix a text's vectors to the last bit (its batch changes the matrix products'
    shapes), so they stay what the golden scores were computed with. On a CUDA device (or under its
    plan, :func:`~moverkit._core.base.hardware.cuda_plan`) a batch holds
    :func:`~moverkit._core.base.batching.cuda_token_budget` padded tokens for ``batch_size`` and the
    precision ``dtype``, however many rows, padded to one of a few widths
    (:func:`~moverkit._core.base.batching.cuda_width`, capped by the model's ``limit``), so that
    the attention kernels see a handful of shapes. Other devices take ``batch_size`` rows, padded
    to the longest."""
    if cuda_plan(device):
        width = partial(cuda_width, limit=limit)
        budget = cuda_token_budget(batch_size, dtype)
        batches = length_batches(lengths, max(len(lengths), 1), budget, width)
        return [(batch, width(lengths[batch[0]])) for batch in batches]
    max_tokens = ENCODE_TOKEN_BUDGET if device.type == "cpu" else None
    return [(batch, lengths[batch[0]]) for batch in length_batches(lengths, batch_size, max_tokens)]


def encode_texts(
    encoder: Encoder, texts: Sequence[str], request: EncoderRequest, *, layers: Sequence[int] | None = None
) -> TokenClouds:
    """:func:`encode` of ``texts`` tokenized as a call of ``request`` tokenizes them
    (:class:`~moverkit._core.encoding.tokens.CallTokenizer`: its token limit, its long-text mode,
    one warning if some were cut): for callers outside a metric call (tuning, centering fits)."""
    tokenizer = CallTokenizer.of(encoder, request.max_length, request.long_texts)
    clouds = encode(encoder, tokenizer.tokenize(texts), request, layers=layers)
    tokenizer.close(len(texts))
    return clouds


def encode(
    encoder: Encoder, tokens: TokenizedTexts, request: EncoderRequest, *, layers: Sequence[int] | None = None
) -> TokenClouds:
    """Embed the texts of ``tokens`` (expected unique, tokenized by the call's
    :class:`~moverkit._core.encoding.tokens.CallTokenizer`) into :class:`TokenClouds`, in their
    order, as ``request`` (:class:`~moverkit._core.encoding.request.EncoderRequest`) says: its
    batch size, dtype and progress bar.

    ``long_texts="window"`` (the tokens' mode) encodes a text longer than the limit whole, in
    overlapping windows (:mod:`~moverkit._core.base.windows`); ``"truncate"`` has cut it at the
    limit. Texts within the limit get the same vectors either way.

    Texts are sorted by token length, longest first (so a memory error shows up at once), and
    batched as :func:`encode_batches` says: ``batch_size`` at a time on a CPU, at most
    :data:`~moverkit._core.base.batching.ENCODE_TOKEN_BUDGET` padded tokens (long texts); by padded
    tokens, to a few widths, on a CUDA device.

    ``layers`` (block outputs, 0 = embeddings, up to ``encoder.layer``) also keeps, from the same
    forward pass, the vectors of each of those layers in ``layer_vectors`` (for aggregations over
    layers such as MoverScore's power means); ``vectors`` is unchanged.

    ``request.dtype`` (:data:`~moverkit._core.base.hardware.DTYPES`, concrete) is the precision of
    the forward pass (:func:`~moverkit._core.base.hardware.precision`); the vectors are float32
    whatever it is.
    """
    batch_size, dtype, limit = request.batch_size, request.dtype, tokens.limit
    if layers is not None:
        layers = encoder.check_layers(layers)
    ids, special_mask = tokens.ids, tokens.special
    # Truncated texts are within the limit already: only windows need planning.
    plan = WindowPlan(ids, None) if tokens.long_texts == "truncate" else plan_windows(ids, special_mask, limit)
    rows = plan.rows  # the texts themselves, unless some are cut into windows
    offsets = offsets_of(map(len, ids), len(ids))
    row_lengths = [len(row) for row in rows]
    row_offsets = offsets_of(row_lengths, len(rows))
    n_rows = int(row_offsets[-1])
    # Every row's ids in one flat tensor, and each id's place in it: a batch is gathered from them
    # (batching.pad), with no tensor made per text.
    flat_ids = torch.from_numpy(np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=n_rows))
    places = torch.arange(n_rows)
    vectors = torch.empty(n_rows, encoder.dim, dtype=torch.float32, device=encoder.device)
    layer_vectors = None
    if layers is not None:
        width = encoder.widths[layers[0]]  # of every one of them (check_layers)
        layer_vectors = torch.empty(len(layers), n_rows, width, dtype=torch.float32, device=encoder.device)
    pad_id = encoder.tokenizer.pad_token_id or 0
    described = f"model_type={encoder.path!r} ({encoder.name}, layer {encoder.layer})"
    finite = torch.ones((), dtype=torch.bool, device=encoder.device)
    # Nothing in the loop waits for the device: the padding, the real tokens' places and their
    # positions in the flattened batch are found on the host (the CPU tensors of pad, read with
    # numpy, which dispatches no torch op), the outputs gathered by index, and the finiteness check
    # read once, after the loop. All the batches run in one forward region (weights cast once).
    bar = tqdm(total=len(rows), desc="encoding", unit="text", disable=not request.verbose)
    with bar, encoder.region(dtype):
        for batch, width in encode_batches(row_lengths, batch_size, encoder.device, limit, dtype):
            if row_lengths[batch[0]] == 0:  # rows of no token (GPT-2 adds none to an empty text): no pass
                continue
            attention, input_ids, place = pad(row_offsets, torch.tensor(batch), flat_ids, places, width=width)
            real_np = np.flatnonzero(attention.numpy())
            input_ids = input_ids.masked_fill_(~attention, pad_id).to(encoder.device, non_blocking=True)
            place = place.reshape(-1)[real_np].to(encoder.device, non_blocking=True)
            real = torch.from_numpy(real_np).to(encoder.device, non_blocking=True)
            # A batch without padding needs no mask (nor transformers' read of whether it has any).
            padded = len(real_np) < attention.numel()
            attention = attention.long().to(encoder.device, non_blocking=True) if padded else None
            if layers is None:
                out = encoder.forward(input_ids, attention)
            else:
                out, stacked = encoder.forward_layers(input_ids, attention, layers)
                finite &= all_finite(stacked, attention)
                layer_vectors[:, place] = stacked.flatten(1, 2).index_select(1, real)
            finite &= all_finite(out, attention)
            vectors[place] = out.flatten(0, 1).index_select(0, real)
            bar.update(len(batch))  # texts encoded, not batches
    if not bool(finite):
        raise non_finite_error(described, dtype)
    if plan.source is not None:  # each token of a long text: its vector from its most central window
        source = plan.source.to(encoder.device)
        vectors = vectors[source]
        layer_vectors = None if layer_vectors is None else layer_vectors[:, source]
    n_tokens = int(offsets[-1])
    special = torch.from_numpy(np.fromiter(itertools.chain.from_iterable(special_mask), dtype=bool, count=n_tokens))

    return TokenClouds(
        texts=list(tokens.texts),
        vectors=vectors,
        offsets=offsets.to(encoder.device),
        token_ids=ids,
        special=special.to(encoder.device),
        tokenizer=encoder.tokenizer,
        layer_vectors=layer_vectors,
        layers=layers,
    )
