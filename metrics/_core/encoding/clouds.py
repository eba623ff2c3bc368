"""Token clouds: the contextual vectors one layer of an encoder gives the tokens of texts, stored flat.

What :func:`~moverkit._core.encoding.encoder.encode` returns and every metric compares (sentence
vectors are laid out the same way: :class:`~moverkit._core.encoding.sentences.SentenceClouds`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


@dataclass(eq=False)
class TokenClouds:
    """The token vectors of ``len(texts)`` texts, stored flat.

    Text ``i`` owns rows ``offsets[i]:offsets[i + 1]`` of ``vectors``; ``special`` marks the rows of
    special tokens ([CLS], [SEP], ...), which take part in the forward pass but not in scoring.
    """

    texts: list[str]
    vectors: torch.Tensor  # (n_tokens, dim), float32, on the encoder's device
    offsets: torch.Tensor  # (n_texts + 1,), int64, on the same device
    token_ids: list[list[int]]
    special: torch.Tensor  # (n_tokens,), bool
    tokenizer: object
    # Only from encode(..., layers=...): the vectors of each requested layer, same rows as `vectors`.
    layer_vectors: torch.Tensor | None = None  # (n_layers, n_tokens, dim), float32
    layers: tuple[int, ...] | None = None

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def tokens(self, i: int) -> list[str]:
        """Token strings of text ``i`` (special tokens included), for alignments and filters."""
        return self.tokenizer.convert_ids_to_tokens(self.token_ids[i])

    def scored_tokens(self, i: int) -> list[str]:
        """Token strings of text ``i`` without the special tokens: the rows ``PairData.pad`` keeps."""
        special = self.special[self.offsets[i] : self.offsets[i + 1]].tolist()
        return [t for t, s in zip(self.tokens(i), special) if not s]

    def text_index(self) -> torch.Tensor:
        """For every row of ``vectors``, the index of its text; shape (n_tokens,)."""
        return torch.repeat_interleave(torch.arange(len(self.texts), device=self.offsets.device), self.lengths)

    def with_vectors(self, vectors: torch.Tensor):
        """These clouds with other ``vectors`` of the same rows (centered, weighted), of the same
        type (a :class:`~moverkit._core.encoding.sentences.SentenceClouds` keeps its sentences),
        without the vectors of other layers."""
        return dataclasses.replace(self, vectors=vectors, layer_vectors=None, layers=None)
