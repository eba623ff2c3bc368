"""The model card (README.md) of a fine-tuned model folder (:mod:`moverkit.finetune`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from moverkit.finetune.trainer import FinetuneResult


def model_card(recipe: dict, result: FinetuneResult) -> str:
    """The model folder's README.md: what it is, how to use it, how it was trained, its figures."""
    sections = (
        _introduction(recipe, result),
        _how_to_use(recipe, result),
        _training(recipe, result),
        _validation(recipe, result),
        _recipe_and_limitations(recipe),
    )
    return "\n\n".join(sections)


def _layer(recipe: dict) -> tuple[str, str]:
    """Where the metric reads the folder's encoder, said in the card's first sentence, and the
    ``num_layers`` argument its How to use then passes (none where that layer is the last)."""
    layer = recipe["layer"]
    if recipe["layers_in_folder"] == layer:
        return f"cut after layer {layer} (the layer the metric reads; it is this folder's last layer, the default)", ""
    # no block list was found to cut: the folder keeps every layer
    return f"read at layer {layer} of {recipe['layers_in_folder']} (pass num_layers={layer})", f", num_layers={layer}"


def _introduction(recipe: dict, result: FinetuneResult) -> str:
    """The front matter the Hub reads, the title, and the loss trained with (Chen et al., 2020,
    Section 6; Sim is Eq. 1, with its temperature and Sinkhorn steps where the variant has them)."""
    name = Path(result.path).resolve().name
    base, variant = recipe["base_model"], recipe["variant"]
    cut, _ = _layer(recipe)
    t = f", T = {recipe['temperature']}" if "temperature" in recipe else ""
    steps = f", {recipe['sinkhorn_iterations']} Sinkhorn step(s)" if "sinkhorn_iterations" in recipe else ""
    return f"""---
library_name: transformers
base_model: {base}
tags:
- moverkit
- {variant}
- text-generation-evaluation
---

# {name}: {base} fine-tuned for moverkit's {variant}

The encoder of {base}, {cut}, fine-tuned on human judgments with the loss of Chen et al. (2020),
Section 6, "Evaluation metrics with fine-tuning":
`Loss = MSE(Sim(X1, X2), y)`, Sim being {variant}'s normalized similarity (Eq. 1){t}{steps},
with `{recipe["centering"]}` centering (over each training mini-batch of {recipe["batch_size"]} pairs)."""


def _how_to_use(recipe: dict, result: FinetuneResult) -> str:
    """The call that scores with the folder (by its absolute path, so it works from any folder)."""
    _, layer_arg = _layer(recipe)
    return f"""## How to use

Every moverkit metric loads this folder as its model; the hashcode names what it holds
(`local@<digest>` of its weights, config and tokenizer files, whatever the folder is called):

```python
from moverkit import functional
functional.twmd(predictions, references, model_type="{result.path}"{layer_arg}, variant="{recipe["variant"]}", centering="{recipe["centering"]}")
```"""


def _training(recipe: dict, result: FinetuneResult) -> str:
    """The data (the groups left out for want of spread among them), the targets, the loop (the
    epochs trained, and the checkpoint a resumed run started from) and the time per epoch."""
    trained = recipe.get("epochs_trained")
    if "resumed_from" in recipe:
        loop_epochs = (
            f"{trained} epoch(s) trained in all (resumed from {recipe['resumed_from']}, epochs={recipe['epochs']})"
        )
    else:
        loop_epochs = f"up to {recipe['epochs']} epoch(s)" + (
            f", {trained} epoch(s) trained" if trained is not None else ""
        )
    excluded = (
        f"; excluded: {', '.join(recipe['excluded_groups'])} (all their human scores equal)"
        if recipe.get("excluded_groups")
        else ""
    )
    return f"""## Training

- Data: {recipe["data"]}; groups {", ".join(recipe["groups"])}{excluded}; {result.n_train} training pairs,
  {result.n_validation} validation pairs (a random {recipe["validation_split"]:.0%} of the rows, seed {recipe["seed"]}).
- Targets: human scores standardized `{recipe["standardize"]}` (z-scores {"within each group" if recipe["standardize"] == "group" else "over all rows" if recipe["standardize"] == "global" else "not: used as given"}),
  mapped to y = {recipe["target_mean"]} + {recipe["target_std"]} z.
- Loop: transformers' Trainer, AdamW, learning rate {recipe["learning_rate"]} (constant),
  weight decay 0.01, batch size {recipe["batch_size"]}, {loop_epochs}, early
  stopping on validation Pearson r (patience {recipe["early_stopping_patience"]}; the best epoch's weights kept), seed {recipe["seed"]}.
- Time per epoch (training steps) on {recipe["device"]}: {fixed(result.seconds_per_epoch, ".0f")} s wall,
  {fixed(result.cpu_seconds_per_epoch, ".0f")} s of CPU time (all threads of the process)."""


def _validation(recipe: dict, result: FinetuneResult) -> str:
    """The validation figures before and after fine-tuning, what the MSE among them measures,
    and the table of epochs."""
    rows = "\n".join(
        f"| {e['epoch']} | {fixed(e.get('train_loss'), '.4f')} | {fixed(e.get('pearson'), '.1f', 100)} | "
        f"{fixed(e.get('kendall'), '.1f', 100)} | {fixed(e.get('seconds'), '.0f')} | "
        f"{fixed(e.get('cpu_seconds'), '.0f')} |"
        for e in result.history
    )
    return f"""## Validation

Per-group Pearson r and Kendall tau (x100), averaged over the groups, of {recipe["variant"]} against the
standardized human scores of the validation pairs:

- before fine-tuning: {_figures(result.validation_before)}
- after (weights kept): {_figures(result.validation_after)}

The MSE is the training loss on the validation pairs: the mean squared distance of Sim to the
targets (the human scores standardized, then set to mean {recipe["target_mean"]} and standard deviation {recipe["target_std"]}).
It measures calibration to that scale, not agreement: it can rise while r and tau rise, as when
scores spread out to order the pairs better but around another mean.

| epoch | training loss | Pearson r | Kendall tau | wall s | CPU s |
|---|---|---|---|---|---|
{rows}"""


def _figures(v: dict | None) -> str:
    """One line of validation figures (``n/a`` where there was no validation split)."""
    return (
        "n/a"
        if v is None
        else f"Pearson r {fixed(v['pearson'], '.1f', 100)}, Kendall tau {fixed(v['kendall'], '.1f', 100)}, "
        f"MSE of Sim against the training targets {fixed(v['mse'], '.4f')}"
    )


def _recipe_and_limitations(recipe: dict) -> str:
    """The recipe as JSON (every argument of the run), and the limits of a metric trained on one
    domain's ratings."""
    return f"""## Recipe

```json
{json.dumps(recipe, indent=2)}
```

## Limitations

A metric trained on human ratings of one domain (here: {", ".join(recipe["groups"])}) is evaluated
on another domain at the user's risk: the gains measured on held-out language pairs of the same
task need not carry over to other tasks, genres or rating protocols, and the fine-tuned encoder
inherits the biases of the ratings it was trained on. Report the hashcode with every number.
"""


def fixed(value, spec: str, scale: float = 1.0) -> str:
    """``scale * value`` formatted by ``spec``, or ``n/a`` where it is missing or not finite (an
    undefined correlation, an epoch without timing): the card never prints a bare nan."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return format(scale * value, spec)
