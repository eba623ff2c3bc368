"""From a call's texts to centered token clouds and padded pair batches.

A metric's prepared chunk (:meth:`~moverkit._core.call.opening.PreparedChunk.pairs`) runs
:func:`pair_data` (deduplicate, encode once, filter, weight, center, aggregate layers; the
sentence clouds of sbertscore: :func:`sentence_pair_data`), and the metric walks
:meth:`PairData.batches`, which pads the token clouds of many pairs into one tensor so that its own
math is a few tensor operations per batch. :func:`prepare_pairs` is the checked entry for callers
outside a metric call (tuning, fine-tuning, the benches).

What a metric asks of its pairs beside the call comes as data
(:class:`~moverkit._core.call.pair_options.PairOptions`: IDF on each side, the tokens left out, an
aggregation over layers), applied here.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np
import torch

from moverkit._core.base.batching import offsets_from, pad, pair_buckets
from moverkit._core.base.inputs import CallTexts, call_texts
from moverkit._core.call.pair_options import (
    LAYER_AGGREGATIONS,
    NO_OPTIONS,
    PairOptions,
    TokenDrop,
    aggregated_layers,
    check_aggregated_centering,
)
from moverkit._core.centering.fit import default_corpus_stats
from moverkit._core.centering.maths import Centering, center, center_rows
from moverkit._core.centering.stats_file import CenteringStats
from moverkit._core.encoding.cache import cached_encode, cached_sentence_vectors
from moverkit._core.encoding.clouds import TokenClouds
from moverkit._core.encoding.encoder import Encoder, offsets_of
from moverkit._core.encoding.idf import IdfTable, check_idf, token_weights
from moverkit._core.encoding.models import encoder_for
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import SENTENCE_LAYER, SentenceClouds, SentenceEncoder
from moverkit._core.encoding.splitting import split_texts, splitter_tag
from moverkit._core.encoding.tokens import CallTokenizer, TokenizedTexts, Truncations

PAIR_BATCH_ELEMENTS = 1 << 24
"""Entries of one padded (pairs x prediction length x reference length) tensor (64 MiB in float32)."""


def kept_tokens(clouds: TokenClouds, drop: TokenDrop | None) -> torch.Tensor:
    """Flat mask over all token rows (special tokens included) of the tokens ``drop`` keeps."""
    if drop is None:
        return torch.ones_like(clouds.special)
    special = clouds.special.cpu().tolist()
    offsets = clouds.offsets.cpu().tolist()
    dropped = []
    for i in range(len(clouds.texts)):
        dropped += drop.dropped(clouds.tokens(i), special[offsets[i] : offsets[i + 1]], clouds.tokenizer)
    return ~torch.tensor(dropped, dtype=torch.bool, device=clouds.special.device)


@dataclass(frozen=True)
class PaddedClouds:
    """Token clouds of ``B`` texts padded to one length ``L``."""

    vectors: torch.Tensor  # (B, L, D), zero at padding
    weights: torch.Tensor  # (B, L), zero at padding
    mask: torch.Tensor  # (B, L), True at real tokens


@dataclass(eq=False)
class PairData:
    """Everything a metric needs for its per-pair math.

    ``clouds`` holds each distinct text once (centered and unit-normalized, or aggregated over
    ``layers``); pair ``k`` compares text ``pred_index[k]`` with text ``ref_index[k]`` and belongs
    to prediction ``group[k]``.
    """

    encoder: Encoder
    clouds: TokenClouds
    pred_weights: torch.Tensor  # (n_tokens,) weights as a prediction: idf or 1; 0 for special and dropped tokens
    ref_weights: torch.Tensor  # (n_tokens,) the same when a text is a reference
    kept: torch.Tensor  # (n_tokens,) bool, False for the tokens the filter (PairOptions.drop, a TokenDrop) left out
    pred_index: torch.Tensor
    ref_index: torch.Tensor
    group: torch.Tensor
    n_predictions: int
    centering_mode: str  # the call's centering mode (one of CENTERING_MODES)
    stats: CenteringStats | None
    idf: bool | Mapping
    prediction_idf: bool | Mapping | None
    layers: tuple[int, ...]  # the block outputs the vectors come from: (encoder.layer,) or the aggregated ones
    max_length: (
        int | None
    )  # the token limit the texts were truncated to (max_length capped by the model's own; None for sentences)
    long_texts: (
        str | None
    )  # "truncate" or "window": what happened to texts over the limit (moverkit._core.base.windows)
    dtype: str = "float32"  # the forward pass's precision (moverkit._core.base.hardware.DTYPES, concrete)
    splitter: str | None = None  # sentence clouds: the sentence splitter and its language (splitter_tag)

    def pad_pairs(self, pairs: torch.Tensor, with_special: bool = False) -> tuple[PaddedClouds, PaddedClouds]:
        """The padded prediction and reference clouds of the pairs ``pairs`` (pair indices; on the
        host, as :meth:`batches` gives them, their widths are read from the host copy of the
        lengths, with no wait for the device). Texts against themselves (one index tensor for both
        sides, as twmd's ``self_pairs`` makes them for Eq. 1's C(X, X)) are padded once, with the
        reference weights."""
        if pairs.device.type == "cpu":
            pred_index, ref_index = (torch.from_numpy(index[pairs.numpy()]) for index in self._host_index)
        else:
            pred_index, ref_index = self.pred_index[pairs], self.ref_index[pairs]
        ref = self.pad(ref_index, self.ref_weights, with_special)
        if self.pred_index is self.ref_index:
            return ref, ref
        return self.pad(pred_index, self.pred_weights, with_special), ref

    def pad(self, texts: torch.Tensor, weights: torch.Tensor, with_special: bool = False) -> PaddedClouds:
        """Pad the clouds of ``texts`` (indices into ``clouds``) with per-token ``weights``.
        Special tokens are left out unless ``with_special`` (they then carry weight 0 but stay
        candidates for matching, as in bert-score). ``texts`` on the host: the padded width is
        read from the host copy of the lengths (:meth:`host_lengths`); on the device it is read
        from the device (a wait)."""
        offsets, rows = (self.clouds.offsets, None) if with_special else self._scoring_rows()
        width = None
        if texts.device.type == "cpu":
            width = max(int(self.host_lengths(with_special)[texts.numpy()].max(initial=0)), 1)
            texts = texts.to(offsets.device, non_blocking=True)
        mask, vectors, padded_weights = pad(offsets, texts, self.clouds.vectors, weights, rows=rows, width=width)
        return PaddedClouds(vectors, padded_weights, mask)

    def _scoring_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not hasattr(self, "_rows"):
            keep = ~self.clouds.special
            rows = torch.nonzero(keep).flatten()
            per_text = torch.zeros(len(self.clouds.texts), dtype=torch.long, device=keep.device)
            per_text.index_add_(0, self.clouds.text_index(), keep.long())
            self._rows = (offsets_from(per_text), rows)
        return self._rows

    @functools.cached_property
    def _host_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``pred_index`` and ``ref_index`` on the host, copied once per call."""
        return self.pred_index.cpu().numpy(), self.ref_index.cpu().numpy()

    def host_lengths(self, with_special: bool = False) -> np.ndarray:
        """Each text's rows (tokens, special ones included when ``with_special``) on the host,
        copied once per call: the padded widths and the pair buckets are planned from them."""
        key = "_host_lengths_special" if with_special else "_host_lengths"
        if not hasattr(self, key):
            offsets = self.clouds.offsets if with_special else self._scoring_rows()[0]
            setattr(self, key, np.diff(offsets.cpu().numpy()))
        return getattr(self, key)

    def lengths(self, texts: torch.Tensor, with_special: bool = False) -> torch.Tensor:
        offsets = self.clouds.offsets if with_special else self._scoring_rows()[0]
        return offsets[texts + 1] - offsets[texts]

    def batches(
        self, with_special: bool = False, pairs: torch.Tensor | None = None, max_elements: int = PAIR_BATCH_ELEMENTS
    ) -> Iterator[torch.Tensor]:
        """Indices of ``pairs`` (default: every pair), on the host, in batches of similar lengths
        (:func:`~moverkit._core.base.batching.pair_buckets`), each padded (pairs x prediction length x
        reference length) tensor under ``max_elements`` entries. Planned on the host from
        :meth:`host_lengths`: no read of the device per batch."""
        pred_index, ref_index = self._host_index
        pairs = torch.arange(len(pred_index)) if pairs is None else pairs.cpu()
        lengths = self.host_lengths(with_special)
        chosen = pairs.numpy()
        n_pred = torch.from_numpy(lengths[pred_index[chosen]])
        n_ref = torch.from_numpy(lengths[ref_index[chosen]])
        for batch in pair_buckets(n_pred, n_ref, max_elements):
            yield pairs[batch]


def prepare_pairs(
    predictions,
    references,
    request: EncoderRequest,
    centering: Centering,
    options: PairOptions = NO_OPTIONS,
    *,
    call_idf: Mapping | None = None,
    encoder: Encoder | None = None,
    clouds: TokenClouds | None = None,
) -> PairData:
    """Validate inputs, encode each distinct text once, filter and weight tokens, and center.

    ``request`` (:class:`~moverkit._core.encoding.request.EncoderRequest`) says which encoder runs and how;
    ``centering`` (:class:`~moverkit._core.centering.Centering`) how its vectors are centered:
    ``batch`` takes the mean over every text of this call (or the whole streamed call's mean, when
    ``centering.call_mean`` is given), ``corpus`` subtracts the fitted statistic.

    ``options`` (:class:`PairOptions`) are the metric's: its IDF weights on each side, the tokens
    it leaves out (False in :attr:`PairData.kept`) and an aggregation over layers (``corpus``
    centering fits one layer, so it is refused with one). ``idf=True`` takes ``call_idf`` where
    given, the table a streamed call fitted on all its references.

    Token clouds come through the cross-call cache (:mod:`~moverkit._core.encoding.cache`), before
    centering; everything after the forward pass (centering, similarities, transport) is float32
    or float64 whatever ``request.dtype`` is.

    ``encoder``, if given, is used instead of the request's (fine-tuning passes its trainable
    encoder, so gradients flow through this very path).

    ``clouds``, if given, are the raw token clouds of the call's distinct texts (in the order
    :func:`~moverkit._core.base.inputs.call_texts` gives them; with ``layer_vectors`` when ``layers`` is
    given), already encoded by ``encoder``: tuning (:mod:`moverkit.tuning`) encodes every text once
    with all layers and scores each layer from that one forward pass.

    This is the checked entry, for callers outside a metric call (tuning, fine-tuning, the
    benches): it checks the texts, the IDF arguments and the token limit and resolves the encoder,
    then runs :func:`pair_data`. A metric call checked all that once, at its opening, and runs
    :func:`pair_data` through :meth:`~moverkit._core.call.opening.PreparedChunk.pairs`.
    """
    if options.layer_aggregation is not None:
        check_aggregated_centering(centering)
    texts = call_texts(predictions, references)
    prediction_idf = options.prediction_idf
    options = replace(
        options,
        idf=check_idf(options.idf),
        prediction_idf=None if prediction_idf is None else check_idf(prediction_idf, "prediction_idf"),
    )
    encoder = encoder_for(request) if encoder is None else encoder
    tokenizer = CallTokenizer.of(encoder, request.max_length, request.long_texts)
    data = pair_data(texts, encoder, tokenizer, request, centering, options, call_idf=call_idf, clouds=clouds)
    tokenizer.close(len(texts.unique))
    return data


def pair_data(
    texts: CallTexts,
    encoder: Encoder,
    tokenizer: CallTokenizer,
    request: EncoderRequest,
    centering: Centering,
    options: PairOptions = NO_OPTIONS,
    *,
    call_idf: Mapping | None = None,
    call_prediction_idf: Mapping | None = None,
    clouds: TokenClouds | None = None,
    tokens: TokenizedTexts | None = None,
) -> PairData:
    """:func:`prepare_pairs` of texts and IDF arguments already checked, with their ``encoder``
    resolved and the call's ``tokenizer`` made: nothing here checks them again.
    ``call_prediction_idf``: for ``prediction_idf=True``, the table a streamed call fitted on all
    its predictions (as ``call_idf`` for the references). ``tokens``: ``texts.unique`` tokenized
    ahead of their turn."""
    idf, prediction_idf, layers, aggregation = (
        options.idf,
        options.prediction_idf,
        options.layers,
        options.layer_aggregation,
    )
    if aggregation is not None and centering.call_mean is not None:
        raise ValueError("a streamed call's batch mean is of one layer, not of an aggregation over layers")
    stats = centering.resolved(
        encoder.name,
        encoder.layer,
        encoder.dim,
        lambda: default_corpus_stats(encoder, request.dtype),
    )
    used_layers = (encoder.layer,) if layers is None else aggregated_layers(encoder, layers)
    if clouds is None:
        kept_layers = None if layers is None else used_layers
        clouds = cached_encode(encoder, texts.unique, tokenizer, request, layers=kept_layers, tokens=tokens)
        used_layers = used_layers if layers is None else clouds.layers
    elif clouds.texts != texts.unique or (layers is not None and clouds.layers != used_layers):
        raise ValueError("the given clouds are not those of this call's distinct texts (and layers)")
    kept = kept_tokens(clouds, options.drop)
    ref_idf = call_idf if idf is True and call_idf is not None else idf
    pred_idf = call_prediction_idf if prediction_idf is True and call_prediction_idf is not None else prediction_idf
    ref_table, pred_table = idf_tables(clouds, texts, ref_idf, pred_idf)
    counts = texts.counts()
    if centering.call_mean is not None:
        vectors = center(clouds, "corpus", stats=centering.call_mean).vectors  # the whole call's mean
    elif aggregation is None:
        vectors = center(clouds, centering.mode, counts=counts, stats=stats).vectors
    else:
        per_layer = torch.stack(
            [
                center(clouds.with_vectors(v), centering.mode, counts=counts, warn=k == 0).vectors
                for k, v in enumerate(clouds.layer_vectors)
            ]
        )
        vectors = LAYER_AGGREGATIONS[aggregation](per_layer)
        del per_layer
    return _pairs_of(
        texts,
        encoder,
        replace(clouds, vectors=vectors, layer_vectors=None, layers=None),
        token_weights(clouds, pred_table).masked_fill(~kept, 0.0),
        token_weights(clouds, ref_table).masked_fill(~kept, 0.0),
        kept,
        centering_mode=centering.mode,
        stats=stats,
        idf=idf,
        prediction_idf=prediction_idf,
        layers=used_layers,
        max_length=tokenizer.limit,
        long_texts=tokenizer.long_texts,
        dtype=request.dtype,
    )


def _pairs_of(texts: CallTexts, encoder, clouds: TokenClouds, pred_weights, ref_weights, kept, **fields) -> PairData:
    """The :class:`PairData` of the pairs of ``texts`` over ``clouds`` (their distinct texts, in
    order): the one place one is made, for token and sentence clouds alike."""
    pred_index, ref_index = texts.pair_indices(clouds.vectors.device)
    return PairData(
        encoder=encoder,
        clouds=clouds,
        pred_weights=pred_weights,
        ref_weights=ref_weights,
        kept=kept,
        pred_index=pred_index,
        ref_index=ref_index,
        group=texts.group,
        n_predictions=len(texts.predictions),
        **fields,
    )


def sentence_pair_data(
    texts: CallTexts, encoder: SentenceEncoder, request: EncoderRequest, centering: Centering, truncations: Truncations
):
    """The sentence clouds of a call's pairs, laid out as token clouds are, so that the same
    bucketing, padding and greedy matching score them (sbertscore: Sharma et al., 2023, Section 3).

    Every distinct text is split once (pysbd, ``request.lang``) and every distinct sentence
    embedded once (or taken from the cache across calls:
    :func:`~moverkit._core.encoding.cache.cached_sentence_vectors`), those cut at the model's limit
    counted in the call's ``truncations``; a sentence counts, for a ``batch`` mean, as often as it
    occurs in the call's texts. Vectors are centered in float64 (float32 unit vectors give self-similarities of
    1 + 1e-7), every sentence weighs 1 and none is special: text ``i`` owns rows
    ``offsets[i]:offsets[i + 1]``, one per sentence, and its sentences are ``clouds.units[i]``
    (:class:`~moverkit._core.encoding.sentences.SentenceClouds`)."""
    stats = centering.resolved(
        encoder.name, SENTENCE_LAYER, encoder.dim, lambda: default_corpus_stats(encoder, request.dtype)
    )
    split = split_texts(texts.unique, request.lang)
    sentence_counts = Counter()
    for text, n in texts.occurrences.items():
        for sentence in split[text]:
            sentence_counts[sentence] += n
    sentences = list(sentence_counts)
    position = {s: i for i, s in enumerate(sentences)}
    truncations.n_texts = len(sentences)
    vectors = cached_sentence_vectors(encoder, sentences, request, truncations).double()
    counts = torch.tensor([sentence_counts[s] for s in sentences], dtype=torch.float64)
    vectors = center_rows(vectors, centering.mode, counts=counts, stats=stats)
    on = vectors.device
    rows = torch.tensor([position[s] for text in texts.unique for s in split[text]], dtype=torch.long, device=on)
    units = [split[t] for t in texts.unique]
    offsets = offsets_of(map(len, units), len(units)).to(on)
    special = torch.zeros_like(rows, dtype=torch.bool)
    clouds = SentenceClouds(texts.unique, vectors[rows], offsets, [[] for _ in units], special, None, units=units)
    ones = torch.ones(len(rows), dtype=torch.float64, device=on)
    return _pairs_of(
        texts,
        encoder,
        clouds,
        ones,
        ones,
        ~special,
        centering_mode=centering.mode,
        stats=stats,
        idf=False,
        prediction_idf=None,
        layers=(SENTENCE_LAYER,),
        max_length=None,
        long_texts=None,
        dtype=request.dtype,
        splitter=splitter_tag(request.lang),
    )


def idf_tables(
    clouds: TokenClouds, texts: CallTexts, idf: bool | Mapping, prediction_idf: bool | Mapping | None
) -> tuple[bool | Mapping, bool | Mapping]:
    """The reference side's and the prediction side's weight tables (see :func:`prepare_pairs`)."""
    ids, position = clouds.token_ids, texts.position
    ref_table = IdfTable(ids[position[r]] for r in texts.pair_references) if idf is True else idf
    if prediction_idf is None:
        return ref_table, ref_table
    if prediction_idf is True:
        return ref_table, IdfTable(ids[position[p]] for p in texts.predictions)
    return ref_table, prediction_idf
