"""The encoding layer: text to token or sentence vectors; imports only ``base``.

What to encode (``EncoderRequest``: the model and its name, the layer, languages), the encoders
(loaded once per model, layer and device, kept in a registry that ``release`` empties) and their
forward pass, sentence splitting and the sentence encoder, the cache of token clouds and sentence
vectors across calls, and IDF weights.
"""

from moverkit._core.encoding.cache import DEFAULT_MAX_BYTES, cache_enabled, clear_cache, set_cache
from moverkit._core.encoding.clouds import TokenClouds
from moverkit._core.encoding.encoder import Encoder, NonFiniteOutputs, encode, encode_texts
from moverkit._core.encoding.idf import (
    IdfTable,
    check_idf,
    count_zero_weight_texts,
    idf_tag,
    token_weights,
    warn_zero_weights,
    zero_weight_texts,
)
from moverkit._core.encoding.memory import release
from moverkit._core.encoding.models import ArgumentsChecked, arguments_only, encoder_for, get_encoder, load_encoder
from moverkit._core.encoding.request import (
    DEFAULT_MODEL,
    MODEL_LAYERS,
    EncoderRequest,
    check_lang,
    default_layer,
    embedded_model_path,
    primary_language,
    resolve_layer,
    resolve_model,
)
from moverkit._core.encoding.sentences import (
    SENTENCE_LAYER,
    SentenceEncoder,
    encode_sentences,
    get_sentence_encoder,
    sentence_encoder_for,
    sentence_truncations,
)
from moverkit._core.encoding.splitting import split_sentences, splitter_languages, splitter_tag
from moverkit._core.encoding.tokens import CallTokenizer, TokenizedTexts, tokenize

__all__ = [
    "ArgumentsChecked",
    "arguments_only",
    "CallTokenizer",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MODEL",
    "Encoder",
    "EncoderRequest",
    "IdfTable",
    "MODEL_LAYERS",
    "NonFiniteOutputs",
    "SENTENCE_LAYER",
    "SentenceEncoder",
    "TokenClouds",
    "TokenizedTexts",
    "cache_enabled",
    "check_idf",
    "check_lang",
    "clear_cache",
    "count_zero_weight_texts",
    "default_layer",
    "embedded_model_path",
    "encode",
    "encode_texts",
    "encode_sentences",
    "encoder_for",
    "get_encoder",
    "get_sentence_encoder",
    "idf_tag",
    "load_encoder",
    "primary_language",
    "release",
    "resolve_layer",
    "resolve_model",
    "sentence_encoder_for",
    "sentence_truncations",
    "set_cache",
    "split_sentences",
    "splitter_languages",
    "splitter_tag",
    "token_weights",
    "tokenize",
    "warn_zero_weights",
    "zero_weight_texts",
]
