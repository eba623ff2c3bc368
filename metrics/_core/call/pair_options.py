"""What a metric asks of its pairs beside the call, as data the core applies (:class:`PairOptions`).

IDF on each side, the tokens left out (:class:`TokenDrop`) and an aggregation over layers
(:func:`power_means`): MoverScore's choices (Zhao et al., 2019, Section 3 and its release) live
here as rules, so that the core never calls back into a metric. :mod:`~moverkit._core.call.pairs`
applies them when it builds a call's :class:`~moverkit._core.call.pairs.PairData`.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch

from moverkit._core.base import checks
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.encoder import Encoder


@dataclass(frozen=True)
class TokenDrop:
    """The tokens left out of scoring (weight 0 on both sides; special tokens weigh 0 already), as
    MoverScore's release leaves them out: a subword piece (``remove_subwords``), a token made only
    of ``string.punctuation`` (``remove_punctuation``), a token in ``stop_words``."""

    remove_subwords: bool = False
    remove_punctuation: bool = False
    stop_words: tuple[str, ...] = ()

    def dropped(self, tokens: list[str], special: list[bool], tokenizer) -> list[bool]:
        """For the token strings of one text (special ones marked), True for each token left out.
        A piece is told by the tokenizer's marker (:func:`subword_marker`): WordPiece's ``##``
        starts a continuation; byte-level BPE's ``Ġ`` and SentencePiece's ``▁`` start a word."""
        marker, continuation = subword_marker(tokenizer)
        if self.remove_subwords and not marker:
            raise ValueError(f"remove_subwords: cannot tell word pieces of {type(tokenizer).__name__}; pass False")
        stop = set(self.stop_words)
        dropped, first_word = [], True
        for token, is_special in zip(tokens, special):
            if is_special:
                dropped.append(False)
                continue
            has_marker = token.startswith(marker) if marker else False
            word = token[len(marker) :] if has_marker else token
            subword = has_marker if continuation else (not has_marker and not first_word)
            first_word = False
            dropped.append(
                (self.remove_subwords and subword)
                or (self.remove_punctuation and bool(word) and all(c in string.punctuation for c in word))
                or word in stop
                or token in stop
            )
        return dropped


@lru_cache(maxsize=8)
def subword_marker(tokenizer) -> tuple[str, bool]:
    """How the tokenizer marks word pieces: ``("##", True)`` for WordPiece (the marker starts a
    continuation), ``("Ġ", False)`` or ``("▁", False)`` for byte-level BPE and SentencePiece (the
    marker starts a word); ``("", False)`` when no marker starts 1% of its vocabulary."""
    vocab = tokenizer.get_vocab()
    for marker, continuation in (("##", True), ("Ġ", False), ("▁", False)):
        if sum(token.startswith(marker) for token in vocab) > len(vocab) // 100:
            return marker, continuation
    return "", False


def power_means(layer_vectors: torch.Tensor) -> torch.Tensor:
    r"""Concatenated power means over layers, MoverScore's Eq. (5) with
    :math:`p \in \{-\infty, 1, +\infty\}`:

    .. math::

        E(x_i) = \min_l z_{i,l} \oplus \tfrac{1}{L}\textstyle\sum_l z_{i,l} \oplus \max_l z_{i,l}

    (elementwise min, mean, max; Eq. (4) at :math:`p = -\infty, 1, +\infty`). ``layer_vectors``
    has shape (L, n_tokens, D), each layer already centered and L2-normalised; returns
    (n_tokens, 3 D), not normalised again (Eq. (1) sums them as they are, as the release does).
    """
    return torch.cat([layer_vectors.amin(0), layer_vectors.mean(0), layer_vectors.amax(0)], dim=-1)


LAYER_AGGREGATIONS = {"power_means": power_means}
"""The aggregations over layers a metric may ask for, by name."""


@dataclass(frozen=True)
class PairOptions:
    """What a metric asks of its pairs, beside the call: ``idf`` (checked: ``True`` fits BERTScore's
    IDF on the references, every pair's reference one document; a dict gives the weights),
    ``prediction_idf`` (``None``: the references' weights, as BERTScore; ``True``: IDF fitted on the
    predictions, MoverScore's; a dict; ``False``: 1), ``drop`` (a :class:`TokenDrop`: tokens left
    out of scoring, weight 0 on both sides) and ``layers`` with ``layer_aggregation`` (a name of
    :data:`LAYER_AGGREGATIONS`: token vectors aggregated over several layers of one forward pass,
    each layer centered on its own; ``layers`` an int ``k``, the last ``k`` block outputs, or the
    block outputs themselves)."""

    idf: bool | Mapping = False
    prediction_idf: bool | Mapping | None = None
    drop: TokenDrop | None = None
    layers: int | Sequence[int] | None = None
    layer_aggregation: str | None = None

    def __post_init__(self):
        if (self.layers is None) != (self.layer_aggregation is None):
            raise ValueError("layers and layer_aggregation go together: give both or neither")
        if self.layer_aggregation is not None:
            checks.one_of("layer_aggregation", self.layer_aggregation, tuple(LAYER_AGGREGATIONS))


NO_OPTIONS = PairOptions()
"""A metric's pairs as they come: no IDF, every token, one layer."""


def check_aggregated_centering(centering: Centering) -> None:
    """Refuse ``corpus`` centering of vectors aggregated over layers: its statistic is of one layer."""
    if centering.mode == "corpus":
        raise ValueError(
            "centering='corpus' applies to one layer, not to an aggregation over layers (such as power means); "
            "use 'none', 'dim', 'sentence' or 'batch'"
        )


def aggregated_layers(encoder: Encoder, layers: int | Sequence[int]) -> tuple[int, ...]:
    """The block outputs ``layers`` names: an int ``k``, the last ``k`` up to ``encoder.layer``
    (from block 1 on: all of them if there are fewer); a sequence, those (checked by the encoder,
    :meth:`~moverkit._core.encoding.encoder.Encoder.check_layers`, when it encodes them)."""
    if isinstance(layers, Sequence):
        return tuple(layers)
    k = checks.positive_int("layers", layers)
    return tuple(range(max(1, encoder.layer - k + 1), encoder.layer + 1))
