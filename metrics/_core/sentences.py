"""Sentences: splitting texts into sentences, and sentence-transformers models loaded once.

The sentence-level metric (sBERTScore) compares texts sentence by sentence. This is where texts
are split (pysbd, a rule-based splitter installed from PyPI: no data downloaded at run time),
where a ``sentence_transformers.SentenceTransformer`` is loaded once per (model, device) for the
process, and where the ``corpus`` centering statistic of sentence vectors is fitted.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from .centering import CenteringStats
from .encoder import _quiet_transformers, resolve_device, resolve_model

SENTENCE_LAYER = -1
"""The layer tag of sentence vectors, in hashcodes (``_L-1``) and in :class:`CenteringStats`: the
model's pooled sentence embedding (what ``SentenceTransformer.encode`` returns), not a transformer
block. Token-level statistics always carry a block index >= 0, so the two never mix."""


def check_language(language) -> str:
    """``language`` if pysbd splits it, else an error listing pysbd's language codes."""
    from pysbd.languages import LANGUAGE_CODES

    if not isinstance(language, str):
        raise TypeError(f"language must be a str such as 'en', got {type(language).__name__}")
    if language not in LANGUAGE_CODES:
        raise ValueError(f"language must be one of pysbd's {', '.join(sorted(LANGUAGE_CODES))}; got {language!r}")
    return language


def splitter_tag(language: str) -> str:
    """The splitter and its version, for hashcodes: ``pysbd-0.3.4:en``; checks ``language``."""
    import pysbd

    return f"pysbd-{pysbd.__version__}:{check_language(language)}"


def split_sentences(text: str, language: str = "en") -> list[str]:
    """The sentences of ``text``, stripped of surrounding white space; ``[]`` for an empty or
    white-space-only text.

    pysbd (Sadvilkar and Neumann, 2020) follows the "Golden Rules" of sentence boundaries:
    abbreviations (``Dr.``, ``U.S.``, ``e.g.``) and decimals (``3.50``) do not end a sentence,
    a closing quote stays with the sentence it closes (``He said "Stop." | Then he ran.``), and
    ``?``, ``!`` and ``...`` end one as ``.`` does. A text without final punctuation is one sentence.
    """
    import pysbd

    check_language(language)
    if not text.strip():
        return []
    # A new Segmenter per text: segment() keeps the text on the instance (so one shared instance
    # is not thread-safe), and making one costs under a microsecond.
    segmenter = pysbd.Segmenter(language=language, clean=False)
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


_SENTENCE_ENCODERS: dict[tuple[str, str], SentenceEncoder] = {}


def get_sentence_encoder(
    sentence_model: str | os.PathLike | None = None, device: str | int | torch.device | None = None
) -> SentenceEncoder:
    """Load (once per process) the sentence-transformers model ``sentence_model``: a Hugging
    Face id (from the local cache when offline) or a local folder. ``None`` is the embedded
    all-MiniLM-L6-v2. A plain transformers model (no sentence-transformers config) gets
    sentence-transformers' default, mean pooling."""
    if sentence_model is not None and not isinstance(sentence_model, (str, os.PathLike)):
        raise TypeError(
            f"sentence_model must be a sentence-transformers id or a local path, got {type(sentence_model).__name__}"
        )
    name, path = resolve_model(sentence_model)
    dev = resolve_device(device)
    key = (path, str(dev))
    if key not in _SENTENCE_ENCODERS:
        from sentence_transformers import SentenceTransformer

        local_only = os.path.isdir(path) or os.environ.get("HF_HUB_OFFLINE") == "1"
        try:
            with _quiet_transformers():
                model = SentenceTransformer(path, device=str(dev), local_files_only=local_only)
        except (OSError, ValueError) as err:
            where = "a local folder" if os.path.isdir(path) else "a Hugging Face id (offline: from the local cache)"
            raise ValueError(f"sentence_model={path!r} ({where}) could not be loaded: {err}") from err
        _SENTENCE_ENCODERS[key] = SentenceEncoder(name=name, path=path, device=dev, model=model.eval())
    return _SENTENCE_ENCODERS[key]


def release_sentence_encoders() -> None:
    """Forget every loaded sentence-transformers model (frees their memory)."""
    _SENTENCE_ENCODERS.clear()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
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


def fit_sentence_centering(
    texts: Sequence[str],
    sentence_model: str | os.PathLike | None = None,
    *,
    language: str = "en",
    device: str | int | torch.device | None = None,
    batch_size: int = 64,
    verbose: bool = False,
) -> CenteringStats:
    r"""Fit the ``corpus`` centering statistic of sentence vectors: the mean sentence embedding
    :math:`\mu = \frac{1}{N} \sum_k w_k` over the :math:`N` sentences of ``texts`` (split as
    :func:`split_sentences` does; a sentence counted as often as it occurs). ``layer`` is
    :data:`SENTENCE_LAYER` and ``n_tokens`` counts sentences. Save it with ``.save(path)``."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a list of strings")
    frequency = Counter(s for text in texts for s in split_sentences(text, language))
    if not frequency:
        raise ValueError("texts hold no sentence: the corpus mean needs at least one non-empty text")
    encoder = get_sentence_encoder(sentence_model, device)
    unique = list(frequency)
    vectors = encode_sentences(encoder, unique, batch_size=batch_size, verbose=verbose).double()
    counts = torch.tensor([frequency[s] for s in unique], dtype=torch.float64, device=vectors.device)
    n_sentences = int(counts.sum().item())
    mean = (counts @ vectors) / n_sentences
    return CenteringStats(
        mean=mean.cpu().numpy(),
        model=encoder.name,
        layer=SENTENCE_LAYER,
        n_texts=len(texts),
        n_tokens=n_sentences,
    )
