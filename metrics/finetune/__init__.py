r"""Fine-tuning the encoder of TWMD (and its family) on human judgments.

Chen et al. (2020), Section 6, "Evaluation metrics with fine-tuning" (Table 4): the encoder is
trained so that the metric's normalized similarity of a (prediction, reference) pair matches the
human score of the pair, with the L2 loss

.. math::

    \mathcal{L} = \frac{1}{B} \sum_{k=1}^{B} \big(\mathrm{Sim}(X_1^k, X_2^k) - y_k\big)^2,
    \qquad \mathrm{Sim}(X_1, X_2) = \frac{C(X_1, X_2)}{\sqrt{C(X_1, X_1)\, C(X_2, X_2)}}   \quad\text{(Eq. 1)}

over mini-batches of :math:`B` pairs. :math:`\mathrm{Sim}` is computed by the very code that scores
at inference: :func:`moverkit._core.prepare_pairs` with a trainable encoder (the forward pass keeps
autograd), ``batch`` centering over the texts of the training mini-batch (the paper introduced
batch-mean centering "especially for fine-tuning", Section 5), the tempered Sinkhorn steps of
:func:`moverkit.ot.sinkhorn_log_plan` (TWMD, Eq. 5-6; the entropy term is what makes WMD
differentiable) or TRWMD's closed form (Eq. 7), and Eq. (1) (:mod:`moverkit.functional.twmd`).

Targets. Human scores are standardized, then mapped into the metric's range,
:math:`y = \mu_y + \sigma_y z`; the default :math:`0.5 + 0.15 z` is the mapping the README's
figures were measured with (untrained TWMD-b on WMT17 with the embedded model has mean 0.65 and
standard deviation 0.17, over a language pair at inference and over training mini-batches of 16
pairs alike: the targets have about the metric's spread and ask it to move down by 0.15 on average). ``standardize="group"`` (default) takes
:math:`z` within each group (language pair): DA scores are comparable only within the segments
rated together, and every benchmark correlates within one language pair, so offsets between pairs
are noise the encoder should not learn (on WMT17 the pairs' means differ by up to 0.09 and their
standard deviations by up to 0.04, so ``"global"`` would change little there); ``"global"``
standardizes over all rows, ``"none"`` uses the scores as given.

The loop is transformers' :class:`~transformers.Trainer` (progress bar, checkpoints, seeds,
AdamW) with the loss above, validation Pearson r (mean over groups) after each epoch, and early
stopping on it (the best epoch's weights are kept). The result is a model folder
(``save_pretrained`` of the encoder cut after the layer trained, so that its last layer is that
layer, and its tokenizer) with a model card; every moverkit metric loads it with
``model_type=<folder>``, and its hashcode names it (folder name and content digest).

The package, one module per job: :mod:`~moverkit.finetune.folder` (the output folder's safety
rules), :mod:`~moverkit.finetune.targets` (the judgments read and turned into targets),
:mod:`~moverkit.finetune.trainer` (the Sim scorer and the Trainer loop) and
:mod:`~moverkit.finetune.card` (the model card); :func:`finetune` ties them together.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moverkit._core import checks
from moverkit._core.encoding import NonFiniteOutputs
from moverkit.finetune.card import fixed, model_card
from moverkit.finetune.folder import MARKER, MODEL_FOLDER_FILES, OutputFolder
from moverkit.finetune.targets import (
    STANDARDIZATIONS,
    TARGET_RANGE,
    _check_validation,
    _target_mean,
    _with_spread,
    _without_empty,
    load_judgments,
    split_rows,
    standardized,
)
from moverkit.finetune.trainer import (
    MAX_LEARNING_RATE,
    TRAINING_CENTERINGS,
    FinetuneResult,
    Loop,
    Scorer,
    _dataset,
    _divergence,
    _history,
    _trainer,
    correlations,
    trainable_encoder,
)
from moverkit.formats.training_record import training_record
from moverkit.functional.twmd import resolve_params
from moverkit.judgments import Judgments

MAX_EPOCHS = 1_000
"""The most epochs a run takes. Fine-tuning passes over the judgments a few times (the default is
2, and validation stops a run early); the number was not checked, so ``--epochs 1000000000000``
started a run of 11*10^12 steps that would never end."""

__all__ = [
    "MARKER",
    "MAX_LEARNING_RATE",
    "MODEL_FOLDER_FILES",
    "STANDARDIZATIONS",
    "TARGET_RANGE",
    "TRAINING_CENTERINGS",
    "FinetuneResult",
    "OutputFolder",
    "Scorer",
    "correlations",
    "finetune",
    "fixed",
    "load_judgments",
    "model_card",
    "split_rows",
    "standardized",
    "trainable_encoder",
]


def finetune(
    data,
    output_dir: str | os.PathLike,
    *,
    model_type: str | None = None,
    num_layers: int | None = None,
    variant: str = "twmd",
    temperature: float | None = None,
    sinkhorn_iterations: int = 1,
    centering: str = "batch",
    epochs: int = 2,
    learning_rate: float = 2e-5,
    batch_size: int = 16,
    validation_split: float = 0.1,
    standardize: str = "group",
    target_mean: float = 0.5,
    target_std: float = 0.15,
    early_stopping_patience: int = 1,
    seed: int = 0,
    device: str | None = None,
    max_length: int | None = None,
    prediction_column: str = "hypothesis",
    reference_column: str = "reference",
    score_column: str = "human",
    group_column: str | None = "lp",
    keep_checkpoints: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    verbose: bool = True,
) -> FinetuneResult:
    """Fine-tune an encoder so that ``variant``'s Sim matches human scores (see the module doc).

    ``data`` is a TSV file laid out like WMT17's segment-level DA table (a header row; columns
    named by ``*_column``) or a :class:`datasets.Dataset` with those columns (``group_column``
    may be ``None``: one group). Rows with an empty prediction or reference are dropped (their Sim
    is 0 whatever the encoder). Human scores that are all equal are refused (nothing to learn, and
    no correlation to validate with); with ``standardize="group"``, a group whose scores are all
    equal is left out (with a warning) and no group with varying scores is refused.
    ``validation_split`` (0 <= v < 1) of the rows, drawn with ``seed``, are held out for the
    validation Pearson r that picks the epoch and stops early (refused if it is undefined on
    them); 0 trains on everything for ``epochs`` epochs. ``batch_size`` pairs per step (an
    incomplete last mini-batch is dropped); centering, when ``batch``, takes the mean of each
    mini-batch.

    ``output_dir`` is new, empty, or the folder of an earlier run (it holds :data:`MARKER`);
    ``overwrite=True`` takes another non-empty folder, whose files of the same names as the
    model's are then replaced (nothing else in it is deleted). Checkpoints go to
    ``output_dir/checkpoints``; at the end the run removes the ones its Trainer wrote (and the
    folder, if nothing else is left in it), unless ``keep_checkpoints``. ``resume=True``
    continues from the last checkpoint of an earlier run into ``output_dir``.

    ``learning_rate`` is at most :data:`MAX_LEARNING_RATE` and ``target_mean`` in
    :data:`TARGET_RANGE`. A run that diverges (a training loss, an output of the encoder or a
    weight turns NaN or infinite) is a ``ValueError`` saying so: no model is written, and
    ``output_dir`` is left as it was before the run (this run's checkpoints are removed).
    """
    settings = _Settings(
        params=resolve_params(variant, temperature, sinkhorn_iterations, True, centering),
        centering=checks.one_of("centering", centering, TRAINING_CENTERINGS),
        standardize=checks.one_of("standardize", standardize, STANDARDIZATIONS),
        epochs=checks.positive_int(
            "epochs", epochs, maximum=MAX_EPOCHS, hint=" (moverkit.finetune.MAX_EPOCHS; the default is 2)"
        ),
        batch_size=checks.positive_int("batch_size", batch_size),
        learning_rate=checks.finite_positive_float(
            "learning_rate",
            learning_rate,
            maximum=MAX_LEARNING_RATE,
            hint=" (AdamW's step size; fine-tuning uses about 1e-5 to 1e-3)",
        ),
        validation_split=_validation_split(validation_split),
        target_mean=_target_mean(target_mean),
        target_std=checks.finite_positive_float("target_std", target_std),
        patience=checks.positive_int("early_stopping_patience", early_stopping_patience),
        seed=checks.positive_int("seed", seed, minimum=0),
    )
    checks.optional_positive_int("max_length", max_length)
    for name, flag in (
        ("keep_checkpoints", keep_checkpoints),
        ("resume", resume),
        ("overwrite", overwrite),
        ("verbose", verbose),
    ):
        checks.boolean(name, flag)
    folder = OutputFolder(output_dir, overwrite=overwrite, resume=resume)

    prepared = _prepare(data, prediction_column, reference_column, score_column, group_column, settings)
    encoder = trainable_encoder(model_type, num_layers, device)
    scorer = Scorer(encoder, settings.params, settings.centering, max_length)
    trainer, before, after = _train(scorer, prepared, settings, folder, verbose)

    result = _result(folder.path, trainer, before, after, prepared)
    recipe = _recipe(data, encoder, settings, folder, result, prepared)
    folder.install(encoder.model, encoder.tokenizer, model_card(recipe, result))
    judged = prepared.judged
    folder.finish(
        keep_checkpoints, result.epochs_trained, training_record(judged.predictions, judged.references, judged.groups)
    )
    return result


@dataclass(frozen=True)
class _Settings:
    """The checked settings of a run that the stages after the checks read: Sim's parameters
    (:func:`moverkit.functional.twmd.resolve_params`) and centering, the targets' standardization
    and scale, the split, and the loop's (epochs, mini-batch, step size, patience, seed)."""

    params: dict
    centering: str
    standardize: str
    epochs: int
    batch_size: int
    learning_rate: float
    validation_split: float
    target_mean: float
    target_std: float
    patience: int
    seed: int


@dataclass(frozen=True)
class _Prepared:
    """The judgments trained on (rows with an empty text dropped, groups without spread left
    out, their names in ``excluded``), the targets of their rows, and the rows of each split."""

    judged: Judgments
    targets: np.ndarray
    excluded: list[str]
    train_rows: list[int]
    valid_rows: list[int]


def _validation_split(value) -> float:
    """``validation_split``, a finite number in [0, 1)."""
    value = checks.nonnegative_float("validation_split", value)
    if value >= 1:
        raise ValueError(f"validation_split must be in [0, 1), got {value!r}")
    return value


def _prepare(data, prediction_column, reference_column, score_column, group_column, settings: _Settings) -> _Prepared:
    r"""The judgments read from ``data``, their targets :math:`\mu_y + \sigma_y z` (see the module
    doc; refused where they overflow), and the rows split into training and validation (refused
    where the validation pairs leave the Pearson r that picks the epoch undefined)."""
    source = str(data) if isinstance(data, (str, os.PathLike)) else "the datasets.Dataset"
    judged = _without_empty(
        load_judgments(data, prediction_column, reference_column, score_column, group_column), source
    )
    judged, excluded = _with_spread(judged, settings.standardize)
    z = standardized(judged.human, judged.groups, settings.standardize)
    targets = settings.target_mean + settings.target_std * z
    if not np.isfinite(targets).all():
        raise ValueError(
            f"the training targets target_mean + target_std * z overflow (target_mean={settings.target_mean!r}, "
            f"target_std={settings.target_std!r}, standardize={settings.standardize!r}): choose a target_std of the "
            "order of Sim's spread (default 0.15)"
        )
    train_rows, valid_rows = split_rows(len(judged.human), settings.validation_split, settings.seed)
    if len(valid_rows) == 1:
        raise ValueError("validation_split leaves a single validation pair; a correlation needs at least 2")
    if valid_rows:
        _check_validation(targets[valid_rows], [judged.groups[i] for i in valid_rows])
    return _Prepared(judged, targets, excluded, train_rows, valid_rows)


def _train(scorer: Scorer, prepared: _Prepared, settings: _Settings, folder: OutputFolder, verbose: bool):
    """The training run into ``folder``'s checkpoints (resumed from its last one where asked):
    the Trainer, and the validation figures before and after it (``None`` without a validation
    split). A run that diverged is abandoned (``folder`` left as it was) and refused."""
    train_set = _dataset(prepared.judged, prepared.targets, prepared.train_rows)
    valid_set = _dataset(prepared.judged, prepared.targets, prepared.valid_rows) if len(prepared.valid_rows) else None
    folder.begin()
    before = scorer.validate(valid_set) if valid_set is not None else None
    trainer = _trainer(
        scorer,
        train_set,
        valid_set,
        folder.checkpoints,
        Loop(settings.epochs, settings.batch_size, settings.learning_rate, settings.patience, settings.seed, verbose),
        on_save=folder.saved,
    )
    try:
        trained = trainer.train(resume_from_checkpoint=None if folder.resume_from is None else str(folder.resume_from))
        after = scorer.validate(valid_set) if valid_set is not None else None
    except NonFiniteOutputs:  # the weights turned NaN or infinite during training
        trained = None
    diverged = _divergence(trainer, trained, scorer.encoder.model)
    if diverged:
        folder.abandon()
        raise ValueError(
            f"training diverged: {diverged} (learning_rate={settings.learning_rate!r}, "
            f"target_mean={settings.target_mean!r}, target_std={settings.target_std!r}): no model was written, "
            f"and {folder.path} is left as it was before the run (this run's checkpoints are removed); try a "
            "smaller learning_rate"
        )
    return trainer, before, after


def _result(output: Path, trainer, before: dict | None, after: dict | None, prepared: _Prepared) -> FinetuneResult:
    """What the run produced: the model folder by its absolute path (so that the card's How to use
    works from any folder), the validation figures, the Trainer's history per epoch, and the
    mean seconds of an epoch's training steps."""
    history = _history(trainer)
    seconds = [entry["seconds"] for entry in history if entry.get("seconds")]
    cpu_seconds = [entry["cpu_seconds"] for entry in history if entry.get("cpu_seconds")]
    return FinetuneResult(
        path=str(Path(output).resolve()),
        validation_before=before,
        validation_after=after,
        history=history,
        seconds_per_epoch=float(np.mean(seconds)) if seconds else math.nan,
        cpu_seconds_per_epoch=float(np.mean(cpu_seconds)) if cpu_seconds else math.nan,
        n_train=len(prepared.train_rows),
        n_validation=len(prepared.valid_rows),
        epochs_trained=round(trainer.state.epoch or 0),
    )


def _recipe(
    data, encoder, settings: _Settings, folder: OutputFolder, result: FinetuneResult, prepared: _Prepared
) -> dict:
    """Everything that made the model, as the card's Recipe lists it: the base model and the layer
    read, Sim's parameters, the loop's settings (the checkpoint a resumed run started from), the
    targets', the data and its groups (those left out for want of spread among them)."""
    return {
        "base_model": encoder.name,
        "layer": encoder.layer,
        "layers_in_folder": encoder.model.config.num_hidden_layers,
        "device": str(encoder.device),
        **settings.params,
        "centering": settings.centering,
        "epochs": settings.epochs,
        "epochs_trained": result.epochs_trained,
        **({"resumed_from": folder.resume_from.name} if folder.resume_from is not None else {}),
        "learning_rate": settings.learning_rate,
        "batch_size": settings.batch_size,
        "validation_split": settings.validation_split,
        "standardize": settings.standardize,
        "target_mean": settings.target_mean,
        "target_std": settings.target_std,
        "early_stopping_patience": settings.patience,
        "seed": settings.seed,
        "data": str(data) if isinstance(data, (str, os.PathLike)) else f"datasets.Dataset ({len(data)} rows)",
        "groups": sorted(set(prepared.judged.groups)),
        **({"excluded_groups": prepared.excluded} if prepared.excluded else {}),
    }
