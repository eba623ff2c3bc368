"""What a loaded model is, read from the model itself (issue 51): the list of blocks it runs and
where to cut it for a layer (:func:`cut_after`), the positions it has (:func:`position_limit`,
:func:`model_max_length`); whether it takes a ready square attention mask is probed where the mask
is given (:func:`~moverkit._core.encoding.encoder.takes_square_mask`). Nothing here is read from a list of model types: users bring
their own encoders, and a fact read from a list holds only for the models on it.
"""

from __future__ import annotations

import torch

# Tokenizers without a real limit report a huge sentinel as model_max_length (transformers' 1e30).
_MAX_LENGTH_SENTINEL = 100_000


def cut_after(model: torch.nn.Module, n_layers: int, layer: int) -> bool:
    """Cut ``model`` (``n_layers`` blocks) after block ``layer``, so that its output is that
    block's; whether the vectors are to be read from ``hidden_states[layer]`` instead (the model
    then runs whole). Three ways, each read from the model itself:

    - its list of blocks (:func:`_layer_list`) cut to the first ``layer``; for ``layer=0`` a model
      that cannot run without a block (DeBERTa-v2) keeps one and reads ``hidden_states[0]``;
    - no such list, but a model that loops over ``config.num_hidden_layers`` applications of
      shared layers and records more hidden states than blocks (ALBERT with a group of several
      layers: one state per inner layer): the count set to ``layer``, as bert-score cuts ALBERT;
    - else ``hidden_states[layer]``, one state per block."""
    blocks = _layer_list(model, n_layers)
    if blocks is not None:
        parent, attr = blocks
        full = list(getattr(parent, attr))
        setattr(parent, attr, torch.nn.ModuleList(full[:layer]))
        if layer == 0 and _probe(model) is None:
            setattr(parent, attr, torch.nn.ModuleList(full[:1]))
            return True
        return False
    out = _probe(model, output_hidden_states=True)
    states = getattr(out, "hidden_states", None) if out is not None else None
    if (
        states is not None
        and len(states) != n_layers + 1
        and getattr(model.config, "num_hidden_layers", None) == n_layers
    ):
        model.config.num_hidden_layers = layer
        return False
    return True


def _probe(model: torch.nn.Module, **kwargs):
    """``model``'s output on one row of four tokens, or ``None`` if it cannot run."""
    try:
        with torch.no_grad():
            return model(
                input_ids=torch.tensor([[1, 2, 3, 4]]), attention_mask=torch.ones(1, 4, dtype=torch.long), **kwargs
            )
    except Exception:  # a model the probe cannot run
        return None


def _layer_list(model: torch.nn.Module, n_layers: int) -> tuple[torch.nn.Module, str] | None:
    """The ``ModuleList`` of transformer blocks the model runs, each once, in order: the list of
    ``n_layers`` modules that a probe forward pass (four tokens, hooks on every candidate list)
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
        ran = _probe(model) is not None
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
