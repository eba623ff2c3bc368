"""The ``hashcode`` every result carries: enough to reproduce a reported number."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import transformers

from ..._version import __version__
from ..centering.stats_file import CenteringStats
from ..encoding.encoder import Encoder
from ..encoding.idf import idf_tag


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
    IDF, centering, statistic, token limit, long-text mode and dtype of ``data``, then the metric's own ``params``."""
    return get_hash(
        metric,
        data.encoder,
        idf=data.idf,
        centering_mode=data.centering_mode,
        stats=data.stats,
        max_length=data.max_length,
        long_texts=data.long_texts,
        dtype=data.dtype,
        **params,
    )
