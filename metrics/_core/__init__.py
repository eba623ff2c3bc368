"""The shared core of moverkit: encoders, token clouds, sentences, IDF, centering, matching, pairs
and hashcodes.

Every metric module imports it from the installed ``moverkit`` package, so one process keeps one
encoder per (model, layer, device) across all five metrics.
"""

from .centering import (
    CENTERING_MODES,
    SENTENCE_CENTERING_MODES,
    center,
    center_rows,
    check_centering,
    row_mean,
)
from .centering_fit import fit_centering
from .encoder import (
    DEFAULT_MODEL,
    MODEL_LAYERS,
    Encoder,
    TokenClouds,
    embedded_model_path,
    encode,
    get_encoder,
    tokenize,
)
from .hardware import resolve_device
from .hashing import get_hash, pair_hash
from .idf import IdfTable, check_idf, token_weights
from .inputs import (
    CallTexts,
    best_per_group,
    call_texts,
    check_inputs,
    check_texts,
    flatten_pairs,
    reference_index,
)
from .matching import cosine_matrix, f_measure, greedy_match
from .memory import release
from .pairs import PaddedClouds, PairData, prepare_pairs
from .sentences import SENTENCE_LAYER, SentenceEncoder, encode_sentences, get_sentence_encoder, split_sentences
from .stats_file import CenteringStats

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
    "check_inputs",
    "check_texts",
    "cosine_matrix",
    "embedded_model_path",
    "encode",
    "encode_sentences",
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
    "split_sentences",
    "token_weights",
    "tokenize",
]
