"""Tokenizers without a Rust backend (a slow BERT tokenizer, ByT5's), read as the Rust ones are.

Built here, because transformers 5's Python tokenizers do not keep the promise that a text is
text: their ``tokenize(..., split_special_tokens=True)`` calls the model's ``_tokenize`` without
it, and a slow BERT tokenizer then keeps a written ``"[SEP]"`` whole, a real [SEP] id (issue 51).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class PythonEncoding:
    """One text's encoding by a tokenizer without a Rust backend (:func:`python_encode`), with
    the fields of a Rust ``Encoding`` that :class:`~moverkit._core.encoding.tokens.CallTokenizer`
    reads."""

    ids: list[int]
    special_tokens_mask: list[int]
    overflowing: bool  # whether the text was cut

    def __len__(self) -> int:
        return len(self.ids)


def python_encode(tokenizer, texts: list[str], limit: int | None) -> list[PythonEncoding]:
    """``texts`` encoded by a Python ``tokenizer`` as transformers' own call with
    ``truncation=True, max_length=limit`` and ``split_special_tokens=True`` gives them: the text's
    tokens, cut to the room ``limit`` leaves beside the special tokens (on the tokenizer's
    ``truncation_side``), then the special tokens added (``build_inputs_with_special_tokens``).
    Tokens are converted to ids one by one: transformers logs every list of ids longer than the
    model's limit, and a call reports what it cut once, itself."""
    room = None if limit is None else max(limit - tokenizer.num_special_tokens_to_add(pair=False), 0)
    left = getattr(tokenizer, "truncation_side", "right") == "left"
    encoded = []
    for text in texts:
        tokens = _python_tokens(tokenizer, text)
        cut = room is not None and len(tokens) > room
        if cut:
            tokens = tokens[len(tokens) - room :] if left else tokens[:room]
        content = [tokenizer.convert_tokens_to_ids(token) for token in tokens]
        encoded.append(
            PythonEncoding(
                ids=tokenizer.build_inputs_with_special_tokens(content),
                special_tokens_mask=tokenizer.get_special_tokens_mask(content),
                overflowing=cut,
            )
        )
    return encoded


def _python_tokens(tokenizer, text: str) -> list[str]:
    """A Python tokenizer's tokens of ``text`` with written special tokens split as text: its own
    ``tokenize(text, split_special_tokens=True)``, which is ``prepare_for_tokenization`` then
    ``_tokenize``, with the flag passed on to a ``_tokenize`` that takes it (transformers 5 drops
    it there; a slow BERT tokenizer needs it not to keep "[SEP]" whole)."""
    inner = getattr(tokenizer, "_tokenize", None)
    if inner is None or "split_special_tokens" not in inspect.signature(inner).parameters:
        return tokenizer.tokenize(text, split_special_tokens=True)
    text, _ = tokenizer.prepare_for_tokenization(text)
    return tokenizer._tokenize(text, split_special_tokens=True)
