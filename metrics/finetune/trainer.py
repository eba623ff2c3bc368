"""The training of a fine-tuning run (:mod:`moverkit.finetune`): a trainable encoder, Sim scored by
twmd's differentiable scorer with autograd, transformers' Trainer with that loss, validation
figures, and the signs of divergence."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from moverkit._core import prepare_pairs
from moverkit._core.centering import Centering
from moverkit._core.encoding import EncoderRequest, load_encoder
from moverkit.integrations.registry import get as get_metric
from moverkit.judgments import Judgments
from moverkit.judgments.correlation import correlate

TRAINING_CENTERINGS = ("none", "dim", "sentence", "batch")
"""Centering modes for training. ``corpus`` is refused: a statistic fitted on the base model no
longer fits the fine-tuned one (fit one on the result with ``moverkit.fit_centering`` instead)."""

MAX_LEARNING_RATE = 1.0
"""The largest ``learning_rate`` taken. AdamW moves each weight by about the learning rate per
step whatever the gradient's size, and transformer weights are of order 0.01 to 0.1: fine-tuning uses
1e-5 to 1e-3, a rate of 1 already overwrites a weight in one step, and larger ones only make
weights overflow (1e308 left every weight NaN)."""


@dataclasses.dataclass(frozen=True)
class FinetuneResult:
    """What :func:`moverkit.finetune.finetune` produced: the model folder and its figures."""

    path: str
    validation_before: dict | None  # {"pearson", "kendall", "mse"} of the base model on the validation split
    validation_after: dict | None  # the same for the weights kept (the best epoch)
    history: list[dict]  # one entry per epoch: epoch, train loss, validation figures, seconds
    seconds_per_epoch: float  # wall seconds of an epoch's training steps (mean over epochs)
    cpu_seconds_per_epoch: float  # CPU seconds of this process (all threads) in them: less sensitive to a busy machine
    n_train: int
    n_validation: int
    epochs_trained: int | None = None  # the Trainer's epoch count at the end, the resumed run's epochs included


def trainable_encoder(model_type: str | None = None, num_layers: int | None = None, device: str | None = None):
    """A fresh :class:`~moverkit._core.Encoder` (not the process-wide cached one, which metrics
    share) whose forward pass keeps autograd; its block list is cut after the layer used, and its
    config says how many blocks it kept, so that the saved folder holds them all with their
    weights: the layer used, where it is the cut model's output, else (a final norm after the last
    block: GPT-2, Llama, T5) one block more, whose input is that layer (the card then says
    ``num_layers``; that block gets no gradient and keeps its base weights)."""
    encoder = load_encoder(model_type, num_layers, device, trainable=True)
    encoder.model.config.num_hidden_layers = encoder.blocks
    return encoder


class Scorer:
    """Sim of (prediction, reference) pairs by :mod:`moverkit.functional.twmd`'s code, with
    autograd through a trainable encoder."""

    def __init__(self, encoder, params: dict, centering: str, max_length: int | None):
        self.encoder = encoder
        self.params = params
        self.centering = centering
        self.max_length = max_length

    def __call__(self, predictions: Sequence[str], references: Sequence[str]) -> torch.Tensor:
        """Eq. (1) Sim of every pair, float64, shape (n,); ``batch`` centering over these texts."""
        data = prepare_pairs(
            list(predictions),
            list(references),
            EncoderRequest(max_length=self.max_length),
            Centering(self.centering),
            encoder=self.encoder,
        )
        return get_metric("twmd").differentiable(data, self.params)

    def validate(self, dataset) -> dict:
        """Pearson r and Kendall tau (means over the groups) and MSE of the validation pairs,
        scored in one call (``batch`` centering over the whole split, as at inference)."""
        model = self.encoder.model
        was_training = model.training
        model.eval()
        with torch.no_grad():
            scores = self(dataset["prediction"], dataset["reference"]).cpu().numpy()
        model.train(was_training)
        return correlations(scores, np.asarray(dataset["label"]), dataset["group"])


def correlations(scores: np.ndarray, targets: np.ndarray, groups: Sequence[str]) -> dict:
    """``{"pearson", "kendall"}``: means over the groups of at least 3 pairs of the per-group
    correlations (the benchmarks' protocol, :func:`moverkit.judgments.correlation.correlate`), and
    ``"mse"`` over all pairs."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    figures = [correlate(scores[m], targets[m]) for m in by_group.values() if len(m) >= 3]
    if not figures:  # only tiny groups: correlate over everything
        figures = [correlate(scores, targets)]
    pearson, kendall = np.nanmean(figures, axis=0)
    return {"pearson": float(pearson), "kendall": float(kendall), "mse": float(np.mean((scores - targets) ** 2))}


def _divergence(trainer, trained, model) -> str:
    """What says that training diverged, or ``""``: the encoder's outputs turned non-finite
    during training (``trained`` is ``None``), a logged or the final training loss is not finite,
    or a weight of ``model`` is not."""
    signs = []
    if trained is None:
        signs.append("the encoder's outputs turned NaN or infinite")
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    losses += [trained.training_loss] if trained is not None else []
    bad_loss = next((loss for loss in losses if not math.isfinite(loss)), None)
    if bad_loss is not None:
        signs.append(f"the training loss is {bad_loss}")
    with torch.no_grad():
        weights = [p for p in model.parameters() if p.is_floating_point()]
        bad = sum(int((~torch.isfinite(p)).sum()) for p in weights)
    if bad:
        signs.append(f"{bad:,} of {sum(p.numel() for p in weights):,} weights are NaN or infinite")
    return "; ".join(signs)


def _dataset(judged: Judgments, targets: np.ndarray, rows: list[int]):
    import datasets

    return datasets.Dataset.from_dict(
        {
            "prediction": [judged.predictions[i] for i in rows],
            "reference": [judged.references[i] for i in rows],
            "label": [float(targets[i]) for i in rows],
            "group": [judged.groups[i] for i in rows],
        }
    )


def _collate(rows: list[dict]) -> dict:
    return {
        "predictions": [r["prediction"] for r in rows],
        "references": [r["reference"] for r in rows],
        "labels": torch.tensor([r["label"] for r in rows], dtype=torch.float64),
    }


@dataclass(frozen=True)
class Loop:
    """The training loop's settings: epochs, mini-batch size, step size (constant), the epochs
    without a better validation Pearson r before stopping, the seed, and whether to show bars."""

    epochs: int
    batch_size: int
    learning_rate: float
    patience: int
    seed: int
    verbose: bool


def _trainer(scorer, train_set, valid_set, checkpoints, loop: Loop, on_save=None):
    """transformers' Trainer on the encoder's model, with the MSE-of-Sim loss and validation by
    the scorer (Pearson r picks the best epoch; early stopping after ``loop.patience`` worse
    epochs); ``on_save(step)`` is called after each checkpoint is saved."""
    epochs, batch_size, learning_rate, seed, verbose = (
        loop.epochs,
        loop.batch_size,
        loop.learning_rate,
        loop.seed,
        loop.verbose,
    )
    from transformers import EarlyStoppingCallback, Trainer, TrainerCallback, TrainingArguments

    class SimilarityTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            scores = scorer(inputs["predictions"], inputs["references"])
            loss = torch.nn.functional.mse_loss(scores, inputs["labels"].to(scores)).float()
            return (loss, scores) if return_outputs else loss

        def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
            figures = scorer.validate(self.eval_dataset if eval_dataset is None else eval_dataset)
            metrics = {f"{metric_key_prefix}_{key}": value for key, value in figures.items()}
            self.log(metrics)
            self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
            return metrics

    class EpochTimer(TrainerCallback):
        """Wall and CPU seconds of each epoch's training steps (evaluation and checkpoints excluded)."""

        def on_epoch_begin(self, args, state, control, **kwargs):
            self.start = (time.perf_counter(), time.process_time())

        def on_epoch_end(self, args, state, control, **kwargs):
            wall, cpu = time.perf_counter() - self.start[0], time.process_time() - self.start[1]
            state.log_history.append({"epoch": round(state.epoch), "epoch_seconds": wall, "epoch_cpu_seconds": cpu})

    class SaveHook(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if on_save is not None:
                on_save(state.global_step)

    validate = valid_set is not None
    args = TrainingArguments(
        output_dir=str(checkpoints),
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        weight_decay=0.01,
        eval_strategy="epoch" if validate else "no",
        save_strategy="epoch",
        save_total_limit=1,
        load_best_model_at_end=validate,
        metric_for_best_model="pearson" if validate else None,
        greater_is_better=True,
        logging_steps=10,
        # Log a NaN or infinite loss as it is (the default replaces it by the mean so far), so
        # that a diverged run shows in the history and is refused (:func:`_divergence`).
        logging_nan_inf_filter=False,
        seed=seed,
        data_seed=seed,
        remove_unused_columns=False,
        label_names=["labels"],
        report_to="none",
        disable_tqdm=not verbose,
        use_cpu=scorer.encoder.device.type == "cpu",
        dataloader_num_workers=0,
        # A last mini-batch of a few pairs would be centered on its own few texts' mean: drop it
        # (the sampler reshuffles every epoch, so no pair is left out for good).
        dataloader_drop_last=len(train_set) > batch_size,
    )
    return SimilarityTrainer(
        model=scorer.encoder.model,
        args=args,
        train_dataset=train_set,
        eval_dataset=valid_set,
        data_collator=_collate,
        processing_class=scorer.encoder.tokenizer,
        callbacks=[
            EpochTimer(),
            SaveHook(),
            *([EarlyStoppingCallback(early_stopping_patience=loop.patience)] if validate else []),
        ],
    )


def _history(trainer) -> list[dict]:
    """One entry per epoch from the trainer's log: mean training loss, validation figures, seconds."""
    epochs: dict[int, dict] = {}
    losses: dict[int, list[float]] = {}
    for entry in trainer.state.log_history:
        epoch = math.ceil(entry.get("epoch", 0) - 1e-9)
        if "loss" in entry:
            losses.setdefault(epoch, []).append(entry["loss"])
        if "epoch_seconds" in entry:
            epochs.setdefault(entry["epoch"], {}).update(
                seconds=entry["epoch_seconds"], cpu_seconds=entry["epoch_cpu_seconds"]
            )
        for key in ("eval_pearson", "eval_kendall", "eval_mse"):
            if key in entry:
                epochs.setdefault(epoch, {})[key.removeprefix("eval_")] = entry[key]
    for epoch, values in losses.items():
        epochs.setdefault(epoch, {})["train_loss"] = float(np.mean(values))
    return [{"epoch": epoch, **epochs[epoch]} for epoch in sorted(epochs) if epoch > 0]
