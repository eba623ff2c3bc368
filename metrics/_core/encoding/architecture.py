"""What a loaded model is, read from the model itself (issue 51): the list of blocks it runs and
where to cut it for a layer (:func:`cut_after`), the positions it has (:func:`position_limit`,
:func:`model_max_length`), the config settings it is built with (:func:`load_settings`), and the
one batch every load-time probe runs (:func:`probe_rows`) under a check that it leaves the model
as it was (:func:`unchanged`), and whether it takes a ready square attention mask
(:func:`takes_square_mask`); whether padding moves its vectors is probed where the vectors are
read (:func:`~moverkit._core.encoding.models.check_padding`). Nothing here is read from a list of
model types: users bring their own encoders, and a fact read from a list holds only for the
models on it.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import NamedTuple

import torch

# Tokenizers without a real limit report a huge sentinel as model_max_length (transformers' 1e30).
_MAX_LENGTH_SENTINEL = 100_000


def encoder_part(config, model: torch.nn.Module) -> torch.nn.Module:
    """The part of ``model`` that encodes a text: the encoder of an encoder-decoder (T5, or a T5
    saved as its encoder alone, which AutoModel builds whole), else the model. A ``decoder`` that
    is part of the encoder's own pass (Funnel's upsampling: its encoder takes embeddings, not
    ``input_ids``) keeps the model whole."""
    if not (
        getattr(config, "is_encoder_decoder", False) or isinstance(getattr(model, "decoder", None), torch.nn.Module)
    ):
        return model
    encoder = model.get_encoder()
    return encoder if "input_ids" in inspect.signature(encoder.forward).parameters else model


PROBE_TOKENS = 64
"""Tokens of the rows of every load-time probe (:func:`probe_rows`; at most the model's limit):
longer than the short windows of attention a config may not declare. An architecture that runs a
row shorter than some length otherwise, and switches itself when it does (BigBird's block-sparse
attention), is built so that it has no such length (:func:`load_settings`); a probe that changes
a model anyway refuses it (:func:`unchanged`)."""


def probe_rows(limit: int, device: torch.device, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows every load-time probe runs, ``(ids, mask)``: two rows of ``min(limit, 64)``
    tokens (ids 1 to 4 in turn), the second padded from its middle on (``pad_id`` under a mask of
    0, as a call pads), and their (2, length) 0/1 mask. One batch for every question a load asks
    of a model (where to cut it, whether padding moves its vectors, which mask it takes)."""
    length = max(min(limit, PROBE_TOKENS), 2)
    ids = torch.arange(2 * length, device=device).reshape(2, length) % 4 + 1
    mask = torch.ones(2, length, dtype=torch.long, device=device)
    mask[1, length // 2 :] = 0
    ids[1, length // 2 :] = pad_id
    return ids, mask


def load_settings(config) -> dict:
    """What a model's config is changed to before the model is built (``from_pretrained``'s
    config overrides): BigBird's block-sparse attention (``attention_type="block_sparse"``) runs
    as full attention (``"original_full"``). Block-sparse attention is not a function of a text
    alone: its global blocks are the first and last blocks of the padded row, and transformers
    switches a model to full attention, for good and with a warning, the first time a row is
    shorter than ``(5 + 2 * num_random_blocks) * block_size`` tokens (704 for
    bigbird-roberta-base), so a text's vectors would depend on its batch and on the calls before
    (issue 60: 2.0e-4 on the scores after a load). Full attention with the same weights is what
    the sparse pattern approximates and what the model itself runs on every shorter row."""
    if getattr(config, "attention_type", None) == "block_sparse":
        return {"attention_type": "original_full"}
    return {}


def config_settings(path: str, local_only: bool) -> dict:
    """:func:`load_settings` of the config at ``path``, for a library that builds the model itself
    from overrides (sentence-transformers' ``config_kwargs``); none where no config is there to read."""
    from transformers import AutoConfig

    try:
        return load_settings(AutoConfig.from_pretrained(path, local_files_only=local_only))
    except (OSError, ValueError):
        return {}


class ModelChangesItself(ValueError):
    """A forward pass changed a setting of the model (:func:`unchanged`)."""


def _settings(model: torch.nn.Module) -> dict:
    """The settings a forward pass could switch: the config's entries, and each module's
    string-valued attributes (BigBird switches its ``attention_type`` on its modules, not in its
    config); each as its ``repr``."""
    to_dict = getattr(getattr(model, "config", None), "to_dict", None)
    state = {("config", key): repr(value) for key, value in (to_dict() if to_dict is not None else {}).items()}
    for name, module in model.named_modules():
        state.update({(name, key): repr(value) for key, value in vars(module).items() if isinstance(value, str)})
    return state


@contextlib.contextmanager
def unchanged(model: torch.nn.Module):
    """Run the block (a probe) and refuse, with a :class:`ModelChangesItself`, a model whose
    settings (:func:`_settings`) it changed: a probe asks what the model is, and must leave it as
    the user's folder made it; a model that changes itself when it runs gives a text vectors that
    depend on the rows run before it."""
    before = _settings(model)
    yield
    after = _settings(model)
    changed = sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
    if changed:
        where, key = changed[0]
        raise ModelChangesItself(
            f"{type(model).__name__} changes its own setting {where + '.' if where else ''}{key} when it runs "
            f"({before.get(changed[0])} -> {after.get(changed[0])}): a text's vectors would depend on the texts run "
            "before it, so moverkit cannot score with it"
        )


class Cut(NamedTuple):
    """What :func:`cut_after` did: whether the vectors are now read from ``hidden_states[layer]``
    (rather than the model's output), and how many ``blocks`` the model runs (the blocks a
    fine-tuned folder saves)."""

    hidden_states_only: bool
    blocks: int


def cut_after(model: torch.nn.Module, n_layers: int, layer: int, limit: int = PROBE_TOKENS) -> Cut:
    """Cut ``model`` (``n_layers`` blocks) so that it computes no more than layer ``layer`` needs
    (the top layer: nothing to cut), as a :class:`Cut`. Layer ``k`` is block ``k``'s output as
    transformers records it (``hidden_states[k]``), and the top layer the model's own output (``last_hidden_state``,
    after a final norm where the model has one). Three ways, each read from the model itself
    (probes of :func:`probe_rows`' first row, ``limit`` the model's token limit):

    - its list of blocks (:func:`_layer_list`) cut to the first ``layer``, where the model so cut
      outputs ``hidden_states[layer]`` of the whole model; where it does not (a final norm after
      the last block: GPT-2, Llama, T5, ModernBERT; a projection after it to another width: OPT
      as opt-350m; two streams concatenated: Reformer; or no run without a block, DeBERTa-v2 at
      ``layer=0``), cut to the first ``layer + 1`` and read ``hidden_states[layer]``, the input of
      the block kept after it: one block more than needed, where the cut would apply the final
      norm to block ``k`` (issue 60: 0.15 on scores of a Llama at ``k=2``); where that cut does
      not run or records another ``hidden_states[layer]`` (XLM and FlauBERT run their blocks from
      four parallel lists over ``range(n_layers)``: a shorter list fails on its missing index),
      the model whole, read at ``hidden_states[layer]``;
    - no such list, but a model that loops over ``config.num_hidden_layers`` applications of
      shared layers and records more hidden states than blocks (ALBERT with a group of several
      layers: one state per inner layer): the count set to ``layer``, as bert-score cuts ALBERT;
    - else ``hidden_states[layer]``, one state per block."""
    if layer == n_layers:
        return Cut(False, n_layers)
    blocks = _layer_list(model, n_layers, limit)
    if blocks is not None:
        parent, attr = blocks
        full = list(getattr(parent, attr))
        whole = _probe(model, limit, output_hidden_states=True)
        setattr(parent, attr, torch.nn.ModuleList(full[:layer]))
        cut = _probe(model, limit)
        states = getattr(whole, "hidden_states", None)
        if cut is not None and (states is None or len(states) != n_layers + 1):
            return Cut(False, layer)  # no state per block to read: the cut, as it is
        if cut is not None and _same(cut[0], states[layer]):
            return Cut(False, layer)
        setattr(parent, attr, torch.nn.ModuleList(full[: layer + 1]))
        if _same(_state(_probe(model, limit, output_hidden_states=True), layer), _state(whole, layer)):
            return Cut(True, layer + 1)
        setattr(parent, attr, torch.nn.ModuleList(full))
        return Cut(True, n_layers)
    out = _probe(model, limit, output_hidden_states=True)
    states = getattr(out, "hidden_states", None) if out is not None else None
    if (
        states is not None
        and len(states) != n_layers + 1
        and getattr(model.config, "num_hidden_layers", None) == n_layers
    ):
        with contextlib.suppress(NotImplementedError):  # a count derived from others (Funnel's block_sizes)
            model.config.num_hidden_layers = layer
            return Cut(False, layer)
    return Cut(True, n_layers)


def _same(vectors: torch.Tensor | None, expected: torch.Tensor | None) -> bool:
    """Whether a probe's ``vectors`` are the ``expected`` ones, float32 rounding apart: of their
    shape (a cut can end at another width: OPT's projection out, Reformer's two streams) and
    close; ``None`` (a cut that does not run, a state not recorded) is no one's."""
    if vectors is None or expected is None or vectors.shape != expected.shape:
        return False
    return torch.allclose(vectors, expected, rtol=1e-5, atol=1e-6)


def _state(out, layer: int) -> torch.Tensor | None:
    """``hidden_states[layer]`` of a probe's output ``out``, or ``None`` where it has none."""
    states = getattr(out, "hidden_states", None)
    return states[layer] if states is not None and len(states) > layer else None


def _probe(model: torch.nn.Module, limit: int, **kwargs):
    """``model``'s output on the first row of :func:`probe_rows` (no padding), or ``None`` if it
    cannot run; a :class:`ModelChangesItself` if the run changed the model (:func:`unchanged`)."""
    ids, mask = probe_rows(limit, torch.device("cpu"))
    with unchanged(model):
        try:
            with torch.no_grad():
                return model(input_ids=ids[:1], attention_mask=mask[:1], **kwargs)
        except Exception:  # a model the probe cannot run
            return None


def _layer_list(model: torch.nn.Module, n_layers: int, limit: int) -> tuple[torch.nn.Module, str] | None:
    """The ``ModuleList`` of transformer blocks the model runs, each once, in order: the list of
    ``n_layers`` modules that a probe forward pass (:func:`_probe`, hooks on every candidate list)
    sees called once each, first to last; ``None`` where no list runs so (the caller then reads the
    layer outputs from ``hidden_states``, which is right for every model, only slower).

    Its length alone does not tell it: ALBERT applies one shared group of layers once per layer,
    and a group of ``inner_group_num == num_hidden_layers`` layers is a list of the right length
    whose modules run ``n_layers`` times each (issue 51: cutting it gave layer 1 a vector 1.2e-3
    to 9e-2 from the model's own ``hidden_states[1]``)."""
    candidates = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) == n_layers and n_layers > 0
    ]
    if not candidates:
        return None
    calls: list[tuple[int, int]] = []  # (candidate, block) in the order the blocks ran
    hooks = [
        block.register_forward_hook(lambda *_, at=(c, b): calls.append(at))
        for c, (_, blocks) in enumerate(candidates)
        for b, block in enumerate(blocks)
    ]
    try:
        ran = _probe(model, limit) is not None
    finally:
        for hook in hooks:
            hook.remove()
    if not ran:  # a model the probe cannot run: read hidden_states, which needs no cut
        return None
    for c, (name, _) in enumerate(candidates):
        if [b for at, b in calls if at == c] == list(range(n_layers)):
            parent_name, _, attr = name.rpartition(".")
            return model.get_submodule(parent_name) if parent_name else model, attr
    return None


def square_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """The boolean (batch, 1, length, length) attention mask of a (batch, length) 0/1 mask: query
    ``q`` of row ``b`` attends to key ``k`` where ``attention_mask[b, k]`` (a view, not a copy)."""
    keep = attention_mask.bool()
    return keep[:, None, None, :].expand(-1, 1, keep.shape[1], -1)


LOCAL_ATTENTION_KEYS = ("sliding_window", "local_attention", "attention_window", "use_sliding_window")
"""Config attributes that give some layers a local window of attention (Mistral-style
``sliding_window``, ModernBERT's ``local_attention``, Longformer's ``attention_window``)."""


def has_local_attention(config) -> bool:
    """Whether ``config`` describes layers that attend within a local window
    (:data:`LOCAL_ATTENTION_KEYS` set, or a ``layer_types`` entry naming a sliding or local layer).
    transformers builds such a layer's mask from the (batch, length) mask, and passes a ready 4-D
    mask through as it is: given :func:`square_mask`'s mask, a local layer would attend globally
    whenever its batch holds padding (issue 51: ModernBERT's vectors moved 6.9e-3 with the batch)."""
    if any(getattr(config, key, None) not in (None, False, 0) for key in LOCAL_ATTENTION_KEYS):
        return True
    layer_types = getattr(config, "layer_types", None) or ()
    return any("sliding" in str(kind) or "local" in str(kind) for kind in layer_types)


def takes_square_mask(model: torch.nn.Module, device: torch.device, limit: int = PROBE_TOKENS) -> bool:
    """Whether ``model`` gives, from :func:`square_mask`'s mask, the very vectors it gives from the
    (batch, length) mask, bit for bit: probed once, when the model is loaded, on the rows of
    :func:`probe_rows`. transformers >= 5 builds the first
    from the second itself in its SDPA attention and takes a 4-D mask as already built; older
    versions, and other attention implementations (eager adds the mask to the scores), refuse it
    or read it otherwise, and keep the (batch, length) mask. A model whose config shows local
    attention (:func:`has_local_attention`) keeps it without a probe: its windows are built only
    from the (batch, length) mask."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or has_local_attention(config):
        return False
    ids, mask = probe_rows(limit, device)
    with unchanged(model):
        try:
            with torch.no_grad():
                flat = model(input_ids=ids, attention_mask=mask)[0]
                square = model(input_ids=ids, attention_mask=square_mask(mask))[0]
        except Exception:  # any refusal of the 4-D mask means: keep the (batch, length) one
            return False
    return flat.shape == square.shape and bool(torch.equal(flat[mask.bool()], square[mask.bool()]))


def model_max_length(tokenizer, model: torch.nn.Module, config) -> int:
    """The real input limit: the tokenizer's ``model_max_length``, capped by the positions the
    model has (:func:`position_limit`; fixes the 1e30 sentinel that some tokenizers report and
    that overflows under recent transformers), 512 where neither says."""
    limit = getattr(tokenizer, "model_max_length", None) or _MAX_LENGTH_SENTINEL
    positions = position_limit(model, config)
    if positions is not None:
        limit = min(limit, positions)
    return int(min(limit, 512 if limit >= _MAX_LENGTH_SENTINEL else limit))


def position_limit(model: torch.nn.Module, config) -> int | None:
    """The positions ``model`` has, read from its own table where it has one: an embedding named
    ``position_embeddings`` (or GPT-2's ``wpe``) of ``num_embeddings`` rows, less the rows before
    the first position, which a table with a ``padding_idx`` reserves (RoBERTa, XLM-R, MPNet:
    positions start at ``padding_idx + 1``). A model without a table (relative or rotary
    positions) has its config's ``max_position_embeddings``, if any; else ``None``."""
    table = _position_table(model)
    if table is not None:
        return table.num_embeddings - (table.padding_idx + 1 if table.padding_idx is not None else 0)
    positions = getattr(config, "max_position_embeddings", None)
    return positions if isinstance(positions, int) and positions > 0 else None


def _position_table(model: torch.nn.Module) -> torch.nn.Embedding | None:
    """The model's table of absolute position embeddings, or ``None`` (relative, rotary)."""
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.rpartition(".")[2] in {"position_embeddings", "wpe"}:
            return module
    return None
