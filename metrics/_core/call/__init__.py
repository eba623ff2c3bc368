"""The call layer: one metric call from its arguments to its result; imports the three layers below.

The opening (``open_call`` resolves and checks every shared argument once, into a ``MetricCall``),
the pairs (``prepare_pairs``: encoded, centered, weighted and padded clouds of a bucket of pairs),
the hashcode, streaming (``chunks``: the call prepared once, in chunks under the memory budget) and
the rescaling baselines.
"""

from moverkit._core.base.environment import set_memory_budget, temporary_memory_budget
from moverkit._core.call.baseline import baseline_csv, score_columns, settings_key
from moverkit._core.call.closing import get_hash, pair_hash
from moverkit._core.call.opening import MetricCall, Opening, PreparedChunk, open_call
from moverkit._core.call.pair_options import (
    PairOptions,
    TokenDrop,
    check_aggregated_centering,
    power_means,
    subword_marker,
)
from moverkit._core.call.pairs import PaddedClouds, PairData, prepare_pairs
from moverkit._core.call.streaming import chunks

__all__ = [
    "MetricCall",
    "Opening",
    "PreparedChunk",
    "PaddedClouds",
    "PairData",
    "PairOptions",
    "TokenDrop",
    "baseline_csv",
    "check_aggregated_centering",
    "chunks",
    "get_hash",
    "open_call",
    "pair_hash",
    "power_means",
    "prepare_pairs",
    "score_columns",
    "set_memory_budget",
    "settings_key",
    "subword_marker",
    "temporary_memory_budget",
]
