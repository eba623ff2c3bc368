"""Closing a call: each chunk's result from its pair scores, the call's result from its chunks',
and the hashcode every result carries (:func:`get_hash`, :func:`pair_hash`): enough to reproduce
a reported number.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

import torch
import transformers

from moverkit._core.base.inputs import best_per_group, reference_index
from moverkit._core.call.baseline import apply_baseline
from moverkit._core.centering.maths import Centering
from moverkit._core.centering.stats_file import CenteringStats
from moverkit._core.encoding.encoder import Encoder
from moverkit._core.encoding.idf import idf_tag
from moverkit.facts.version import __version__


def chunk_result(
    scores: torch.Tensor,
    outputs: Sequence[str],
    data,
    *,
    metric: str,
    rescaled: bool,
    baseline_path: str | os.PathLike | None,
    centering: Centering,
    lang: str,
    hash_params: Mapping[str, object] | None = None,
    lower_is_better: bool = False,
) -> tuple[dict, torch.Tensor]:
    """The result of a chunk from the pair scores of its ``data`` (one row per name of
    ``outputs``, or one vector for one output): each rescaled when asked
    (:func:`~moverkit._core.call.baseline.apply_baseline`), then each prediction's best over its
    references (``data.group``: the prediction of each pair), the ``hashcode`` (:func:`pair_hash`
    of ``data`` and the metric's own ``hash_params``, with ``rescaled=<baseline>`` when rescaled)
    and ``reference_index``, the position of the kept reference of the last output; and the kept
    pairs (their indices), for alignments."""
    hashcode = functools.partial(pair_hash, metric, data, **dict(hash_params or {}))
    extra = {}
    if rescaled:
        scores, extra["rescaled"] = apply_baseline(
            scores,
            metric,
            tuple(outputs),
            encoder=data.encoder,
            centering=centering,
            lang=lang,
            baseline_path=baseline_path,
            hashcode=hashcode(),
        )
    rows = scores.reshape(len(outputs), -1)
    results, best = {}, None
    for name, values in zip(outputs, rows):
        kept, best = best_per_group(values, data.group, data.n_predictions, lower_is_better=lower_is_better)
        results[name] = kept.tolist()
    results["hashcode"] = hashcode(**extra)
    results["reference_index"] = reference_index(best, data.group)
    return results, best


def merge_results(chunk_results: Sequence[dict], return_reference_index: bool) -> dict:
    """A call's result from its chunks' results (in order): lists concatenated, the hashcode (the
    same in every chunk) once; ``reference_index`` left out unless the call asked for it (it is
    computed always, chunk by chunk: one subtraction per prediction)."""
    merged = {}
    for key, value in chunk_results[0].items():
        if isinstance(value, list):
            merged[key] = [item for result in chunk_results for item in result[key]]
        else:
            if any(result[key] != value for result in chunk_results):
                raise RuntimeError(f"chunks of one call disagree on {key!r}")
            merged[key] = value
    if not return_reference_index:
        del merged["reference_index"]
    return merged


def get_hash(
    metric: str,
    encoder: Encoder,
    *,
    idf: bool | Mapping,
    centering_mode: str,
    stats: CenteringStats | None = None,
    **params,
) -> str:
    """``{metric}:{model}_L{layer}_{idf}_center={mode}[:{stats digest}]_{param}={value}..._version=...``

    Every value is resolved (no ``None``): the model name, the layer actually used, the IDF
    source, the centering mode and the fitted statistic's digest, the metric's own parameters in
    the order given, and the moverkit, transformers and torch versions.
    """
    center = centering_mode if stats is None else f"{centering_mode}:{stats.digest}"
    parts = [f"{metric}:{encoder.name}_L{encoder.layer}", idf_tag(idf), f"center={center}"]
    parts += [f"{key}={value}" for key, value in params.items()]
    parts.append(f"version={__version__}(hug_trans={transformers.__version__},torch={torch.__version__.split('+')[0]})")
    return "_".join(parts)


def pair_hash(metric: str, data, **params) -> str:
    """:func:`get_hash` for a metric computed on :class:`~moverkit._core.PairData`: the encoder,
    IDF, centering and statistic of ``data``, its units (the token limit and long-text mode of
    token clouds; the splitter of sentence clouds) and dtype, then the metric's own ``params``."""
    if data.splitter is None:
        units = {"max_length": data.max_length, "long_texts": data.long_texts}
    else:
        units = {"splitter": data.splitter}
    return get_hash(
        metric,
        data.encoder,
        idf=data.idf,
        centering_mode=data.centering_mode,
        stats=data.stats,
        **units,
        dtype=data.dtype,
        **params,
    )


__all__ = ["chunk_result", "get_hash", "merge_results", "pair_hash"]
