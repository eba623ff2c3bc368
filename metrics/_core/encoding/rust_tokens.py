"""The Rust tokenizer behind a fast tokenizer, copied for a call (:func:`rust_copy`)."""

from __future__ import annotations

import threading
import weakref

_RUST_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per tokenizer (as long as it lives), its Rust copies by what they depend on (:func:`rust_copy`)."""
_LOCK = threading.Lock()


def rust_copy(tokenizer, limit: int | None):
    """The Rust tokenizer behind a fast ``tokenizer`` as it is now, configured for a call: no
    padding (:func:`~moverkit._core.base.batching.pad` pads), cut at ``limit`` tokens (``None``:
    whole) on the tokenizer's ``truncation_side``, written special tokens read as text; ``None``
    for a tokenizer without a Rust backend. A copy, so no call changes the tokenizer a user or
    another thread holds; kept per tokenizer and keyed by the limit, the truncation side, the
    vocabulary's size and the special tokens, so a token added later or a side changed gives a
    new copy (a copy costs about 60 ms: not one per call)."""
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None:
        return None
    side = tokenizer.truncation_side
    key = (limit, side, backend.get_vocab_size(with_added_tokens=True), tuple(tokenizer.all_special_tokens))
    with _LOCK:
        copies = _RUST_COPIES.setdefault(tokenizer, {})
        if key not in copies:
            from tokenizers import Tokenizer

            copy = Tokenizer.from_str(backend.to_str())
            # The model itself, not its JSON: a Unigram score read back from JSON can be one ulp
            # off and change which of two near-tied segmentations wins (issue 51).
            copy.model = backend.model
            copy.no_padding()
            if limit is None:
                copy.no_truncation()
            else:
                copy.enable_truncation(limit, strategy="longest_first", direction=side)
            copy.encode_special_tokens = True
            copies[key] = copy
        return copies[key]
