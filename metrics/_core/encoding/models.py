"""The models of the process: each loaded once, probed at load, and kept in one registry.

Loading a transformer takes seconds and hundreds of MB, so each metric asks the registry for its
model by a key (path, layer, device, ...) and gets the one already loaded (:func:`cached_model`:
token encoders through :func:`get_encoder`, sentence encoders through
:func:`~moverkit._core.encoding.sentences.get_sentence_encoder`). It is bounded (least recently
used out), so that a loop over many models or layers does not keep them all, and
:func:`forget_models` drops them all (``moverkit.release()``, :mod:`~moverkit._core.encoding.memory`).

:func:`load_encoder` loads a token encoder: float32 weights, the transformer cut after its layer,
and the probes that refuse at load what moverkit cannot score (:func:`check_padding`) and measure
the width of each layer (:func:`layer_widths`). Running it is :mod:`~moverkit._core.encoding.encoder`'s.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from functools import lru_cache
from typing import TypeVar

import torch

from moverkit._core.base.hardware import resolve_device
from moverkit._core.base.key_locks import KeyLocks
from moverkit._core.base.random_state import kept_random_state
from moverkit._core.encoding.architecture import (
    ModelChangesItself,
    cut_after,
    encoder_part,
    load_settings,
    model_max_length,
    probe_rows,
    takes_square_mask,
    unchanged,
)
from moverkit._core.encoding.encoder import Encoder, all_finite, forward_region
from moverkit._core.encoding.memory import emptied_by_release
from moverkit._core.encoding.request import (
    EncoderRequest,
    layer_origin,
    local_files_only,
    resolve_layer,
    resolve_model,
)

Model = TypeVar("Model")

MAX_MODELS = 4
"""Models kept at most; the least recently used goes first."""

_MODELS: OrderedDict[Hashable, object] = OrderedDict()
_LOCK = threading.Lock()  # held only to read or change _MODELS, never during a load
_LOADING = KeyLocks()  # the keys loading now, or waited for (none once no thread needs them)


class ArgumentsChecked(Exception):
    """Raised where a call made under :func:`arguments_only` would get its model: every argument
    it was given has been checked by then."""


_ARGUMENTS_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("moverkit_arguments_only", default=False)


@contextlib.contextmanager
def arguments_only() -> Iterator[None]:
    """Run the block (a metric call) up to the point where it would get its model, which raises
    :class:`ArgumentsChecked` instead: a door that starts something expensive (a server's
    replicas, a task's generation) checks a call's arguments by the function's own checks, in
    milliseconds and with no weights loaded. The block's context alone: another thread's calls
    meanwhile get their models."""
    token = _ARGUMENTS_ONLY.set(True)
    try:
        yield
    finally:
        _ARGUMENTS_ONLY.reset(token)


def cached_model(key: Hashable, load: Callable[[], Model]) -> Model:
    """The model under ``key``, loaded by ``load()`` the first time (and again after it was evicted
    or released), under :func:`~moverkit._core.base.random_state.kept_random_state`: a load leaves
    the process's random generators as it found them. A load holds the lock of its key alone: a
    thread that needs the same model waits for it (and gets it, not a second copy), and a thread
    that needs another model, loaded or not, does not wait for seconds of someone else's load. The
    lock is dropped when the last thread that held or waited for it is done
    (:class:`~moverkit._core.base.key_locks.KeyLocks`: a loop over many models keeps no lock per
    model)."""
    if _ARGUMENTS_ONLY.get():
        raise ArgumentsChecked
    with _LOCK:
        model = _lookup(key)
    if model is not None:
        return model
    with _LOADING.hold(key):
        with _LOCK:
            model = _lookup(key)  # loaded by the thread this one waited for
        if model is not None:
            return model
        with kept_random_state():
            model = load()
        with _LOCK:
            _MODELS[key] = model
            while len(_MODELS) > MAX_MODELS:
                _MODELS.popitem(last=False)
        return model


def _lookup(key: Hashable):
    """The model under ``key``, now the most recently used, or None; under ``_LOCK``."""
    if key not in _MODELS:
        return None
    _MODELS.move_to_end(key)
    return _MODELS[key]


def loaded_models() -> list[Hashable]:
    """The keys of the models in memory, least recently used first."""
    with _LOCK:
        return list(_MODELS)


@emptied_by_release
def forget_models() -> None:
    """Drop every loaded model (``moverkit.release()`` calls it)."""
    with _LOCK:
        _MODELS.clear()


# Byte-level BPE tokenizers need a leading space to tokenize the first word like the others
# (BERTScore passes ``add_prefix_space=True`` for them too).
_PREFIX_SPACE_MODEL_TYPES = {"roberta", "gpt2", "bart", "longformer"}


def get_encoder(
    model_type: str | os.PathLike | None = None,
    num_layers: int | None = None,
    device: str | int | torch.device | None = None,
) -> Encoder:
    """The encoder for ``model_type`` cut after layer ``num_layers``, loaded once per (model,
    layer, device) through the model registry (``moverkit.release()`` frees it).

    ``num_layers`` counts transformer blocks as BERTScore does: ``k`` is the output of the k-th
    block (transformers' ``hidden_states[k]``; the last layer is the model's own output, after a
    final norm where it has one: :func:`~moverkit._core.encoding.architecture.cut_after`), ``0``
    the embedding layer, negative values count from the top (``-1`` is the last layer). ``None``
    takes :data:`~moverkit._core.encoding.request.MODEL_LAYERS`, else the last layer.
    """
    return _shared_encoder(model_type, num_layers, resolve_device(device))


def _shared_encoder(model_type, num_layers: int | None, device: torch.device) -> Encoder:
    name, path = resolve_model(model_type)
    layer = _registry_layer(name, path, num_layers)
    return cached_model(("token", path, layer, str(device)), lambda: load_encoder(model_type, num_layers, device))


def _registry_layer(name: str, path: str, num_layers: int | None) -> int | None:
    """The layer the registry keys an encoder by: the block output ``num_layers`` names
    (:func:`resolve_layer` over the config's block count), so that ``None``, ``-1`` and ``6`` of
    the embedded 6-layer model are one encoder: one copy of the weights, and one set of clouds in
    the cache across calls (moverscore asks for the last layer, centered_bertscore for the model's
    default: the same layer 6). ``num_layers`` as given where it cannot be resolved before
    loading: ``None`` for a local folder (its default layer depends on whose weights it holds,
    :func:`layer_origin`), or a config that does not load (loading the model then says why)."""
    if num_layers is None and "@" in name:
        return None
    n_layers = _config_blocks(name, path)
    return num_layers if n_layers is None else resolve_layer(name, num_layers, n_layers)


@lru_cache(maxsize=64)
def _config_blocks(name: str, path: str) -> int | None:
    """:func:`config_blocks` of the config at ``path`` (read once per model ``name``, which for a
    local folder holds its weights' digest: a folder written over with another model is read
    again); None if it does not load."""
    from transformers import AutoConfig

    try:
        return config_blocks(AutoConfig.from_pretrained(path, local_files_only=local_files_only(path)))
    except (OSError, ValueError):
        return None


def config_blocks(config) -> int:
    """The number of transformer blocks a model's config gives (``num_hidden_layers``, T5's ``num_layers``)."""
    return int(getattr(config, "num_hidden_layers", 0) or getattr(config, "num_layers", 0))


def encoder_for(request: EncoderRequest) -> Encoder:
    """The process-wide encoder of ``request`` (:func:`get_encoder`) on the device the request
    resolved and checked when it was made."""
    return _shared_encoder(request.model_type, request.num_layers, request.device)


@kept_random_state()
def load_encoder(
    model_type: str | os.PathLike | None = None,
    num_layers: int | None = None,
    device: str | int | torch.device | None = None,
    trainable: bool = False,
) -> Encoder:
    """A fresh encoder, not the registry's shared one (:func:`get_encoder` caches what this
    loads). ``trainable=True`` keeps autograd in its forward pass (fine-tuning).

    The weights are float32 whatever precision the folder holds: a call's ``dtype`` is the
    precision of its forward pass (autocast, :func:`forward_region`), so a folder saved in float16
    would otherwise run in float16 on a CPU under a hashcode that says float32 (issue 60). A model
    whose vectors move when a text is padded is refused (:func:`check_padding`). The process's
    random generators are left as the load found them (:func:`kept_random_state`: transformers
    draws the weights a folder lacks), also where it is called directly (moverkit.finetune)."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    name, path = resolve_model(model_type)
    device = resolve_device(device)

    local_only = local_files_only(path)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=local_only)
        for key, value in load_settings(config).items():
            setattr(config, key, value)
        prefix_space = config.model_type in _PREFIX_SPACE_MODEL_TYPES
        tokenizer_kwargs = {"add_prefix_space": True} if prefix_space else {}
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only, **tokenizer_kwargs)
        model = AutoModel.from_pretrained(path, config=config, local_files_only=local_only, dtype=torch.float32)
    except (OSError, ValueError) as err:
        where = (
            "a local folder" if os.path.isdir(path) else "a Hugging Face id (offline: it must be in the local cache)"
        )
        raise ValueError(f"model_type={path!r} ({where}) could not be loaded: {err}") from err
    model = encoder_part(config, model).eval()
    n_layers = config_blocks(config)
    origin = layer_origin(name, path, model, config)
    layer = resolve_layer(name, num_layers, n_layers, origin)
    max_length = model_max_length(tokenizer, model, config)
    cut = cut_after(model, n_layers, layer, max_length)
    model.eval().to(device)
    encoder = Encoder(
        name=name,
        path=path,
        layer=layer,
        n_layers=n_layers,
        device=device,
        tokenizer=tokenizer,
        model=model,
        max_length=max_length,
        hidden_states_only=cut.hidden_states_only,
        blocks=cut.blocks,
        trainable=trainable,
    )
    pad_id = tokenizer.pad_token_id or 0
    with forward_region("float32", device):
        check_padding(
            f"model_type={path!r} ({name}, layer {layer})", model, encoder.forward, max_length, device, pad_id
        )
    encoder.widths = layer_widths(encoder)
    encoder.square_mask = takes_square_mask(model, device, max_length)
    return encoder


PADDING_TOLERANCE = 1e-3
"""The largest change padding may make to a vector, relative to its length (:func:`check_padding`):
float32 rounding moves a model's vectors by about 1e-6 of it between batch shapes; a model that
reads padded positions, by 1e-2 and more."""


def check_padding(
    described: str,
    model: torch.nn.Module,
    run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    limit: int,
    device: torch.device,
    pad_id: int = 0,
) -> None:
    """Refuse a model whose vectors of a text depend on the padding of its batch, with a
    ``ValueError`` naming it (``described``) and why: probed once, at load, by ``run(ids, mask)``
    (the vectors the metrics read: (batch, length, dim) of tokens, or (batch, dim) of sentences)
    on the padded row of :func:`~moverkit._core.encoding.architecture.probe_rows` and on the same
    text alone. Funnel pools the sequence (its mean averages padded positions in) and CANINE
    downsamples characters by a strided convolution: their scores would move with ``batch_size``
    and with the other texts of a call (issue 60: F1 0.779 at batch_size=1, 0.907 at 64), and
    no warning would say so. A model that cannot run the probe, gives a row of tokens another
    number of vectors, or changes its own settings as it runs (``model``: the transformer,
    :func:`~moverkit._core.encoding.architecture.unchanged`), is refused here too, with its
    reason, rather than in the first call; one whose vectors are not finite is left to the
    calls, which refuse it by name (:class:`~moverkit._core.encoding.encoder.NonFiniteOutputs`)."""
    ids, mask = probe_rows(limit, device, pad_id)
    n = int(mask[1].sum())
    try:
        with unchanged(model):
            padded = run(ids, mask)[1]
            alone = run(ids[1:, :n], mask[1:, :n])[0]
    except ModelChangesItself as err:
        raise ValueError(f"{described}: {err}") from err
    except Exception as err:  # any failure on two plain rows is the model's: say so at load
        raise ValueError(f"{described} could not encode a probe batch of two rows of tokens: {err}") from err
    if padded.dim() == 2:  # token vectors: one per token, the text's first n
        if padded.shape[0] != ids.shape[1] or alone.shape[0] != n:
            raise ValueError(
                f"{described} gives {alone.shape[0]} vectors to a row of {n} tokens: moverkit needs one vector "
                "per token"
            )
        padded = padded[:n]
    if not bool(all_finite(padded) & all_finite(alone)):
        return  # NaN weights, say: every call refuses such vectors by name (NonFiniteOutputs)
    gap = float(((padded - alone).norm(dim=-1) / alone.norm(dim=-1).clamp_min(1e-12)).max())
    if not gap <= PADDING_TOLERANCE:
        raise ValueError(
            f"{described} gives a text other vectors when it is padded in a batch (by {gap:.2g} of their length): "
            "the model reads padded positions (as Funnel's pooling and CANINE's downsampling do), so its scores "
            "would depend on the batch size and on the other texts of a call; moverkit refuses it"
        )


def layer_widths(encoder: Encoder) -> tuple[int, ...]:
    """The width of the vectors of each layer of ``encoder``, 0 to ``encoder.layer``, read from
    one forward pass on :func:`~moverkit._core.encoding.architecture.probe_rows`' first row: the
    model's vectors, never its config's ``hidden_size``, which is the width of none of opt-350m's
    top layer (512, its ``word_embed_proj_dim``) or Reformer's output (two streams, twice it)."""
    ids, mask = probe_rows(encoder.max_length, encoder.device, encoder.tokenizer.pad_token_id or 0)
    with forward_region("float32", encoder.device):
        vectors, states = encoder.outputs(ids[:1], mask[:1], True)
    return tuple(state.shape[-1] for state in states[: encoder.layer]) + (vectors.shape[-1],)
