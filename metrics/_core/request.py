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
from .centering import CENTERING_MODES, SENTENCE_CENTERING_MODES, CenteringStats, check_centering, resolve_stats
from .encoder import DTYPES, Encoder, check_dtype, check_model_lang, get_encoder
from .sentences import SentenceEncoder, get_sentence_encoder
from .windows import LONG_TEXT_MODES


@dataclass(frozen=True)
class EncoderRequest:
    """Which encoder a call uses and how it runs: the model and its layer, the device, the batch
    size, the token limit and what happens past it, the precision of the forward pass, the texts'
    language and whether to show progress. Checked when made; ``device`` and the model are resolved
    by :meth:`encoder`."""

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
        checks.boolean("verbose", self.verbose)
        check_model_lang(self.lang, self.model_type)

    def encoder(self) -> Encoder:
        """The process-wide encoder of this request (:func:`~moverkit._core.encoder.get_encoder`),
        checked against the device-dependent settings (``float16`` is refused on a CPU)."""
        encoder = get_encoder(self.model_type, self.num_layers, self.device)
        check_dtype(self.dtype, encoder.device)
        return encoder

    def sentence_encoder(self) -> SentenceEncoder:
        """The process-wide sentence encoder of this request (``num_layers``, ``max_length`` and
        ``long_texts`` do not apply to it), checked as :meth:`encoder`."""
        encoder = get_sentence_encoder(self.model_type, self.device)
        check_dtype(self.dtype, encoder.device)
        return encoder


@dataclass(frozen=True)
class Centering:
    """How a call centers its vectors (Chen et al., 2020, Section 5): ``mode`` (one of
    :data:`~moverkit._core.centering.CENTERING_MODES`), ``stats``, the fitted statistic that
    ``corpus`` subtracts (a :class:`~moverkit._core.centering.CenteringStats` or a path to one;
    ignored by the other modes), and ``level``, ``"token"`` or ``"sentence"`` (sentence vectors
    take no ``sentence`` mode). ``call_mean`` is set only for the chunks of a streamed ``batch``
    call (:mod:`~moverkit._core.streaming`): the mean over every text of the whole call, which each
    chunk subtracts instead of its own."""

    mode: str = "none"
    stats: CenteringStats | str | os.PathLike | None = None
    level: str = "token"
    call_mean: CenteringStats | None = None

    def __post_init__(self):
        check_centering(self.mode, self.level)

    def resolved(self, model: str, layer: int, dim: int) -> CenteringStats | None:
        """The statistic of ``corpus`` centering, loaded and checked against the encoder in use
        (model, layer, dimension); ``None`` for the other modes."""
        return resolve_stats(self.stats, model, layer, dim) if self.mode == "corpus" else None

    def within_call(self, call_mean: CenteringStats | None) -> Centering:
        """This centering for one chunk of a streamed call whose ``batch`` mean is ``call_mean``;
        the other modes are the same in every chunk."""
        if self.mode != "batch" or call_mean is None:
            return self
        return Centering(self.mode, self.stats, self.level, call_mean)


__all__ = ["CENTERING_MODES", "SENTENCE_CENTERING_MODES", "Centering", "EncoderRequest"]
