"""From (predictions, references) to centered token clouds and padded pair batches.

Every metric's ``_compute`` runs :func:`prepare_pairs` (validate, deduplicate, encode once,
weight, center) and then walks :meth:`PairData.batches`, which pads the token clouds of many pairs
into one tensor so that its own math is a few tensor operations per batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch

from .centering import CENTERING_MODES, CenteringStats, center, resolve_stats
from .encoder import Encoder, TokenClouds, encode, get_encoder
from .idf import IdfTable, check_idf, token_weights
from .inputs import call_texts

# Pairs per padded batch are capped so that one (pairs x prediction length x reference length)
# similarity tensor holds at most this many entries (64 MiB in float32).
PAIR_BATCH_ELEMENTS = 1 << 24
# ... and so that padding adds at most this share to the pairs' own entries (plus a few thousand
# entries, so that short pairs still batch together): on WMT17 one big batch padded to the longest
# pair computed 6.3x the real entries, this bound 1.5x, in 10 batches for 2,800 pairs.
PAIR_BATCH_PADDING = 1.5
PAIR_BATCH_SLACK = 4096


@dataclass(frozen=True)
class PaddedClouds:
    """Token clouds of ``B`` texts padded to one length ``L``."""

    vectors: torch.Tensor  # (B, L, D), zero at padding
    weights: torch.Tensor  # (B, L), zero at padding
    mask: torch.Tensor  # (B, L), True at real tokens


@dataclass(eq=False)
class PairData:
    """Everything a metric needs for its per-pair math.

    ``clouds`` holds each distinct text once (centered and unit-normalized); pair ``k`` compares
    text ``pred_index[k]`` with text ``ref_index[k]`` and belongs to prediction ``group[k]``.
    """

    encoder: Encoder
    clouds: TokenClouds
    pred_weights: torch.Tensor  # (n_tokens,) token weights when a text is a prediction: idf or 1, 0 for special tokens
    ref_weights: torch.Tensor  # (n_tokens,) the same when a text is a reference
    pred_index: torch.Tensor
    ref_index: torch.Tensor
    group: torch.Tensor
    n_predictions: int
    centering: str
    stats: CenteringStats | None
    idf: bool | Mapping
    prediction_idf: bool | Mapping

    def pad_pairs(self, pairs: torch.Tensor, with_special: bool = False) -> tuple[PaddedClouds, PaddedClouds]:
        """The padded prediction and reference clouds of the pairs ``pairs`` (pair indices)."""
        return (
            self.pad(self.pred_index[pairs], self.pred_weights, with_special),
            self.pad(self.ref_index[pairs], self.ref_weights, with_special),
        )

    def pad(self, texts: torch.Tensor, weights: torch.Tensor, with_special: bool = False) -> PaddedClouds:
        """Pad the clouds of ``texts`` (indices into ``clouds``) with per-token ``weights``.
        Special tokens are left out unless ``with_special`` (they then carry weight 0 but stay
        candidates for matching, as in bert-score)."""
        offsets, rows = (self.clouds.offsets, None) if with_special else self._scoring_rows()
        starts = offsets[texts]
        lengths = offsets[texts + 1] - starts
        width = max(int(lengths.max()) if len(texts) else 0, 1)
        steps = torch.arange(width, device=starts.device)
        mask = steps[None, :] < lengths[:, None]
        position = torch.where(mask, starts[:, None] + steps[None, :], 0)
        if rows is not None:
            position = rows[position] if rows.numel() else torch.zeros_like(position)
        vectors = self.clouds.vectors[position].masked_fill_(~mask[..., None], 0.0)
        return PaddedClouds(vectors, weights[position].masked_fill_(~mask, 0.0), mask)

    def _scoring_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not hasattr(self, "_rows"):
            keep = ~self.clouds.special
            rows = torch.nonzero(keep).flatten()
            per_text = torch.zeros(len(self.clouds.texts), dtype=torch.long, device=keep.device)
            per_text.index_add_(0, self.clouds.text_index(), keep.long())
            offsets = torch.zeros(len(self.clouds.texts) + 1, dtype=torch.long, device=keep.device)
            torch.cumsum(per_text, 0, out=offsets[1:])
            self._rows = (offsets, rows)
        return self._rows

    def lengths(self, texts: torch.Tensor, with_special: bool = False) -> torch.Tensor:
        offsets = self.clouds.offsets if with_special else self._scoring_rows()[0]
        return offsets[texts + 1] - offsets[texts]

    def batches(self, with_special: bool = False) -> Iterator[torch.Tensor]:
        """Pair indices in batches of similar lengths, each small enough that its similarity
        tensor stays under :data:`PAIR_BATCH_ELEMENTS` entries and wastes little on padding
        (:data:`PAIR_BATCH_PADDING`). Pairs are ordered by their longer side, then by size, so the
        padded width of a batch grows slowly."""
        n_pred = self.lengths(self.pred_index, with_special).clamp_min(1).cpu()
        n_ref = self.lengths(self.ref_index, with_special).clamp_min(1).cpu()
        order = torch.argsort(n_pred * n_ref, stable=True)
        order = order[torch.argsort(torch.maximum(n_pred, n_ref)[order], stable=True)]
        sizes_p, sizes_r = n_pred[order].tolist(), n_ref[order].tolist()
        start = 0
        while start < len(order):
            end, width_p, width_r, real = start, 1, 1, 0
            while end < len(order):
                wp, wr = max(width_p, sizes_p[end]), max(width_r, sizes_r[end])
                padded = (end - start + 1) * wp * wr
                real_then = real + sizes_p[end] * sizes_r[end]
                too_big = padded > PAIR_BATCH_ELEMENTS or padded > PAIR_BATCH_PADDING * real_then + PAIR_BATCH_SLACK
                if end > start and too_big:
                    break
                width_p, width_r, real, end = wp, wr, real_then, end + 1
            yield order[start:end].to(self.pred_index.device)
            start = end


def prepare_pairs(
    predictions,
    references,
    *,
    model_type: str | None = None,
    num_layers: int | None = None,
    device=None,
    batch_size: int = 64,
    max_length: int | None = None,
    verbose: bool = False,
    idf: bool | Mapping = False,
    prediction_idf: bool | Mapping | None = None,
    centering: str = "none",
    centering_stats=None,
) -> PairData:
    """Validate inputs, encode each distinct text once, weight tokens, and center.

    ``idf=True`` fits BERTScore's IDF on the references (every reference counted as a document);
    a dict gives the weights. ``prediction_idf`` weighs the prediction side differently: ``None``
    uses the same weights as the references (BERTScore), ``True`` fits IDF on the predictions
    (MoverScore), a dict gives them. ``centering`` is one of :data:`CENTERING_MODES`; ``batch``
    takes the mean over every text of this call, ``corpus`` needs ``centering_stats``.
    """
    texts = call_texts(predictions, references)
    idf = check_idf(idf)
    prediction_idf = idf if prediction_idf is None else check_idf(prediction_idf)
    if centering not in CENTERING_MODES:
        raise ValueError(f"centering must be one of {', '.join(CENTERING_MODES)}; got {centering!r}")
    encoder = get_encoder(model_type, num_layers, device)
    stats = None
    if centering == "corpus":
        stats = resolve_stats(centering_stats, encoder.name, encoder.layer, encoder.model.config.hidden_size)
    clouds = encode(encoder, texts.unique, batch_size=batch_size, max_length=max_length, verbose=verbose)

    position = texts.position
    ref_table = IdfTable(clouds.token_ids[position[r]] for r in texts.pair_references) if idf is True else idf
    pred_table = prediction_idf
    if prediction_idf is True:
        pred_table = (
            ref_table
            if idf is True and prediction_idf is idf
            else IdfTable(clouds.token_ids[position[p]] for p in texts.predictions)
        )
    centered = center(clouds, centering, counts=texts.counts(), stats=stats)
    pred_index, ref_index = texts.pair_indices(clouds.vectors.device)
    return PairData(
        encoder=encoder,
        clouds=centered,
        pred_weights=token_weights(clouds, pred_table),
        ref_weights=token_weights(clouds, ref_table),
        pred_index=pred_index,
        ref_index=ref_index,
        group=texts.group,
        n_predictions=len(texts.predictions),
        centering=centering,
        stats=stats,
        idf=idf,
        prediction_idf=prediction_idf,
    )
