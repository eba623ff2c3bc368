"""Sentences: splitting texts into sentences, and sentence-transformers models loaded once.

The sentence-level metric (sBERTScore) compares texts sentence by sentence. This is where texts
are split (pysbd, a rule-based splitter installed from PyPI: no data downloaded at run time), and
where a ``sentence_transformers.SentenceTransformer`` is loaded through the model registry (once
per (model, device) for the process, freed by ``moverkit.release()``) and run.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from . import checks
from .encoder import _quiet_transformers, resolve_device, resolve_model
from .registry import cached_model

SENTENCE_LAYER = -1
"""The layer tag of sentence vectors, in hashcodes (``_L-1``) and in centering statistics: the
model's pooled sentence embedding (what ``SentenceTransformer.encode`` returns), not a transformer
block. Token-level statistics always carry a block index >= 0, so the two never mix."""


def check_lang(lang) -> str:
    """``lang`` if pysbd splits it, else an error listing pysbd's language codes."""
    from pysbd.languages import LANGUAGE_CODES

    return checks.one_of("lang", lang, sorted(LANGUAGE_CODES))


def splitter_tag(lang: str) -> str:
    """The splitter and its version, for hashcodes: ``pysbd-0.3.4:en``; checks ``lang``."""
    import pysbd

    return f"pysbd-{pysbd.__version__}:{check_lang(lang)}"


def split_sentences(text: str, lang: str = "en") -> list[str]:
    """The sentences of ``text``, stripped of surrounding white space; ``[]`` for an empty or
    white-space-only text.

    pysbd (Sadvilkar and Neumann, 2020) follows the "Golden Rules" of sentence boundaries:
    abbreviations (``Dr.``, ``U.S.``, ``e.g.``) and decimals (``3.50``) do not end a sentence,
    a closing quote stays with the sentence it closes (``He said "Stop." | Then he ran.``), and
    ``?``, ``!`` and ``...`` end one as ``.`` does. A text without final punctuation is one sentence.
    """
    import pysbd

    check_lang(lang)
    if not text.strip():
        return []
    # A new Segmenter per text: segment() keeps the text on the instance (so one shared instance
    # is not thread-safe), and making one costs under a microsecond.
    segmenter = pysbd.Segmenter(language=lang, clean=False)
    return [s.strip() for s in segmenter.segment(text) if s.strip()]


@dataclass(eq=False)
class SentenceEncoder:
    """A ``SentenceTransformer`` on ``device``; get one with :func:`get_sentence_encoder`."""

    name: str
    path: str
    device: torch.device
    model: object  # sentence_transformers.SentenceTransformer
    layer: int = SENTENCE_LAYER

    @property
    def dim(self) -> int:
        # sentence-transformers 5 renamed get_sentence_embedding_dimension to get_embedding_dimension.
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())


def get_sentence_encoder(
    model_type: str | os.PathLike | None = None, device: str | int | torch.device | None = None
) -> SentenceEncoder:
    """The sentence-transformers model ``model_type`` (a Hugging Face id, from the local cache
    when offline, or a local folder; ``None`` is the embedded all-MiniLM-L6-v2), loaded once per
    (model, device) through the model registry. A plain transformers model (no
    sentence-transformers config) gets sentence-transformers' default, mean pooling."""
    name, path = resolve_model(model_type)
    dev = resolve_device(device)
    return cached_model(("sentence", path, str(dev)), lambda: _load_sentence_encoder(name, path, dev))


def _load_sentence_encoder(name: str, path: str, device: torch.device) -> SentenceEncoder:
    from sentence_transformers import SentenceTransformer

    local_only = os.path.isdir(path) or os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        with _quiet_transformers():
            model = SentenceTransformer(path, device=str(device), local_files_only=local_only)
    except (OSError, ValueError) as err:
        where = "a local folder" if os.path.isdir(path) else "a Hugging Face id (offline: from the local cache)"
        raise ValueError(f"model_type={path!r} ({where}) could not be loaded: {err}") from err
    if getattr(model, "tokenizer", None) is not None:
        model.tokenizer.split_special_tokens = True  # user text is text: "[CLS]" is not the [CLS] id
    return SentenceEncoder(name=name, path=path, device=device, model=model.eval())


def encode_sentences(
    encoder: SentenceEncoder, sentences: Sequence[str], *, batch_size: int = 64, verbose: bool = False
) -> torch.Tensor:
    """Sentence embeddings of ``sentences``, shape (n, dim), float32 on the encoder's device, as
    ``SentenceTransformer.encode`` gives them (its pooling; not yet centered or re-normalized).
    Sentences longer than the model's ``max_seq_length`` are truncated by it, with one warning.

    Sentences are sorted by token length, longest first, and handed to ``encode`` one batch of
    ``batch_size`` at a time: sentence-transformers sorts by character length, which on WMT17
    text pads the batches to 1.55 times the real tokens, against 1.25 by token length.
    """
    checks.positive_int("batch_size", batch_size)
    vectors = torch.zeros(len(sentences), encoder.dim, dtype=torch.float32, device=encoder.device)
    lengths = _token_lengths(encoder, sentences)
    order = sorted(range(len(sentences)), key=lambda i: -lengths[i])
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc="encoding sentences", unit="batch", disable=not verbose):
        batch = order[start : start + batch_size]
        out = encoder.model.encode(
            [sentences[i] for i in batch], batch_size=len(batch), show_progress_bar=False, convert_to_tensor=True
        )
        vectors[batch] = out.to(vectors)
    return vectors


def _token_lengths(encoder: SentenceEncoder, sentences: Sequence[str]) -> list[int]:
    """Token counts (special tokens included) by the model's tokenizer, warning once about those
    over ``max_seq_length``; character counts for a model without a callable tokenizer."""
    tokenizer = getattr(encoder.model, "tokenizer", None)
    if not sentences or not callable(tokenizer):
        return [len(s) for s in sentences]
    with _quiet_transformers():
        lengths = [len(ids) for ids in tokenizer(list(sentences), add_special_tokens=True)["input_ids"]]
    limit = getattr(encoder.model, "max_seq_length", None)
    n_cut = sum(n > limit for n in lengths) if limit else 0
    if n_cut:
        warnings.warn(
            f"{n_cut} of {len(sentences)} sentences are longer than {limit} tokens and were truncated "
            f"(the max_seq_length of {encoder.name}).",
            stacklevel=4,
        )
    return lengths
