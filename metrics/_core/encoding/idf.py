r"""Inverse document frequency weights for tokens (BERTScore, Zhang et al. 2020, Section 3).

For a corpus of :math:`N` texts in which token :math:`t` occurs in :math:`df(t)` texts,

.. math::

    \mathrm{idf}(t) = \log \frac{N + 1}{df(t) + 1},\qquad \mathrm{idf}(t) = \log (N + 1)
    \text{ for a token the corpus never shows}

(BERTScore's smoothed definition, also MoverScore's). Special tokens always weigh 0.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping

import torch

from moverkit._core.base.user_warnings import warn_user
from moverkit._core.encoding.clouds import TokenClouds


class IdfTable(Mapping):
    """IDF of every token id, fitted on a corpus of tokenized texts; unseen ids get log(N + 1)."""

    def __init__(self, documents: Iterable[Iterable[int]]):
        self.document_frequency = Counter()
        self.n_documents = 0
        for ids in documents:
            self.document_frequency.update(set(ids))
            self.n_documents += 1

    def __getitem__(self, token_id: int) -> float:
        return math.log((self.n_documents + 1) / (self.document_frequency.get(token_id, 0) + 1))

    def __iter__(self):
        return iter(self.document_frequency)

    def __len__(self) -> int:
        return len(self.document_frequency)


def check_idf(idf, name: str = "idf") -> bool | Mapping:
    """``idf`` if it is ``True``, ``False`` or a dict from token (id or string) to a weight: a
    finite number >= 0 (as the IDF formula gives), its default too for a ``defaultdict``. A NaN,
    infinite or negative weight would make a score NaN, an infeasible transport problem or a
    negative mass, so it is refused here, once for every metric; ``name`` names the argument."""
    if isinstance(idf, bool):
        return idf
    if not isinstance(idf, Mapping):
        raise TypeError(
            f"{name} must be True, False or a dict from token (id or string) to weight, got {type(idf).__name__}"
        )
    for token, weight in idf.items():
        _check_weight(weight, f"{name}[{token!r}]")
    default = getattr(idf, "default_factory", None)
    if default is not None:
        _check_weight(default(), f"the default of {name} (its default_factory)")
    return idf


def _check_weight(weight, where: str) -> None:
    """A ``TypeError`` unless ``weight`` is a number (a 0-d tensor too, not a bool or a string), a
    ``ValueError`` unless it is finite and >= 0; both name ``where``."""
    what = "a finite number >= 0 (a token weight)"
    try:
        if isinstance(weight, (bool, str, bytes)):
            raise TypeError
        value = float(weight)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{where} must be {what}, got {weight!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be {what}, got {weight!r}")


def idf_tag(idf: bool | Mapping) -> str:
    """How the weights were chosen, for hashcodes: ``no-idf``, ``idf`` (from the references) or
    ``idf-dict:<digest>`` for weights the user gave."""
    if idf is True:
        return "idf"
    if idf is False:
        return "no-idf"
    payload = json.dumps(sorted((str(k), float(v)) for k, v in idf.items()))
    return "idf-dict:" + hashlib.sha1(payload.encode()).hexdigest()[:10]


def token_weights(clouds: TokenClouds, table: bool | Mapping) -> torch.Tensor:
    """Weight of every row of ``clouds``: 0 for special tokens; else 1 (``table`` False) or its
    IDF. A user dict may be keyed by token id or by token string; ids it lacks weigh 0 if
    it is a plain dict (as BERTScore's), or whatever a ``defaultdict`` gives."""
    flat_ids = [i for ids in clouds.token_ids for i in ids]
    if table is False:
        weights = torch.ones(len(flat_ids), dtype=torch.float32)
    else:
        lookup = _by_id(table, clouds.tokenizer)
        weights = torch.tensor([float(lookup(i)) for i in flat_ids], dtype=torch.float32)
    weights = weights.to(clouds.vectors.device)
    return weights.masked_fill(clouds.special, 0.0)


def _by_id(table: Mapping, tokenizer):
    if isinstance(table, IdfTable):
        return table.__getitem__
    keys = list(table.keys())
    if keys and all(isinstance(k, str) for k in keys):
        table = {tokenizer.convert_tokens_to_ids(k): v for k, v in table.items()}
    default = getattr(table, "default_factory", None)
    return lambda i: table[i] if i in table else (default() if default else 0.0)


def zero_weight_texts(clouds: TokenClouds, weights: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """Bool per text of ``clouds``: it has a token among ``candidates`` (bool per row) but its
    ``weights`` (per row) sum to 0, as every text of a call with one pair and ``idf=True`` (each
    token occurs in every text the IDF is fitted on: IDF log(2/2) = 0)."""
    text_of = clouds.text_index()
    n_texts = len(clouds.texts)
    mass = torch.zeros(n_texts, dtype=torch.float64, device=weights.device).index_add_(0, text_of, weights.double())
    n_candidates = torch.zeros_like(mass).index_add_(0, text_of, candidates.double())
    return (mass == 0) & (n_candidates > 0)


def count_zero_weight_texts(data) -> tuple[int, int]:
    """How many distinct prediction and reference texts of the pairs of ``data`` (a
    :class:`~moverkit._core.PairData`) have a non-special token but weigh 0 on their side."""
    words = ~data.clouds.special
    return tuple(
        int(zero_weight_texts(data.clouds, weights, words)[torch.unique(texts)].sum())
        for texts, weights in ((data.pred_index, data.pred_weights), (data.ref_index, data.ref_weights))
    )


def warn_zero_weights(n_predictions: int, n_references: int, outcome: str) -> None:
    """The one warning of every token-level metric for texts that :func:`zero_weight_texts` finds
    (``n_predictions`` and ``n_references`` distinct texts); ``outcome`` says what they score."""
    if n_predictions or n_references:
        warn_user(
            f"{n_predictions} prediction(s) and {n_references} reference(s) have IDF 0 on every token (each token "
            f"occurs in every text the IDF was fitted on, as with a single pair); {outcome}. Score more pairs in "
            "one call, pass idf=False, or an IDF dict fitted on a larger corpus.",
        )
