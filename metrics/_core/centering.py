r"""Centering of contextual token vectors (Chen et al., 2020, Section 5).

Contextual vectors are anisotropic: two random tokens of BERT-like models have a high cosine
similarity. Subtracting a mean before taking cosines fixes that. With word vectors
:math:`w_{i,j}` (token :math:`j` of text :math:`i`, :math:`N_i` tokens, :math:`D` dimensions):

.. math::

    \text{dim:}\quad      v_{i,j} = w_{i,j} - \tfrac{1}{D} \textstyle\sum_{l} w_{i,j}^{(l)} \\
    \text{sentence:}\quad v_{i,j} = w_{i,j} - \tfrac{1}{N_i} \textstyle\sum_{k} w_{i,k} \\
    \text{batch / corpus:}\quad v_{i,j} = w_{i,j} - \mu,\qquad
        \mu = \frac{\sum_i c_i \sum_k w_{i,k}}{\sum_i c_i N_i}

then every vector is scaled to unit length (a vector that centering makes zero stays zero, so it
has similarity 0 with everything instead of NaN). Means run over the non-special tokens only;
special tokens are shifted by the same mean. For ``batch``, :math:`\mu` runs over every text of the
compute call, each counted as often as it occurs (:math:`c_i`); for ``corpus`` it was fitted once
(:func:`fit_centering`) and stored, so a pair gets the same score whatever else is in the call.

References
----------
.. [1] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with Batch
   Centering and Tempered Word Mover Distance. EMNLP Eval4NLP workshop, 2020.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .encoder import TokenClouds, encode, get_encoder

CENTERING_MODES = ("none", "dim", "sentence", "batch", "corpus")


@dataclass(frozen=True, eq=False)
class CenteringStats:
    """A mean token vector fitted on a corpus for one (model, layer): the ``corpus`` statistic."""

    mean: np.ndarray  # (dim,), float64
    model: str
    layer: int
    n_texts: int
    n_tokens: int

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
        with np.load(path, allow_pickle=False) as data:
            return cls(
                mean=data["mean"].astype(np.float64),
                model=str(data["model"]),
                layer=int(data["layer"]),
                n_texts=int(data["n_texts"]),
                n_tokens=int(data["n_tokens"]),
            )


def token_mean(clouds: TokenClouds, counts: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """Mean of the non-special token vectors, texts weighted by ``counts``; float64, and the
    number of tokens it averages (duplicates counted)."""
    sums, sizes = _text_sums(clouds)
    weight = torch.ones(len(clouds.texts), dtype=torch.float64, device=sums.device)
    if counts is not None:
        weight = counts.to(device=sums.device, dtype=torch.float64)
    total = weight @ sizes
    return (weight @ sums) / total.clamp_min(1.0), int(total.item())


def _text_sums(clouds: TokenClouds) -> tuple[torch.Tensor, torch.Tensor]:
    """Per text, the sum (float64) and the number of its non-special token vectors."""
    keep = ~clouds.special
    text_of_token = clouds.text_index()[keep]
    n, dim = len(clouds.texts), clouds.vectors.shape[1]
    # Summing a text's few tokens in float32 loses nothing that matters; the sums over texts run in float64.
    sums = torch.zeros(n, dim, dtype=clouds.vectors.dtype, device=clouds.vectors.device)
    sums.index_add_(0, text_of_token, clouds.vectors[keep])
    sizes = torch.zeros(n, dtype=torch.float64, device=sums.device)
    sizes.index_add_(0, text_of_token, torch.ones_like(text_of_token, dtype=torch.float64))
    return sums.double(), sizes


def resolve_stats(centering_stats, model: str, layer: int, dim: int) -> CenteringStats:
    """Accept a :class:`CenteringStats` or a path to one; check it fits the encoder in use."""
    if centering_stats is None:
        raise ValueError(
            "centering='corpus' needs centering_stats: fit one with moverkit.fit_centering(texts, ...) "
            "and pass it (or the path it was saved to)"
        )
    stats = centering_stats
    if isinstance(centering_stats, (str, os.PathLike)):
        stats = CenteringStats.load(centering_stats)
    if not isinstance(stats, CenteringStats):
        raise TypeError(f"centering_stats must be a CenteringStats or a path, got {type(centering_stats).__name__}")
    if stats.model != model or stats.layer != layer or stats.mean.shape != (dim,):
        raise ValueError(
            f"centering_stats was fitted for {stats.model} layer {stats.layer} (dim {stats.mean.shape[0]}), "
            f"but the encoder in use is {model} layer {layer} (dim {dim}); fit it again for this encoder"
        )
    return stats


def center(
    clouds: TokenClouds,
    mode: str,
    *,
    counts: torch.Tensor | None = None,
    stats: CenteringStats | None = None,
) -> TokenClouds:
    """Center the token vectors by ``mode`` and scale them to unit length (see the module doc).

    ``counts`` (``batch`` mode) gives how often each text occurs in the call; ``stats``
    (``corpus`` mode) is the fitted statistic. Returns new clouds; ``clouds`` is not modified.
    """
    w = clouds.vectors
    if mode == "none":
        v = w
    elif mode == "dim":
        v = w - w.mean(dim=1, keepdim=True)
    elif mode == "sentence":
        sums, sizes = _text_sums(clouds)
        means = (sums / sizes.clamp_min(1.0)[:, None]).to(w.dtype)
        v = w - means[clouds.text_index()]
    elif mode == "batch":
        v = w - token_mean(clouds, counts)[0].to(w.dtype)
    elif mode == "corpus":
        if stats is None:
            raise ValueError("centering='corpus' needs centering_stats")
        v = w - torch.as_tensor(stats.mean, device=w.device).to(w.dtype)
    else:
        raise ValueError(f"centering must be one of {', '.join(CENTERING_MODES)}; got {mode!r}")
    return clouds.with_vectors(torch.nn.functional.normalize(v, dim=-1))


VECTOR_CENTERING_MODES = ("none", "dim", "batch", "corpus")
"""The modes :func:`center_vectors` accepts: :data:`CENTERING_MODES` less ``sentence``."""


def center_vectors(
    vectors: torch.Tensor,
    mode: str,
    *,
    counts: torch.Tensor | None = None,
    stats: CenteringStats | None = None,
) -> torch.Tensor:
    r"""Center the rows of a plain matrix (one vector per item, e.g. sentence embeddings) by
    ``mode`` and scale them to unit length; the counterpart of :func:`center` for vectors that
    are not token clouds.

    .. math::

        \text{dim:}\quad   v_i = w_i - \tfrac{1}{D} \textstyle\sum_{l} w_i^{(l)} \qquad
        \text{batch:}\quad v_i = w_i - \frac{\sum_k c_k w_k}{\sum_k c_k} \qquad
        \text{corpus:}\quad v_i = w_i - \mu

    where :math:`w_i` is row ``i`` of ``vectors`` (shape (n, D)), :math:`c_k` how often item
    ``k`` occurs (``counts``, default 1 each) and :math:`\mu` the fitted ``stats.mean``; then
    :math:`v_i / \lVert v_i \rVert` (a zero vector stays zero). ``sentence`` is refused: with one
    vector per sentence, the sentence mean is the vector itself and centering leaves zero (Chen et
    al., 2020, Section 6.1, leave sentence-mean centering out for Sentence-BERT for this reason).
    Float64 means; returns a new tensor of the dtype of ``vectors``.
    """
    w = vectors
    if check_vector_centering(mode) == "none":
        v = w
    elif mode == "dim":
        v = w - w.mean(dim=1, keepdim=True)
    elif mode == "batch":
        weight = torch.ones(len(w), dtype=torch.float64, device=w.device)
        if counts is not None:
            weight = counts.to(device=w.device, dtype=torch.float64)
        v = w - ((weight @ w.double()) / weight.sum().clamp_min(1.0)).to(w.dtype)
    else:  # corpus
        if stats is None:
            raise ValueError("centering='corpus' needs centering_stats")
        v = w - torch.as_tensor(stats.mean, device=w.device).to(w.dtype)
    return torch.nn.functional.normalize(v, dim=-1)


def check_vector_centering(mode) -> str:
    """``mode`` if :func:`center_vectors` accepts it, else a ``ValueError`` naming the valid modes."""
    if mode == "sentence":
        raise ValueError(
            "centering='sentence' does not apply to one vector per sentence (it would leave every vector zero); "
            f"choose one of {', '.join(VECTOR_CENTERING_MODES)}"
        )
    if mode not in VECTOR_CENTERING_MODES:
        raise ValueError(f"centering must be one of {', '.join(VECTOR_CENTERING_MODES)}; got {mode!r}")
    return mode


def fit_centering(
    texts: Sequence[str],
    model_type: str | None = None,
    num_layers: int | None = None,
    *,
    device: str | None = None,
    batch_size: int = 64,
    max_length: int | None = None,
    verbose: bool = False,
) -> CenteringStats:
    """Fit the ``corpus`` centering statistic: the mean non-special token vector of ``texts``
    (each counted as often as it occurs) for one model and layer. Save it with ``.save(path)``."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a list of strings")
    if not texts:
        raise ValueError("texts must not be empty: the corpus mean needs at least one text")
    encoder = get_encoder(model_type, num_layers, device)
    frequency = Counter(texts)
    unique = list(frequency)
    clouds = encode(encoder, unique, batch_size=batch_size, max_length=max_length, verbose=verbose)
    counts = torch.tensor([frequency[t] for t in unique], dtype=torch.float64)
    mean, n_tokens = token_mean(clouds, counts)
    return CenteringStats(
        mean=mean.cpu().numpy(), model=encoder.name, layer=encoder.layer, n_texts=len(texts), n_tokens=n_tokens
    )
