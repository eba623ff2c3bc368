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
(:math:`c_i`); for ``corpus`` it was fitted once (:func:`fit_centering`) and stored, so a pair gets
the same score whatever else is in the call. ``sentence`` does not apply to sentence vectors: the
mean of one vector is the vector itself, and every vector would be zero (Chen et al., 2020,
Section 6.1, leave it out for Sentence-BERT for this reason).

References
----------
.. [1] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with Batch
   Centering and Tempered Word Mover Distance. EMNLP Eval4NLP workshop, 2020.
"""

from __future__ import annotations

import hashlib
import numbers
import os
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from . import checks
from .encoder import TokenClouds, encode, get_encoder
from .inputs import check_texts
from .sentences import SENTENCE_LAYER, encode_sentences, get_sentence_encoder, split_sentences
from .user_warnings import warn_user

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


@dataclass(frozen=True, eq=False)
class CenteringStats:
    """A mean vector fitted on a corpus for one (model, layer): the ``corpus`` statistic.

    Token vectors carry their layer (a block index >= 0); sentence vectors carry
    ``layer = -1`` (the model's pooled sentence embedding) and count sentences in ``n_tokens``,
    so that a statistic of one kind is refused for the other.
    """

    mean: np.ndarray  # (dim,), float64
    model: str
    layer: int
    n_texts: int
    n_tokens: int

    def __post_init__(self):
        # Checked however it was made (fit, loaded, or built by hand): a bad mean would turn every
        # score of a call into NaN, 0 or 1 without a word.
        fields = {"model": self.model, "layer": self.layer, "n_texts": self.n_texts, "n_tokens": self.n_tokens}
        object.__setattr__(self, "mean", check_stats_fields("centering_stats", mean=self.mean, **fields))

    @property
    def digest(self) -> str:
        """Short fingerprint of the statistic, named in hashcodes."""
        h = hashlib.sha1(np.ascontiguousarray(self.mean, dtype=np.float64).tobytes())
        h.update(f"{self.model}|{self.layer}".encode())
        return h.hexdigest()[:10]

    def save(self, path: str | os.PathLike) -> None:
        """Write to ``path`` (a NumPy ``.npz`` archive; the name is used as given)."""
        with open(path, "wb") as f:
            np.savez(
                f,
                mean=self.mean,
                model=np.array(self.model),
                layer=np.array(self.layer),
                n_texts=np.array(self.n_texts),
                n_tokens=np.array(self.n_tokens),
            )

    @classmethod
    def load(cls, path: str | os.PathLike) -> CenteringStats:
        """Read a statistic written by :meth:`save`. A file that is not one (empty, truncated,
        another kind of file, a field missing or of the wrong kind) or whose mean is inadmissible
        (:func:`check_stats_fields`) is a ``ValueError`` naming ``centering_stats`` and the file."""
        where = f"centering_stats file {os.fspath(path)!r}"
        try:
            data = np.load(path, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise ValueError("a single array, not an .npz archive")
            with data:
                arrays = {key: data[key] for key in data.files}
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise
        except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as err:
            raise ValueError(
                f"{where} is not a statistic written by CenteringStats.save (an .npz archive): "
                f"{type(err).__name__}: {err}"
            ) from None
        missing = [key for key in _FIELDS if key not in arrays]
        if missing:
            raise ValueError(
                f"{where} lacks {', '.join(missing)}: it was not written by CenteringStats.save (fields: "
                f"{', '.join(_FIELDS)})"
            )
        fields = {key: _scalar(where, key, arrays[key]) for key in _FIELDS[1:]}
        fields["mean"] = check_stats_fields(where, mean=arrays["mean"], **fields)
        return cls(**fields)


_FIELDS = ("mean", "model", "layer", "n_texts", "n_tokens")

MAX_ABS_MEAN = 1e4
"""The largest admissible magnitude of a coordinate of a corpus mean. A mean lies in the convex
hull of the vectors it averages, so no coordinate exceeds the model's largest activation. Encoder
outputs (after LayerNorm) stay within tens: on the 200 WMT17 test pairs the embedded model's token
means peak at 2.6 (layer 3) and 0.15 (layer 6), its sentence mean at 0.04. Even the "massive
activations" of large decoders (Sun et al., 2024) are in the thousands, on one or two tokens of a
text. A larger value comes from a corrupted or foreign file, and would swamp every centered vector
(``1e300`` overflows float32 to inf, and the scores to NaN)."""


def _scalar(where: str, key: str, array: np.ndarray) -> str | int:
    """The 0-d string (``model``) or integer (the others) field ``key`` of a loaded statistic."""
    kind = "U" if key == "model" else "iu"
    if array.ndim != 0 or array.dtype.kind not in kind:
        expected = "a string" if key == "model" else "an integer"
        raise ValueError(f"{where}: {key} must be {expected}, got an array of {array.dtype} and shape {array.shape}")
    return str(array) if key == "model" else int(array)


def check_stats_fields(where: str, *, mean, model, layer, n_texts, n_tokens) -> np.ndarray:
    """``mean`` as a float64 vector, if the fields make an admissible statistic: a non-empty
    1-d real ``mean``, finite, every coordinate within :data:`MAX_ABS_MEAN`; a ``model`` name;
    ``layer`` >= -1; at least one text and one token. Else a ``ValueError`` starting with ``where``."""
    refit = "; fit it again with moverkit.fit_centering"
    array = np.asarray(mean)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "fiu":
        raise ValueError(
            f"{where}: mean must be a non-empty vector of real numbers, got {array.dtype} {array.shape}{refit}"
        )
    array = np.ascontiguousarray(array, dtype=np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        raise ValueError(f"{where}: mean holds {int(bad.sum())} NaN or infinite value(s) of {array.size}{refit}")
    peak = float(np.abs(array).max())
    if peak > MAX_ABS_MEAN:
        raise ValueError(
            f"{where}: mean has a coordinate of magnitude {peak:.3g}, beyond any hidden state (at most "
            f"{MAX_ABS_MEAN:g}): a corrupted or foreign statistic{refit}"
        )
    if not isinstance(model, str) or not model:
        raise ValueError(f"{where}: model must be a model name, got {model!r}")
    for name, value, minimum in (("layer", layer, -1), ("n_texts", n_texts, 1), ("n_tokens", n_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise ValueError(f"{where}: {name} must be an int >= {minimum}, got {value!r}{refit}")
    return array


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
    averages (each counted :math:`c_i` times).

    ``vectors`` (n_rows, D); ``offsets`` (n_texts + 1,): text ``i`` owns rows
    ``offsets[i]:offsets[i + 1]`` (``None``: one row per text); ``scored`` (n_rows,) bool: the rows
    that count (``None``: all); ``counts`` (n_texts,): how often each text occurs (``None``: once).
    """
    sums, sizes, _ = _text_sums(vectors, offsets, scored)
    weight = torch.ones(len(sizes), dtype=torch.float64, device=sums.device)
    if counts is not None:
        weight = counts.to(device=sums.device, dtype=torch.float64)
    total = weight @ sizes
    return (weight @ sums) / total.clamp_min(1.0), int(total.item())


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

    ``offsets``, ``scored`` and ``counts`` are as in :func:`row_mean`: token clouds pass their text
    offsets and non-special rows; sentence vectors pass neither (one row per text), and then
    ``sentence`` is refused. ``stats`` is the fitted statistic of ``corpus`` mode.
    """
    w = vectors
    mode = check_centering(mode, "token" if offsets is not None else "sentence")
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
    else:  # corpus
        if stats is None:
            raise ValueError("centering='corpus' needs centering_stats")
        v = w - torch.as_tensor(stats.mean, device=w.device).to(w.dtype)
    return torch.nn.functional.normalize(v, dim=-1)


def warn_small_batch(sizes: torch.Tensor, unit: str) -> None:
    """One warning if fewer than :data:`MIN_BATCH_TEXTS` of the ``unit`` (``"texts"``,
    ``"sentences"``) whose rows counted ``sizes`` (per distinct unit) have a row in the batch mean."""
    n = int((sizes > 0).sum())
    if n < MIN_BATCH_TEXTS:
        warn_user(
            f"centering='batch' over only {n} distinct {unit} (fewer than {MIN_BATCH_TEXTS}): the mean it "
            f"subtracts is mostly these {unit}' own vectors, so the scores say little (a single pair can score "
            f"near -1). Score more pairs per call (at least {MIN_BATCH_TEXTS} distinct {unit} together), or pass "
            "centering='corpus' (with a mean from moverkit.fit_centering) or centering='none'.",
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


def _describe(model: str, layer: int) -> str:
    return f"{model} sentence vectors (layer {layer})" if layer == SENTENCE_LAYER else f"{model} layer {layer}"


def resolve_stats(centering_stats, model: str, layer: int, dim: int) -> CenteringStats:
    """Accept a :class:`CenteringStats` or a path to one; check it fits the encoder in use (its
    model, its layer, or ``-1`` for sentence vectors, and its dimension)."""
    if centering_stats is None:
        how = 'texts, level="sentence"' if layer == SENTENCE_LAYER else "texts, model_type=..., num_layers=..."
        raise ValueError(
            f"centering='corpus' needs centering_stats: fit one with moverkit.fit_centering({how}) "
            "and pass it (or the path it was saved to)"
        )
    stats = centering_stats
    if isinstance(centering_stats, (str, os.PathLike)):
        stats = CenteringStats.load(centering_stats)
    if not isinstance(stats, CenteringStats):
        raise TypeError(f"centering_stats must be a CenteringStats or a path, got {type(centering_stats).__name__}")
    if stats.model != model or stats.layer != layer or stats.mean.shape != (dim,):
        raise ValueError(
            f"centering_stats was fitted for {_describe(stats.model, stats.layer)} (dim {stats.mean.shape[0]}), "
            f"but the encoder in use is {_describe(model, layer)} (dim {dim}); fit it again for this encoder"
        )
    return stats


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
    from .request import EncoderRequest  # request.py builds on this module

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
    return CenteringStats(
        mean=mean.cpu().numpy(), model=encoder.name, layer=encoder.layer, n_texts=len(texts), n_tokens=n
    )
