"""One metric call as every metric opens, prepares and closes it.

1. :func:`open_call` checks the shared arguments into a :class:`MetricCall` (the encoder
   ``request``, the ``centering`` plan, the output options);
2. :func:`~moverkit._core.call.streaming.chunks` prepares it once: the texts checked
   (:class:`~moverkit._core.base.inputs.CallTexts`), the encoder resolved, the token limit checked,
   the IDF table of a chunked call fitted; it yields the call as one chunk, or as several under
   the memory budget, each a :class:`PreparedChunk`;
3. the metric scores each chunk from :meth:`PreparedChunk.pairs` (its padded token clouds) and
   turns the pair scores into the chunk's result with :meth:`PreparedChunk.results`;
4. :meth:`MetricCall.close` merges the chunks' results into the call's.

What closes a call (a chunk's result, the merge, the hashcode) is :mod:`~moverkit._core.call.closing`'s.

Every metric takes the same encoder, centering and output arguments (``model_type`` ...
``return_reference_index``). They are declared once, as the keyword parameters of
:func:`open_call`, whose defaults are theirs; :func:`moverkit.functional.signature.metric_function`
puts them into each metric function's public signature and hands the function the
:class:`MetricCall` they were checked into, so that the five functions hold only what is theirs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from moverkit._core.base import checks
from moverkit._core.base.environment import Environment, call_environment, read_environment
from moverkit._core.base.inputs import CallTexts
from moverkit._core.base.user_warnings import warn_user
from moverkit._core.call.baseline import check_rescaling
from moverkit._core.call.closing import chunk_result, merge_results
from moverkit._core.call.pair_options import NO_OPTIONS, PairOptions
from moverkit._core.call.pairs import PairData, pair_data, sentence_pair_data
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.encoder import Encoder
from moverkit._core.encoding.request import EncoderRequest, check_lang
from moverkit._core.encoding.tokens import AheadTokens, CallTokenizer, Truncations


@dataclass(frozen=True)
class MetricCall:
    """One call of ``metric`` (or one chunk of it): its ``predictions`` and ``references`` as
    given, and its checked shared arguments: the encoder ``request``, the ``centering`` plan (a
    :class:`~moverkit._core.centering.maths.Centering`; the user's mode string is its ``mode``),
    whether the scores are ``rescaled`` (with ``baseline_path``'s file, else the shipped one), and
    which extra outputs were asked for.

    It is opened, not yet prepared: :func:`~moverkit._core.call.streaming.chunks` prepares it into
    the :class:`PreparedChunk` objects a metric scores, and :meth:`close` merges their results.
    ``environment``: the environment variables a call reads, read and checked when it opened
    (:mod:`~moverkit._core.base.hardware`); ``truncations``: the texts its tokenizer cut, which
    :meth:`close` reports in one warning."""

    metric: str
    predictions: Sequence
    references: Sequence
    request: EncoderRequest
    centering: Centering
    rescaled: bool = False
    baseline_path: str | os.PathLike | None = None
    return_alignment: bool = False
    return_reference_index: bool = False
    environment: Environment = field(default_factory=Environment)
    truncations: Truncations = field(default_factory=Truncations, compare=False)

    def running(self) -> contextlib.AbstractContextManager:
        """The context of the call's work: the environment its opening read
        (:func:`~moverkit._core.base.environment.call_environment`)."""
        return call_environment(self.environment)

    def close(self, chunk_results: Sequence[dict]) -> dict:
        """The call's result from its chunks' results (:meth:`PreparedChunk.results`, in order): lists
        concatenated, the hashcode (the same in every chunk) once; ``reference_index`` left out
        unless the call asked for it (it is computed always, chunk by chunk: one subtraction per
        prediction). The call's one truncation warning is given here, once every chunk is scored."""
        self.truncations.close()
        return merge_results(chunk_results, self.return_reference_index)


@dataclass(frozen=True)
class PreparedChunk:
    """One chunk of a prepared call (:func:`~moverkit._core.call.streaming.chunks`), what a metric
    scores: the opened ``call`` it belongs to, the chunk's ``predictions`` and ``references`` and
    what every later step reads, checked or resolved once: its ``texts``, the ``encoder``, the
    ``request`` and ``centering`` it runs with (a chunked call's carry the whole call's ``batch``
    mean and a quiet bar), the call's ``tokenizer`` (``None`` for sentences) and, for ``idf=True``
    past the memory budget, ``call_idf``, the table fitted on the whole call's references (and
    ``call_prediction_idf`` on its predictions, for ``prediction_idf=True``), and ``tokens``, its
    distinct texts tokenized where that was done ahead (an
    :class:`~moverkit._core.encoding.tokens.AheadTokens`: in a thread while the previous chunk
    encoded, or when the call was planned). Within the memory budget a call is one
    chunk, itself."""

    call: MetricCall
    predictions: Sequence
    references: Sequence
    texts: CallTexts
    encoder: Encoder
    request: EncoderRequest
    centering: Centering
    tokenizer: CallTokenizer | None = None
    call_idf: Mapping | None = None
    call_prediction_idf: Mapping | None = None
    tokens: AheadTokens | None = None

    @property
    def rescaled(self) -> bool:
        return self.call.rescaled

    @property
    def return_alignment(self) -> bool:
        return self.call.return_alignment

    def pairs(self, options: PairOptions = NO_OPTIONS) -> PairData:
        """The padded token clouds of this chunk's pairs
        (:func:`~moverkit._core.call.pairs.pair_data`; ``options``: the metric's, its ``idf``
        checked by it), weighted by ``call_idf`` where the whole call fitted one; for a
        sentence-level call, its sentence clouds
        (:func:`~moverkit._core.call.pairs.sentence_pair_data`; no option applies)."""
        if self.centering.level == "sentence":  # units are sentences (sbertscore)
            return sentence_pair_data(self.texts, self.encoder, self.request, self.centering, self.call.truncations)
        return pair_data(
            self.texts,
            self.encoder,
            self.tokenizer,
            self.request,
            self.centering,
            options,
            call_idf=self.call_idf,
            call_prediction_idf=self.call_prediction_idf,
            tokens=None if self.tokens is None else self.tokens.get(),
        )

    def results(
        self,
        scores: torch.Tensor,
        outputs: Sequence[str],
        data: PairData,
        *,
        hash_params: Mapping[str, object] | None = None,
        lower_is_better: bool = False,
    ) -> tuple[dict, torch.Tensor]:
        """The result of the chunk from the pair scores of its ``data``
        (:func:`~moverkit._core.call.closing.chunk_result`, with the call's metric and rescaling
        and the request's language); and the kept pairs (their indices), for alignments."""
        call = self.call
        return chunk_result(
            scores,
            outputs,
            data,
            metric=call.metric,
            rescaled=call.rescaled,
            baseline_path=call.baseline_path,
            centering=self.centering,
            lang=self.request.lang,
            hash_params=hash_params,
            lower_is_better=lower_is_better,
        )


@dataclass(frozen=True)
class Opening:
    """What a metric tells :func:`open_call` about itself (its ``metric_function`` decoration):
    its name; ``level``, ``"token"`` or ``"sentence"`` for sentence vectors; ``languages``, the
    languages it handles where it handles only some (sbertscore's sentence splitter; checked
    before any warning on ``lang``); ``default_layer``, the layer ``num_layers=None`` means where
    it is not the model's tuned one (``-1``, the last, for moverscore, as its releases)."""

    metric: str
    level: str = "token"
    languages: Callable[[], Sequence[str]] | None = None
    default_layer: int | None = None


def open_call(
    opening: Opening,
    predictions,
    references,
    *,
    model_type: str | os.PathLike | None = None,
    num_layers: int | None = None,
    batch_size: int = 64,
    device: str | int | torch.device | None = None,
    verbose: bool = False,
    centering: str = "none",
    centering_stats=None,
    max_length: int | None = None,
    lang: str = "en",
    long_texts: str = "truncate",
    dtype: str = "float32",
    rescale_with_baseline: bool = False,
    baseline_path: str | os.PathLike | None = None,
    return_alignment: bool = False,
    return_reference_index: bool = False,
) -> MetricCall:
    """A call of ``opening.metric`` on ``predictions`` and ``references``, its shared arguments
    checked, as a :class:`MetricCall`: what every metric function's first line was. The keyword
    parameters are the shared arguments themselves, declared here once (their defaults are the
    metrics'; a metric may change a default, such as ``centering``'s); ``opening`` says what the
    metric is (:class:`Opening`)."""
    metric, level = opening.metric, opening.level
    if opening.languages is not None:
        lang = check_lang(lang, opening.languages())
    request = EncoderRequest(
        model_type=model_type,
        num_layers=opening.default_layer if num_layers is None else num_layers,
        device=device,
        batch_size=batch_size,
        max_length=max_length,
        long_texts=long_texts,
        dtype=dtype,
        lang=lang,
        verbose=verbose,
    )
    plan = Centering(centering, centering_stats, level=level)
    if centering_stats is not None and plan.mode != "corpus":
        warn_user(
            f"centering_stats is read only by centering='corpus'; with centering={plan.mode!r} it is ignored "
            "(pass centering='corpus' to subtract it)",
        )
    environment = read_environment()  # every variable checked before any model loads
    rescaled = checks.boolean("rescale_with_baseline", rescale_with_baseline)
    if rescaled or baseline_path is not None:  # else there is no baseline to check
        rescaled = check_rescaling(metric, rescaled, baseline_path, lang=request.lang, centering=plan)
    return MetricCall(
        metric=metric,
        predictions=predictions,
        references=references,
        request=request,
        centering=plan,
        rescaled=rescaled,
        baseline_path=baseline_path,
        return_alignment=checks.boolean("return_alignment", return_alignment),
        return_reference_index=checks.boolean("return_reference_index", return_reference_index),
        environment=environment,
    )


__all__ = ["MetricCall", "Opening", "PreparedChunk", "open_call"]
