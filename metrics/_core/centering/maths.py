r"""Centering of contextual vectors (Chen et al., 2020, Section 5): the one implementation, for
token clouds and for sentence vectors.

Contextual vectors are anisotropic: two random tokens (or sentences) of BERT-like models have a
high cosine similarity. Subtracting a mean before taking cosines fixes that. The vectors are rows
:math:`w_{i,j}` (row :math:`j` of text :math:`i`, :math:`N_i` rows counted for means,
:math:`D` dimensions); a token cloud gives each text its tokens, sentence vectors give each
"text" one row (one sentence):

.. math::

    \text{dim:}\quad      v_{i,j} = w_{i,j} - \tfrac{1}{D} \textstyle\sum_{l} w_{i,j}^{(l)} \\
    \text{sentence:}\quad v_{i,j} = w_{i,j} - \tfrac{1}{N_i} \textstyle\sum_{k} w_{i,k} \\
    \text{batch / corpus:}\quad v_{i,j} = w_{i,j} - \mu,\qquad
        \mu = \frac{\sum_i c_i \sum_k w_{i,k}}{\sum_i c_i N_i}

then every vector is scaled to unit length (a vector that centering makes zero stays zero, so it
has similarity 0 with everything instead of NaN). Means run over the rows that count (for token
clouds the non-special tokens; special tokens are shifted by the same mean). For ``batch``,
:math:`\mu` runs over every text of the compute call, each counted as often as it occurs
(:math:`c_i`); for ``corpus`` it was fitted once (:func:`~moverkit._core.centering.fit.fit_centering`)
and stored (:mod:`~moverkit._core.centering.stats_file`), so a pair gets
the same score whatever else is in the call. ``sentence`` does not apply to sentence vectors: the
mean of one vector is the vector itself, and every vector would be zero (Chen et al., 2020,
Section 6.1, leave it out for Sentence-BERT for this reason).

Names: a *mode* is one of :data:`CENTERING_MODES` (what the user's ``centering=`` argument names);
a *centering* is a :class:`Centering`, the mode of one call with its level and statistic.

References
----------
.. [1] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with Batch
   Centering and Tempered Word Mover Distance. EMNLP Eval4NLP workshop, 2020.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from moverkit._core.base import checks
from moverkit._core.base.user_warnings import warn_user
from moverkit._core.centering.stats_file import CenteringStats, resolve_stats
from moverkit._core.encoding.clouds import TokenClouds

CENTERING_MODES = ("none", "dim", "sentence", "batch", "corpus")
"""The centering modes of token vectors."""

SENTENCE_CENTERING_MODES = ("none", "dim", "batch", "corpus")
"""The centering modes of sentence vectors: :data:`CENTERING_MODES` less ``sentence``."""

LEVELS = ("token", "sentence")

MIN_BATCH_TEXTS = 10
"""``batch`` centering over fewer distinct texts (token clouds: texts with a scored token; sentence
vectors: distinct sentences) than this warns once per call (:func:`warn_small_batch`): the mean
then holds too much of each text's own vector, and a single pair can score near -1. Measured with
centered_bertscore (twmd) on 120 WMT17 pairs against batch centering over all 120: mean absolute
change of the score 0.110 (0.132) for one pair (2 texts), 0.038 (0.046) for 4 texts, 0.015 (0.018)
for 10, 0.008 (0.010) for 20; the standard deviation of the scores across pairs is 0.127 (0.162).
From 10 texts on, the batch moves a score by about a tenth of the differences between pairs or less."""


def check_centering(mode, level: str = "token") -> str:
    """``mode`` if it applies to vectors of ``level`` (``"token"`` or ``"sentence"``), else an error
    naming the valid modes (``sentence`` for sentence vectors: with the reason)."""
    if level == "sentence" and isinstance(mode, str) and mode == "sentence":
        raise ValueError(
            "centering='sentence' does not apply to one vector per sentence (it would leave every vector zero); "
            f"choose one of {', '.join(SENTENCE_CENTERING_MODES)}"
        )
    return checks.one_of("centering", mode, CENTERING_MODES if level == "token" else SENTENCE_CENTERING_MODES)


def _text_sums(
    vectors: torch.Tensor, offsets: torch.Tensor | None, scored: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per text, the sum (float64) and the number of its rows that count, and the text of every row."""
    n_rows = vectors.shape[0]
    if offsets is None:
        text_of_row = torch.arange(n_rows, device=vectors.device)
        n_texts = n_rows
    else:
        n_texts = len(offsets) - 1
        text_of_row = torch.repeat_interleave(torch.arange(n_texts, device=offsets.device), offsets[1:] - offsets[:-1])
    keep = torch.ones(n_rows, dtype=torch.bool, device=vectors.device) if scored is None else scored
    kept_text = text_of_row[keep]
    # Summing a text's few rows in their own dtype loses nothing that matters; sums over texts run in float64.
    sums = torch.zeros(n_texts, vectors.shape[1], dtype=vectors.dtype, device=vectors.device)
    sums.index_add_(0, kept_text, vectors[keep])
    sizes = torch.zeros(n_texts, dtype=torch.float64, device=vectors.device)
    sizes.index_add_(0, kept_text, torch.ones_like(kept_text, dtype=torch.float64))
    return sums.double(), sizes, text_of_row


def row_mean(
    vectors: torch.Tensor,
    *,
    offsets: torch.Tensor | None = None,
    scored: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int]:
    r"""The mean :math:`\mu` of the module doc (float64, shape (D,)) and the number of rows it
    averages (each counted :math:`c_i` times): :class:`RowMean` of one part.

    ``vectors`` (n_rows, D); ``offsets`` (n_texts + 1,): text ``i`` owns rows
    ``offsets[i]:offsets[i + 1]`` (``None``: one row per text); ``scored`` (n_rows,) bool: the rows
    that count (``None``: all); ``counts`` (n_texts,): how often each text occurs (``None``: once).
    """
    mean = RowMean()
    mean.add(vectors, offsets=offsets, scored=scored, counts=counts)
    return mean.mean()


class RowMean:
    r""":math:`\mu = \sum_i c_i \sum_k w_{i,k} / \sum_i c_i N_i` gathered part by part (the
    texts of a call, or of a corpus, given slice by slice): the float64 sum and count of each part
    added up, so that no part's texts are held once it is added. The one computation of a mean of
    token vectors: :func:`row_mean` (one part), a streamed call's ``batch`` mean and
    :func:`~moverkit._core.centering.fit.fit_centering` (through :meth:`stats`)."""

    def __init__(self) -> None:
        self._sum: torch.Tensor | None = None
        self._total: torch.Tensor | None = None
        self._sizes: list[torch.Tensor] = []

    def add(
        self,
        vectors: torch.Tensor,
        *,
        offsets: torch.Tensor | None = None,
        scored: torch.Tensor | None = None,
        counts: torch.Tensor | None = None,
    ) -> None:
        """One part's rows (the arguments of :func:`row_mean`)."""
        sums, sizes, _ = _text_sums(vectors, offsets, scored)
        weight = torch.ones(len(sizes), dtype=torch.float64, device=sums.device)
        if counts is not None:
            weight = counts.to(device=sums.device, dtype=torch.float64)
        part_sum, part_total = weight @ sums, weight @ sizes
        self._sum = part_sum if self._sum is None else self._sum + part_sum.to(self._sum.device)
        self._total = part_total if self._total is None else self._total + part_total.to(self._total.device)
        self._sizes.append(sizes.cpu())

    def sizes(self) -> torch.Tensor:
        """Each text's rows that count, over every part (float64, on the CPU)."""
        return torch.cat(self._sizes) if self._sizes else torch.zeros(0, dtype=torch.float64)

    def mean(self) -> tuple[torch.Tensor, int]:
        r""":math:`\mu` (float64, shape (D,)) and the number of rows it averages."""
        if self._sum is None:
            raise ValueError("a mean of no part")
        return self._sum / self._total.clamp_min(1.0), int(self._total.item())

    def stats(self, model: str, layer: int, n_texts: int) -> CenteringStats | None:
        """:meth:`mean` as the statistic of ``n_texts`` texts of ``model``'s ``layer``; ``None``
        when no row counted."""
        if self._sum is None:
            return None
        mean, n = self.mean()
        if n == 0:
            return None
        return CenteringStats(mean=mean.cpu().numpy(), model=model, layer=layer, n_texts=n_texts, n_tokens=n)


def center_rows(
    vectors: torch.Tensor,
    mode: str,
    *,
    offsets: torch.Tensor | None = None,
    scored: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
    stats: CenteringStats | None = None,
    warn: bool = True,
) -> torch.Tensor:
    """Center the rows of ``vectors`` (n_rows, D) by ``mode`` and scale them to unit length (see
    the module doc); a new tensor of the dtype of ``vectors``. ``batch`` over too few texts warns
    (:func:`warn_small_batch`) unless ``warn`` is False (the second and later layers of one call).

    ``mode`` was checked once, where the call's :class:`Centering` was made (sentence vectors take
    no ``sentence`` mode). ``offsets``, ``scored`` and ``counts`` are as in :func:`row_mean`: token
    clouds pass their text offsets and non-special rows; sentence vectors pass neither (one row per
    text). ``stats`` is the fitted statistic of ``corpus`` mode.
    """
    w = vectors
    if mode == "none":
        v = w
    elif mode == "dim":
        v = w - w.mean(dim=1, keepdim=True)
    elif mode == "sentence":
        sums, sizes, text_of_row = _text_sums(w, offsets, scored)
        v = w - (sums / sizes.clamp_min(1.0)[:, None]).to(w.dtype)[text_of_row]
    elif mode == "batch":
        if warn:
            warn_small_batch(_text_sums(w, offsets, scored)[1], "texts" if offsets is not None else "sentences")
        v = w - row_mean(w, offsets=offsets, scored=scored, counts=counts)[0].to(w.dtype)
    elif mode == "corpus":
        if stats is None:
            raise ValueError("centering='corpus' needs centering_stats")
        # A copy (torch.tensor), not a view (as_tensor): the mean of a statistic sent to Ray workers
        # comes back read-only, and torch warned of that once in every worker.
        v = w - torch.tensor(stats.mean, device=w.device).to(w.dtype)
    else:  # not a user's mistake: Centering refuses unknown modes before any vector is made
        raise AssertionError(f"center_rows got an unchecked centering mode {mode!r}")
    return torch.nn.functional.normalize(v, dim=-1)


def warn_small_batch(sizes: torch.Tensor, unit: str) -> None:
    """One warning if fewer than :data:`MIN_BATCH_TEXTS` of the ``unit`` (``"texts"``,
    ``"sentences"``) whose rows counted ``sizes`` (per distinct unit) have a row in the batch mean.
    A call with no text at all has no mean and no score to warn about (moverkit.torchmetrics checks
    its arguments with such a call)."""
    n = int((sizes > 0).sum())
    if 0 < n < MIN_BATCH_TEXTS:
        warn_user(
            f"centering='batch' over only {n} distinct {unit.removesuffix('s') if n == 1 else unit} "
            f"(fewer than {MIN_BATCH_TEXTS}): the mean it "
            f"subtracts is mostly these {unit}' own vectors, so the scores say little (a single pair can score "
            f"near -1). Score more pairs per call (at least {MIN_BATCH_TEXTS} distinct {unit} together), or pass "
            "centering='corpus' (the default of centered_bertscore and twmd: a mean shipped for the embedded model, "
            "or one from moverkit.fit_centering) or centering='none'.",
        )


def center(
    clouds: TokenClouds,
    mode: str,
    *,
    counts: torch.Tensor | None = None,
    stats: CenteringStats | None = None,
    warn: bool = True,
) -> TokenClouds:
    """:func:`center_rows` for token clouds: means over the non-special tokens, ``counts`` per text.
    Returns new clouds; ``clouds`` is not modified."""
    vectors = center_rows(
        clouds.vectors, mode, offsets=clouds.offsets, scored=~clouds.special, counts=counts, stats=stats, warn=warn
    )
    return clouds.with_vectors(vectors)


@dataclass(frozen=True)
class Centering:
    """How a call centers its vectors (Chen et al., 2020, Section 5): ``mode`` (one of
    :data:`CENTERING_MODES`), ``stats``, the fitted statistic that ``corpus`` subtracts (a
    :class:`CenteringStats`, or a path to one, read when the plan is made; ignored by the other
    modes), and ``level``, ``"token"`` or ``"sentence"`` (sentence vectors take no ``sentence`` mode). ``call_mean`` is set only for the chunks of a streamed ``batch``
    call (:mod:`~moverkit._core.call.streaming`): the mean over every text of the whole call, which each
    chunk subtracts instead of its own."""

    mode: str = "none"
    stats: CenteringStats | str | os.PathLike | None = None
    level: str = "token"
    call_mean: CenteringStats | None = None

    def __post_init__(self):
        check_centering(self.mode, self.level)
        if self.mode == "corpus" and isinstance(self.stats, (str, os.PathLike)):
            # Read once, where the call opens: every chunk of a streamed call then checks the same
            # statistic against its encoder instead of reading the file again.
            object.__setattr__(self, "stats", CenteringStats.load(self.stats))

    def resolved(
        self, model: str, layer: int, dim: int, fallback: Callable[[], CenteringStats] | None = None
    ) -> CenteringStats | None:
        """The statistic of ``corpus`` centering, loaded and checked against the encoder in use
        (model, layer, dimension; ``fallback`` gives it where none is given and none ships:
        :func:`~moverkit._core.centering.stats_file.resolve_stats`); ``None`` for the other modes."""
        return resolve_stats(self.stats, model, layer, dim, fallback) if self.mode == "corpus" else None

    def within_call(self, call_mean: CenteringStats | None) -> Centering:
        """This centering for one chunk of a streamed call whose ``batch`` mean is ``call_mean``;
        the other modes are the same in every chunk."""
        if self.mode != "batch" or call_mean is None:
            return self
        return Centering(self.mode, self.stats, self.level, call_mean)
