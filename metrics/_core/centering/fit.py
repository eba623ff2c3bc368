r"""Fitting the ``corpus`` centering statistic (:func:`fit_centering`): the mean token vector of one
layer, or the mean sentence vector, of a corpus, the :math:`\mu` of :mod:`~moverkit._core.centering`
fixed once for all calls. It returns a :class:`~moverkit._core.centering.stats_file.CenteringStats`, which
``.save`` writes and ``centering_stats=`` takes back.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from moverkit._core.base import checks
from moverkit._core.base.inputs import check_texts
from moverkit._core.base.user_warnings import warn_user
from moverkit._core.centering.maths import LEVELS, MIN_BATCH_TEXTS, row_mean
from moverkit._core.centering.stats_file import CenteringStats
from moverkit._core.encoding.encoder import encode, get_encoder
from moverkit._core.encoding.request import EncoderRequest
from moverkit._core.encoding.sentences import encode_sentences, get_sentence_encoder, split_sentences

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
    sentences (``num_layers`` and ``max_length`` do not apply). ``device``, ``batch_size`` and
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
    if level == "token":
        encoder = get_encoder(model_type, num_layers, device)
        clouds = encode(encoder, unique, EncoderRequest(batch_size=batch_size, max_length=max_length, verbose=verbose))
        mean, n = row_mean(clouds.vectors, offsets=clouds.offsets, scored=~clouds.special, counts=counts)
        if n == 0:
            raise ValueError(
                "texts hold no token once tokenized (only characters the tokenizer drops, such as zero-width "
                "spaces): the corpus mean needs at least one token"
            )
    else:
        encoder = get_sentence_encoder(model_type, device)
        vectors = encode_sentences(encoder, unique, EncoderRequest(batch_size=batch_size, verbose=verbose)).double()
        mean, n = row_mean(vectors, counts=counts)
    warn_small_fit(len(unique), "texts" if level == "token" else "sentences")  # once it is fitted, not before an error
    return CenteringStats(
        mean=mean.cpu().numpy(), model=encoder.name, layer=encoder.layer, n_texts=len(texts), n_tokens=n
    )
