"""Sentence vectors: sentence-transformers models loaded once, and run.

The sentence-level metric (sBERTScore) compares texts sentence by sentence; the texts are split
by :mod:`~moverkit._core.encoding.splitting`. This is where a
``sentence_transformers.SentenceTransformer`` is loaded through the model registry (once per
(model, device) for the process, freed by ``moverkit.release()``) and run.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from moverkit._core.base.batching import pad
from moverkit._core.base.hardware import precision, resolve_device
from moverkit._core.encoding.architecture import (
    PROBE_TOKENS,
    config_settings,
    position_limit,
    probe_rows,
    square_mask,
    takes_square_mask,
)
from moverkit._core.encoding.encoder import (
    TokenClouds,
    all_finite,
    cached_model,
    check_finite,
    check_padding,
    encode_batches,
    forward_region,
    non_finite_error,
    offsets_of,
)
from moverkit._core.encoding.request import EncoderRequest, identify_model, local_files_only, resolve_model
from moverkit._core.encoding.tokens import CallTokenizer, Truncations, rust_copy

SENTENCE_LAYER = -1
"""The layer tag of sentence vectors, in hashcodes (``_L-1``) and in centering statistics: the
model's pooled sentence embedding (what ``SentenceTransformer.encode`` returns), not a transformer
block. Token-level statistics always carry a block index >= 0, so the two never mix."""


@dataclass(eq=False)
class SentenceEncoder:
    """A ``SentenceTransformer`` on ``device``; get one with :func:`get_sentence_encoder`."""

    name: str
    path: str
    device: torch.device
    model: object  # sentence_transformers.SentenceTransformer
    layer: int = SENTENCE_LAYER
    square_mask: bool = False  # its transformer takes the (batch, 1, length, length) mask (takes_square_mask)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The sentence embeddings of a padded batch: the model's modules in turn, its transformer
        given :func:`~moverkit._core.encoding.architecture.square_mask`'s mask where it takes it (an
        argument of the module's call, which overrides the features' mask for the transformer
        alone: pooling reads the (batch, length) mask)."""
        features = {"input_ids": input_ids, "attention_mask": attention_mask}
        if not self.square_mask:
            return self.model(features)["sentence_embedding"]
        modules = list(self.model)
        features = modules[0](features, attention_mask=square_mask(attention_mask))
        for module in modules[1:]:
            features = module(features)
        return features["sentence_embedding"]

    @property
    def dim(self) -> int:
        # sentence-transformers 5 renamed get_sentence_embedding_dimension to get_embedding_dimension.
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())


@dataclass(eq=False)
class SentenceClouds(TokenClouds):
    """The sentence vectors of texts laid out as token clouds are (text ``i`` owns rows
    ``offsets[i]:offsets[i + 1]``, one per sentence, none special, no token ids and no tokenizer),
    so that the same padding and matching score them; ``units[i]`` are text ``i``'s sentences,
    what its alignment names."""

    units: list[list[str]] = field(default_factory=list)

    def tokens(self, i: int) -> list[str]:
        """The sentences of text ``i``."""
        return self.units[i]


def get_sentence_encoder(
    model_type: str | os.PathLike | None = None, device: str | int | torch.device | None = None
) -> SentenceEncoder:
    """The sentence-transformers model ``model_type`` (a Hugging Face id, from the local cache
    when offline, or a local folder; ``None`` is the embedded all-MiniLM-L6-v2), loaded once per
    (model, device) through the model registry. A plain transformers model (no
    sentence-transformers config) gets sentence-transformers' default, mean pooling."""
    return _shared_sentence_encoder(model_type, resolve_device(device))


def _shared_sentence_encoder(model_type, device: torch.device) -> SentenceEncoder:
    name, path = resolve_model(model_type)
    return cached_model(("sentence", path, str(device)), lambda: _load_sentence_encoder(name, path, device))


def sentence_encoder_for(request: EncoderRequest) -> SentenceEncoder:
    """The process-wide sentence encoder of ``request`` (:func:`get_sentence_encoder`; its
    ``num_layers``, ``max_length`` and ``long_texts`` do not apply), on the device the request
    resolved and checked when it was made."""
    return _shared_sentence_encoder(request.model_type, request.device)


def _load_sentence_encoder(name: str, path: str, device: torch.device) -> SentenceEncoder:
    """The sentence encoder of ``path``, loaded as the token encoder is
    (:func:`~moverkit._core.encoding.encoder.load_encoder`): float32 weights whatever the folder
    holds, the config's :func:`~moverkit._core.encoding.architecture.load_settings`, and a model
    whose sentence vectors move when a text is padded refused
    (:func:`~moverkit._core.encoding.encoder.check_padding`)."""
    from sentence_transformers import SentenceTransformer

    local_only = local_files_only(path)
    try:
        model = SentenceTransformer(
            path,
            device=str(device),
            local_files_only=local_only,
            model_kwargs={"dtype": torch.float32},
            config_kwargs=config_settings(path, local_only),
        )
    except (OSError, ValueError) as err:
        where = "a local folder" if os.path.isdir(path) else "a Hugging Face id (offline: from the local cache)"
        raise ValueError(f"model_type={path!r} ({where}) could not be loaded: {err}") from err
    if getattr(model, "tokenizer", None) is not None:
        model.tokenizer.split_special_tokens = True  # user text is text: "[CLS]" is not the [CLS] id
    transformer = getattr(model[0], "auto_model", None) if len(model) else None
    encoder = SentenceEncoder(name=name, path=path, device=device, model=model.eval())
    if isinstance(transformer, torch.nn.Module):
        encoder.name, _ = identify_model(name, path, transformer, transformer.config)  # a known model, wherever it is
        # sentence-transformers reads max_seq_length from its config or the tokenizer, past the
        # position table of a model whose positions start after a padding index (MPNet: 66 of 64).
        positions = position_limit(transformer, transformer.config)
        if None not in (positions, model.max_seq_length) and model.max_seq_length > positions:
            model.max_seq_length = positions
        limit = model.max_seq_length or PROBE_TOKENS
        pad_id = getattr(model.tokenizer, "pad_token_id", None) or 0
        with forward_region("float32", device):
            check_padding(
                f"model_type={path!r} ({encoder.name}, sentence vectors)",
                transformer,
                encoder.embed,
                limit,
                device,
                pad_id,
            )
        encoder.square_mask = takes_square_mask(transformer, device, limit) and _module_takes_mask(model, device, limit)
    return encoder


def _module_takes_mask(model, device: torch.device, limit: int) -> bool:
    """Whether the model's first module, called with ``attention_mask=`` beside its features,
    passes that mask to its transformer (sentence-transformers >= 5 lets a call's arguments
    override the features), bit for bit as its own call: probed on the rows of
    :func:`~moverkit._core.encoding.architecture.probe_rows`."""
    ids, mask = probe_rows(limit, device)
    try:
        with torch.no_grad():
            plain = model[0]({"input_ids": ids, "attention_mask": mask})["token_embeddings"]
            square = model[0]({"input_ids": ids, "attention_mask": mask}, attention_mask=square_mask(mask))
    except Exception:  # any refusal of the argument means: no square mask for this model
        return False
    kept = mask.bool()
    return bool(torch.equal(plain[kept], square["token_embeddings"][kept]))


def sentence_truncations(encoder: SentenceEncoder, truncations: Truncations | None = None) -> Truncations:
    """``truncations`` (a call's tally, :class:`~moverkit._core.encoding.tokens.Truncations`; a new
    one if not given) made to count sentences cut at ``encoder``'s ``max_seq_length``: what
    :class:`~moverkit._core.encoding.tokens.CallTokenizer.of` does for a token-level call."""
    truncations = Truncations() if truncations is None else truncations
    truncations.unit, truncations.limit = "sentences", encoder.model.max_seq_length or 0
    truncations.reason = f"and were truncated (the max_seq_length of {encoder.name})."
    return truncations


def encode_sentences(
    encoder: SentenceEncoder, sentences: Sequence[str], request: EncoderRequest, truncations: Truncations
) -> torch.Tensor:
    """Sentence embeddings of ``sentences``, shape (n, dim), float32 on the encoder's device, as
    ``SentenceTransformer.encode`` gives them (its pooling; not yet centered or re-normalized).
    Sentences longer than the model's ``max_seq_length`` are truncated by it and added to
    ``truncations`` (:func:`sentence_truncations`), whose owner gives the one warning.
    ``request`` (:class:`~moverkit._core.encoding.request.EncoderRequest`) gives the batch size, the
    progress bar and ``dtype``, the precision of the forward pass; the embeddings are float32
    whatever it is.

    A model whose first module is a transformer with a fast tokenizer (sentence-transformers'
    ``Transformer``, as every sentence-transformers text model) runs as the token encoder does:
    its sentences tokenized in one Rust batch call
    (:class:`~moverkit._core.encoding.tokens.CallTokenizer`, the ids sentence-transformers' own
    tokenization gives: stripped, truncated at ``max_seq_length``), sorted by token length and cut
    into the shared batches (:func:`~moverkit._core.encoding.encoder.encode_batches`), each padded
    (:func:`~moverkit._core.base.batching.pad`) and run through the modules (transformer, pooling,
    normalization) in one forward region (:func:`~moverkit._core.encoding.encoder.forward_region`):
    no per-batch tokenizer call, no move or cast of the model per call, each weight cast once.
    Other models go through ``SentenceTransformer.encode``, a batch at a time.
    """
    vectors = torch.zeros(len(sentences), encoder.dim, dtype=torch.float32, device=encoder.device)
    if not sentences:
        return vectors
    described = f"model_type={encoder.path!r} ({encoder.name}, sentence vectors)"
    ids = _sentence_ids(encoder, sentences, truncations)
    if ids is None:
        return _encode_with_sentence_transformers(encoder, sentences, request, vectors, described, truncations)
    lengths = [len(row) for row in ids]
    offsets = offsets_of(lengths, len(ids))
    flat_ids = torch.from_numpy(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(offsets[-1])))
    limit = encoder.model.max_seq_length or max(lengths)  # caps the padded widths on a CUDA device
    pad_id = encoder.model[0].tokenizer.pad_token_id or 0
    finite = torch.ones((), dtype=torch.bool, device=encoder.device)
    batches = encode_batches(lengths, request.batch_size, encoder.device, limit, request.dtype)
    bar = tqdm(total=len(sentences), desc="encoding sentences", unit="sentence", disable=not request.verbose)
    with bar, forward_region(request.dtype, encoder.device):
        for batch, width in batches:
            attention, input_ids = pad(offsets, torch.tensor(batch), flat_ids, width=width)
            input_ids = input_ids.masked_fill_(~attention, pad_id).to(encoder.device, non_blocking=True)
            attention = attention.long().to(encoder.device, non_blocking=True)
            out = encoder.embed(input_ids, attention)
            finite &= all_finite(out)
            vectors[torch.tensor(batch, device=encoder.device)] = out.float()
            bar.update(len(batch))
    if not bool(finite):
        raise non_finite_error(described, request.dtype)
    return vectors


def _sentence_ids(
    encoder: SentenceEncoder, sentences: Sequence[str], truncations: Truncations
) -> list[list[int]] | None:
    """The token ids sentence-transformers' ``Transformer`` module gives ``sentences`` (stripped,
    lower-cased if the module says so, truncated at ``max_seq_length``), from one Rust batch call,
    the sentences cut added to ``truncations``; ``None`` for a model this path does not take."""
    from sentence_transformers.models import Transformer

    first = encoder.model[0] if len(encoder.model) else None
    if not isinstance(first, Transformer) or not getattr(first.tokenizer, "is_fast", False):
        return None
    limit = encoder.model.max_seq_length
    texts = [s.strip().lower() if getattr(first, "do_lower_case", False) else s.strip() for s in sentences]
    backend = rust_copy(first.tokenizer, limit)
    if backend is None:
        return None
    return CallTokenizer(first.tokenizer, limit, "truncate", backend, truncations).tokenize(texts).ids


def _encode_with_sentence_transformers(
    encoder: SentenceEncoder,
    sentences: Sequence[str],
    request: EncoderRequest,
    vectors: torch.Tensor,
    described: str,
    truncations: Truncations,
) -> torch.Tensor:
    """:func:`encode_sentences` through ``SentenceTransformer.encode``, ``batch_size`` sentences at a
    time sorted by token length (character length for a model without a callable tokenizer)."""
    lengths = _token_lengths(encoder, sentences, truncations)
    order = sorted(range(len(sentences)), key=lambda i: -lengths[i])
    starts = range(0, len(order), request.batch_size)
    for start in tqdm(starts, desc="encoding sentences", unit="batch", disable=not request.verbose):
        batch = order[start : start + request.batch_size]
        with precision(request.dtype, encoder.device):
            out = encoder.model.encode(
                [sentences[i] for i in batch], batch_size=len(batch), show_progress_bar=False, convert_to_tensor=True
            )
        check_finite(described, out, request.dtype)
        vectors[batch] = out.to(vectors)
    return vectors


def _token_lengths(encoder: SentenceEncoder, sentences: Sequence[str], truncations: Truncations) -> list[int]:
    """Token counts (special tokens included) by the model's tokenizer, those over
    ``max_seq_length`` added to ``truncations``; character counts for a model without a callable
    tokenizer."""
    tokenizer = getattr(encoder.model, "tokenizer", None)
    if not sentences or not callable(tokenizer):
        return [len(s) for s in sentences]
    lengths = [len(ids) for ids in tokenizer(list(sentences), add_special_tokens=True)["input_ids"]]
    limit = getattr(encoder.model, "max_seq_length", None)
    if limit:
        truncations.add(s for s, n in zip(sentences, lengths) if n > limit)
    return lengths
