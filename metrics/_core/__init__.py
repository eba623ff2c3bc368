"""The shared core of moverkit: encoders, token clouds, IDF, centering, pairs and hashcodes.

Every metric module imports it from the installed ``moverkit`` package, so one process keeps one
encoder per (model, layer, device) across all five metrics.
"""

from .centering import CENTERING_MODES, CenteringStats, center, fit_centering, token_mean
from .encoder import (
    DEFAULT_MODEL,
    MODEL_LAYERS,
    Encoder,
    TokenClouds,
    embedded_model_path,
    encode,
    get_encoder,
    release,
    resolve_device,
    tokenize,
)
from .hashing import get_hash
from .idf import IdfTable, check_idf, token_weights
from .inputs import CallTexts, best_per_group, call_texts, check_inputs, check_texts, flatten_pairs
from .module import TextPairMetric, text_pair_features
from .pairs import PaddedClouds, PairData, prepare_pairs

__all__ = [
    "CENTERING_MODES",
    "CallTexts",
    "DEFAULT_MODEL",
    "MODEL_LAYERS",
    "CenteringStats",
    "Encoder",
    "IdfTable",
    "PaddedClouds",
    "PairData",
    "TextPairMetric",
    "TokenClouds",
    "best_per_group",
    "call_texts",
    "center",
    "check_idf",
    "check_inputs",
    "check_texts",
    "embedded_model_path",
    "encode",
    "fit_centering",
    "flatten_pairs",
    "get_encoder",
    "get_hash",
    "prepare_pairs",
    "release",
    "resolve_device",
    "text_pair_features",
    "token_mean",
    "token_weights",
    "tokenize",
]
