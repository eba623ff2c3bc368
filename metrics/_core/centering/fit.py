r"""Fitting the ``corpus`` centering statistic (:func:`fit_centering`): the mean token vector of one
layer, or the mean sentence vector, of a corpus, the :math:`\mu` of :mod:`~moverkit._core.centering`
fixed once for all calls. It returns a :class:`~moverkit._core.centering.stats_file.CenteringStats`, which
``.save`` writes and ``centering_stats=`` takes back.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from moverkit._core.base import checks
from moverkit._core.base.environment import current_environment
from moverkit._core.base.inputs import check_texts
from moverkit._core.base.key_locks import KeyLocks
from moverkit._core.base.user_warnings import warn_user
from moverkit._core.centering.maths import LEVELS, MIN_BATCH_TEXTS, RowMean, row_mean
from moverkit._core.centering.stats_file import SENTENCE_LAYER, STATS_DIR, CenteringStats
from moverkit._core.encoding.cache import cached_encode, cached_sentence_vectors
from moverkit._core.encoding.encoder import Encoder
from moverkit._core.encoding.memory import emptied_by_release
from moverkit._core.encoding.models import get_encoder
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import SentenceEncoder, get_sentence_encoder
from moverkit._core.encoding.splitting import split_sentences
from moverkit._core.encoding.tokens import CallTokenizer

MIN_FIT_TEXTS = MIN_BATCH_TEXTS
""":func:`fit_centering` over fewer distinct units than this (token level: distinct non-blank
texts; sentence level: distinct sentences) warns. A ``corpus`` mean fitted on a few texts is what
``batch`` centering subtracts in a call of as few texts, fixed once for all: the measurements of
:data:`MIN_BATCH_TEXTS` hold for it (a mean of 1 text, or of 3 identical ones, moves the scores
by about as much as they differ between pairs; one of 10 distinct texts by about a tenth)."""


def warn_small_fit(n: int, unit: str) -> None:
    """One warning if :func:`fit_centering` averages fewer than :data:`MIN_FIT_TEXTS` distinct
    ``unit`` (``"texts"``, ``"sentences"``)."""
    if n < MIN_FIT_TEXTS:
        warn_user(
            f"fit_centering over only {n} distinct {unit.removesuffix('s') if n == 1 else unit} "
            f"(fewer than {MIN_FIT_TEXTS}): the corpus mean is then "
            f"mostly these {unit}' own vectors, not the offset the model gives every text, and centering with it "
            f"moves scores by about as much as they differ between pairs. Fit it on at least {MIN_FIT_TEXTS} "
            f"distinct {unit} (more is better), such as the references to score or other texts of their domain.",
        )


def fit_centering(
    texts: Iterable[str],
    model_type: str | os.PathLike | None = None,
    num_layers: int | None = None,
    *,
    level: str = "token",
    lang: str = "en",
    device: str | int | torch.device | None = None,
    batch_size: int = 64,
    max_length: int | None = None,
    dtype: str = "float32",
    verbose: bool = False,
) -> CenteringStats:
    r"""Fit the ``corpus`` centering statistic: the mean vector :math:`\mu` of ``texts`` (a list
    or any iterable of strings, a generator too; each unit counted as often as it occurs) for one
    model; texts with no token (or no sentence) at all are a ``ValueError``. Save it with ``.save(path)`` and pass it (or the
    path) as ``centering_stats`` with ``centering="corpus"``.

    ``level="token"`` (centered_bertscore, twmd, moverscore, lazy_emd): the mean non-special token
    vector of layer ``num_layers`` of ``model_type`` (as those metrics' arguments), texts truncated
    to ``max_length`` tokens. ``level="sentence"`` (sbertscore): the mean sentence embedding of the
    sentence-transformers model ``model_type`` over the sentences of ``texts``, split in language
    ``lang`` as sbertscore splits them; the statistic's ``layer`` is ``-1`` and ``n_tokens`` counts
    sentences (``num_layers`` and ``max_length`` do not apply). ``device``, ``batch_size``,
    ``dtype`` (the precision of the forward pass: fit with the one the scores will use) and
    ``verbose`` are as in the metrics.

    Fewer than :data:`MIN_FIT_TEXTS` distinct texts (sentences) warn (:func:`warn_small_fit`):
    the mean would hold mostly their own vectors.
    """
    if isinstance(texts, Iterable) and not isinstance(texts, (str, bytes, Sequence)):
        texts = list(texts)  # a generator, a set, ...: read once
    texts = check_texts(texts, "texts")
    level = checks.one_of("level", level, LEVELS)
    batch_size = checks.positive_int("batch_size", batch_size)
    verbose = checks.boolean("verbose", verbose)
    if level == "token":
        checks.optional_positive_int("max_length", max_length)
        frequency = Counter(text for text in texts if text.strip())  # a blank text has no token to average
    else:
        for name, value in (("num_layers", num_layers), ("max_length", max_length)):
            if value is not None:
                raise ValueError(f"{name} does not apply to level='sentence' (sentence embeddings); got {value!r}")
        frequency = Counter(s for text in texts for s in split_sentences(text, lang))
    if not frequency:
        raise ValueError(f"texts hold no {level}: the corpus mean needs at least one non-empty text")
    unique = list(frequency)
    counts = torch.tensor([frequency[u] for u in unique], dtype=torch.float64)
    request = EncoderRequest(batch_size=batch_size, max_length=max_length, dtype=dtype, device=device, verbose=verbose)
    if level == "token":
        encoder = get_encoder(model_type, num_layers, request.device)
        stats = _token_mean(encoder, unique, counts, request, len(texts))
    else:
        encoder = get_sentence_encoder(model_type, request.device)
        stats = _sentence_mean(encoder, unique, counts, request, len(texts))
    warn_small_fit(len(unique), "texts" if level == "token" else "sentences")  # once it is fitted, not before an error
    return stats


def _token_mean(
    encoder: Encoder, unique: list[str], counts: torch.Tensor, request: EncoderRequest, n_texts: int
) -> CenteringStats:
    """The mean non-special token vector of ``unique`` texts, each counted ``counts`` times. With
    the cache across calls on, the texts' clouds come from it and go into it: fitting on the
    references and then scoring them encodes each once."""
    tokenizer = CallTokenizer.of(encoder, request.max_length, request.long_texts)
    clouds = cached_encode(encoder, unique, tokenizer, request)
    tokenizer.close(len(unique))
    mean = RowMean()
    mean.add(clouds.vectors, offsets=clouds.offsets, scored=~clouds.special, counts=counts)
    stats = mean.stats(encoder.name, encoder.layer, n_texts)
    if stats is None:
        raise ValueError(
            "texts hold no token once tokenized (only characters the tokenizer drops, such as zero-width "
            "spaces): the corpus mean needs at least one token"
        )
    return dataclasses.replace(stats, source=fit_source(encoder.name, encoder.layer, unique, counts, request))


def _sentence_mean(
    encoder: SentenceEncoder, unique: list[str], counts: torch.Tensor, request: EncoderRequest, n_texts: int
) -> CenteringStats:
    """The mean sentence embedding of ``unique`` sentences, each counted ``counts`` times (their
    vectors from and into the cache across calls, when it is on)."""
    mean, n = row_mean(cached_sentence_vectors(encoder, unique, request).double(), counts=counts)
    return CenteringStats(
        mean=mean.cpu().numpy(),
        model=encoder.name,
        layer=SENTENCE_LAYER,
        n_texts=n_texts,
        n_tokens=n,
        source=fit_source(encoder.name, SENTENCE_LAYER, unique, counts, request),
    )


def fit_source(model: str, layer: int, unique: list[str], counts: torch.Tensor, request: EncoderRequest) -> str:
    """What defines a fitted mean (:attr:`CenteringStats.source`, which its digest hashes): the
    model and layer, the corpus as a multiset (each distinct text or sentence with its count, in
    sorted order: the mean does not depend on the texts' order), the token limit and long-text
    mode, and the forward pass's precision. Not the batch size or the device: they move the
    mean's last bits only."""
    corpus = hashlib.sha1()
    for text, count in sorted(zip(unique, map(int, counts.tolist()))):
        corpus.update(f"{len(text)}:{text}{count};".encode("utf-8", "surrogatepass"))
    definition = (model, layer, corpus.hexdigest(), request.max_length, request.long_texts, request.dtype)
    return hashlib.sha1(repr(definition).encode()).hexdigest()


DEFAULT_CORPUS = STATS_DIR / "wmt17_references.txt.gz"
"""The corpus the shipped statistics were fitted on, shipped with them: the 2,191 distinct
reference translations of the WMT17 segment-level DA file (news, cs, de, ru, tr, zh to English),
one a line. :func:`default_corpus_stats` fits on it for an encoder no statistic ships for."""

_FITTED: dict[tuple, CenteringStats] = {}
"""The statistics :func:`default_corpus_stats` fitted or read in this process, by its key;
``moverkit.release()`` empties it (:func:`_forget_fitted`)."""

_FITTING = KeyLocks()
"""The lock of each encoder's statistic (:func:`default_corpus_stats`' key): a thread fitting it
(a minute for a large encoder on a CPU) makes the threads that want the same one wait and take its
result, and no thread that wants another encoder's."""


@emptied_by_release
def _forget_fitted() -> None:
    """Drop the statistics fitted or read in this process (``moverkit.release()`` calls it): the
    files kept on disk stay, and the next call that needs one reads it from there."""
    _FITTED.clear()


def default_corpus() -> list[str]:
    """The texts of :data:`DEFAULT_CORPUS`."""
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as file:
        return file.read().splitlines()


def default_corpus_stats(encoder: Encoder | SentenceEncoder, dtype: str) -> CenteringStats:
    """The ``corpus`` statistic of an encoder for which none ships (any model but the embedded
    one) and none is given: the mean vector of :data:`DEFAULT_CORPUS` (:func:`fit_centering`'s,
    on the corpus the shipped ones were fitted on; for the embedded model it gives them again), in
    the call's precision ``dtype``. ``centering="corpus"``, the default of centered_bertscore and
    twmd, thus works with every encoder, with a mean that does not depend on the call's texts.

    Fitted once per process and encoder, and kept in the folder of
    :data:`~moverkit._core.base.environment.CENTERING_CACHE_VARIABLE` (as the call's opening read it)
    so that the
    next process reads it (a 110M-parameter encoder takes about a minute on a CPU to fit it); one
    warning says so, with where it is kept. Its digest is in the hashcode of every score it centers,
    as a shipped statistic's. A file that fails :meth:`CenteringStats.load`'s checks, or that is of
    another model, is fitted again."""
    sentence = isinstance(encoder, SentenceEncoder)
    layer = SENTENCE_LAYER if sentence else encoder.layer
    limit = None if sentence else encoder.max_length
    key = (encoder.name, layer, limit, str(encoder.device), dtype)
    with _FITTING.hold(key):
        fitted = _FITTED.get(key)  # one read: a release() meanwhile may empty _FITTED
        if fitted is not None:
            return fitted
        path = _cache_path(encoder.name, layer, limit, dtype)
        stats = _read_cached(path, encoder.name, layer)
        if stats is None:
            start = time.perf_counter()
            stats = _fit_default(encoder, dtype)
            how = f"fitted in {time.perf_counter() - start:.1f} s" + (f", kept in {path}" if _save(stats, path) else "")
        else:
            how = f"read from {path}"
        _FITTED[key] = stats
    kind = "sentence vector" if sentence else f"token vector of layer {layer}"
    warn_user(
        f"centering='corpus': no statistic ships for {encoder.name}, so its mean {kind} over the "
        f"{stats.n_texts:,} WMT17 news references shipped with moverkit is subtracted ({how}; digest "
        f"{stats.digest} in the hashcode). For other domains fit one on your texts with moverkit.fit_centering(...) "
        "and pass it as centering_stats.",
    )
    return stats


def _fit_default(encoder: Encoder | SentenceEncoder, dtype: str) -> CenteringStats:
    corpus = default_corpus()
    request = EncoderRequest(dtype=dtype, device=encoder.device)
    if isinstance(encoder, SentenceEncoder):
        frequency = Counter(s for text in corpus for s in split_sentences(text, "en"))
        unique = list(frequency)
        counts = torch.tensor([frequency[u] for u in unique], dtype=torch.float64)
        return _sentence_mean(encoder, unique, counts, request, len(corpus))
    return _token_mean(encoder, corpus, torch.ones(len(corpus), dtype=torch.float64), request, len(corpus))


def _cache_path(model: str, layer: int, limit: int | None, dtype: str) -> Path | None:
    """Where :func:`default_corpus_stats` keeps a statistic (in the running call's
    :attr:`~moverkit._core.base.environment.Environment.centering_cache`); ``None`` when that is off."""
    folder = current_environment().centering_cache
    if folder is None:
        return None
    corpus = hashlib.sha1(DEFAULT_CORPUS.read_bytes()).hexdigest()[:10]
    key = hashlib.sha1(repr((model, layer, limit, dtype, corpus)).encode()).hexdigest()[:16]
    return Path(folder) / f"{key}.npz"


def _read_cached(path: Path | None, model: str, layer: int) -> CenteringStats | None:
    if path is None or not path.is_file():
        return None
    try:
        stats = CenteringStats.load(path)
    except (OSError, ValueError, TypeError):
        return None
    # a file written before statistics recorded their source is fitted again: its digest would
    # hash the bits of a mean fitted on some CPU
    return stats if stats.model == model and stats.layer == layer and stats.source else None


def _save(stats: CenteringStats, path: Path | None) -> bool:
    """Write ``stats`` to ``path`` (through a temporary file, so that a reader never sees half of
    it); whether it was written (a folder that cannot be written keeps it in memory only)."""
    if path is None:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(partial, "wb") as file:
            stats.save(file)
        os.replace(partial, path)
    except OSError:
        return False
    return True
