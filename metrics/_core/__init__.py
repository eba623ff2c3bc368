"""The shared core of moverkit, in five layers, each importing only those below it:

- ``base``: argument checks, warnings, the environment a call reads, hardware, locks by key, sizes
  and the heap, padding and bucketing, inputs;
- ``maths``: the metric maths the metrics share (cosines, greedy matching, F-measure);
- ``encoding``: encoders, token clouds, sentences, the cache, IDF;
- ``centering``: the centering maths, the statistics file, its fitting;
- ``call``: a metric call's opening, its pairs, streaming, baselines and the hashcode.

Code outside ``_core`` imports ``_core`` or a layer (``moverkit._core.encoding``), never a module
file of it (tests/test_architecture.py holds this); this front door re-exports the names most code
needs.

Every metric module imports it from the installed ``moverkit`` package, so one process keeps one
encoder per (model, layer, device) across all five metrics.
"""

from moverkit._core.base import (
    CallTexts,
    best_per_group,
    call_texts,
    check_inputs,
    check_texts,
    checks,
    flatten_pairs,
    reference_index,
    resolve_device,
)
from moverkit._core.call import PaddedClouds, PairData, PairOptions, get_hash, pair_hash, prepare_pairs
from moverkit._core.centering import (
    CENTERING_MODES,
    SENTENCE_CENTERING_MODES,
    CenteringStats,
    center,
    center_rows,
    check_centering,
    fit_centering,
    row_mean,
)
from moverkit._core.encoding import (
    DEFAULT_MODEL,
    MODEL_LAYERS,
    SENTENCE_LAYER,
    Encoder,
    IdfTable,
    SentenceEncoder,
    TokenClouds,
    check_idf,
    embedded_model_path,
    encode,
    encode_sentences,
    encode_texts,
    get_encoder,
    get_sentence_encoder,
    release,
    split_sentences,
    token_weights,
    tokenize,
)
from moverkit._core.maths import cosine_matrix, f_measure, greedy_match, self_cosine_one

__all__ = [
    "CENTERING_MODES",
    "CallTexts",
    "CenteringStats",
    "DEFAULT_MODEL",
    "Encoder",
    "IdfTable",
    "MODEL_LAYERS",
    "PaddedClouds",
    "PairData",
    "PairOptions",
    "SENTENCE_CENTERING_MODES",
    "SENTENCE_LAYER",
    "SentenceEncoder",
    "TokenClouds",
    "best_per_group",
    "reference_index",
    "call_texts",
    "center",
    "center_rows",
    "check_centering",
    "check_idf",
    "checks",
    "check_inputs",
    "check_texts",
    "cosine_matrix",
    "embedded_model_path",
    "encode",
    "encode_sentences",
    "encode_texts",
    "f_measure",
    "fit_centering",
    "flatten_pairs",
    "get_encoder",
    "get_hash",
    "pair_hash",
    "get_sentence_encoder",
    "greedy_match",
    "prepare_pairs",
    "release",
    "resolve_device",
    "row_mean",
    "self_cosine_one",
    "split_sentences",
    "token_weights",
    "tokenize",
]
