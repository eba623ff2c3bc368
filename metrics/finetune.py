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

The output folder. A run writes :data:`MARKER` into it, a JSON file that lists what the run wrote
(the model's files, the Trainer's ``checkpoints/checkpoint-N`` folders); a later run writes over
those and nothing else. A non-empty folder without the marker is refused (``overwrite=True`` lets
the model's files replace any of the same name there; nothing else is deleted), and so is a
``checkpoints/checkpoint-N`` folder that no run of ours wrote (the Trainer would delete it when it
rotates its checkpoints, or resume from it). These checks come before any model is loaded.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import numbers
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ._core import checks, prepare_pairs
from ._core.centering import Centering
from ._core.encoder import NonFiniteOutputs, load_encoder
from ._core.request import EncoderRequest
from ._core.user_warnings import warn_user
from .correlation import correlate
from .functional.twmd import resolve_params
from .judgments import Judgments, read_judgments
from .registry import get as get_metric

TRAINING_CENTERINGS = ("none", "dim", "sentence", "batch")
"""Centering modes for training. ``corpus`` is refused: a statistic fitted on the base model no
longer fits the fine-tuned one (fit one on the result with ``moverkit.fit_centering`` instead)."""

STANDARDIZATIONS = ("group", "global", "none")

MAX_LEARNING_RATE = 1.0
"""The largest ``learning_rate`` taken. AdamW moves each weight by about the learning rate per
step whatever the gradient's size, and transformer weights are of order 0.01 to 0.1: fine-tuning uses
1e-5 to 1e-3, a rate of 1 already overwrites a weight in one step, and larger ones only make
weights overflow (1e308 left every weight NaN)."""

TARGET_RANGE = (-1.0, 1.0)
"""Where ``target_mean`` must lie: the range of Sim (Eq. 1; :func:`moverkit.functional.twmd.score_range`).
The targets ask Sim to be ``target_mean`` on average, so a mean outside asks for scores no
encoder can give (and one such as 1e308 swallows ``target_std * z``, leaving every target equal)."""

MARKER = ".moverkit-finetune.json"
"""The file a run writes into its output folder: which moverkit wrote it, and what the run wrote
there (``files``, the model folder's top-level files; ``checkpoints``, the Trainer's folders in
``checkpoints/``; ``epochs_trained``); a later run may write over these, and over nothing else."""

MODEL_FOLDER_FILES = (
    "README.md",
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "*.bin",
    "*.index.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "chat_template.*",
)
"""Names that ``save_pretrained`` of a model and its tokenizer, and the model card, may write: in a
folder of ours, a file so named that no run of ours wrote is refused before training."""


@dataclasses.dataclass(frozen=True)
class FinetuneResult:
    """What :func:`finetune` produced: the model folder and its figures."""

    path: str
    validation_before: dict | None  # {"pearson", "kendall", "mse"} of the base model on the validation split
    validation_after: dict | None  # the same for the weights kept (the best epoch)
    history: list[dict]  # one entry per epoch: epoch, train loss, validation figures, seconds
    seconds_per_epoch: float  # wall seconds of an epoch's training steps (mean over epochs)
    cpu_seconds_per_epoch: float  # CPU seconds of this process (all threads) in them: less sensitive to a busy machine
    n_train: int
    n_validation: int
    epochs_trained: int | None = None  # the Trainer's epoch count at the end, the resumed run's epochs included


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
    params = resolve_params(variant, temperature, sinkhorn_iterations, True, centering)
    checks.one_of("centering", centering, TRAINING_CENTERINGS)
    checks.one_of("standardize", standardize, STANDARDIZATIONS)
    epochs = checks.positive_int("epochs", epochs)
    batch_size = checks.positive_int("batch_size", batch_size)
    learning_rate = checks.finite_positive_float(
        "learning_rate",
        learning_rate,
        maximum=MAX_LEARNING_RATE,
        hint=" (AdamW's step size; fine-tuning uses about 1e-5 to 1e-3)",
    )
    validation_split = checks.nonnegative_float("validation_split", validation_split)
    if validation_split >= 1:
        raise ValueError(f"validation_split must be in [0, 1), got {validation_split!r}")
    target_mean = _target_mean(target_mean)
    target_std = checks.finite_positive_float("target_std", target_std)
    patience = checks.positive_int("early_stopping_patience", early_stopping_patience)
    seed = checks.positive_int("seed", seed, minimum=0)
    checks.optional_positive_int("max_length", max_length)
    for name, flag in (
        ("keep_checkpoints", keep_checkpoints),
        ("resume", resume),
        ("overwrite", overwrite),
        ("verbose", verbose),
    ):
        checks.boolean(name, flag)
    folder = OutputFolder(output_dir, overwrite=overwrite, resume=resume)

    source = str(data) if isinstance(data, (str, os.PathLike)) else "the datasets.Dataset"
    judged = _without_empty(
        load_judgments(data, prediction_column, reference_column, score_column, group_column), source
    )
    judged, excluded = _with_spread(judged, standardize)
    targets = target_mean + target_std * standardized(judged.human, judged.groups, standardize)
    if not np.isfinite(targets).all():
        raise ValueError(
            f"the training targets target_mean + target_std * z overflow (target_mean={target_mean!r}, "
            f"target_std={target_std!r}, standardize={standardize!r}): choose a target_std of the order of "
            "Sim's spread (default 0.15)"
        )
    train_rows, valid_rows = split_rows(len(judged.human), validation_split, seed)
    if len(valid_rows) == 1:
        raise ValueError("validation_split leaves a single validation pair; a correlation needs at least 2")
    if valid_rows:
        _check_validation(targets[valid_rows], [judged.groups[i] for i in valid_rows])

    encoder = trainable_encoder(model_type, num_layers, device)
    scorer = Scorer(encoder, params, centering, max_length)
    train_set = _dataset(judged, targets, train_rows)
    valid_set = _dataset(judged, targets, valid_rows) if len(valid_rows) else None

    folder.begin()
    output = folder.path
    before = scorer.validate(valid_set) if valid_set is not None else None
    trainer = _trainer(
        scorer,
        train_set,
        valid_set,
        folder.checkpoints,
        epochs,
        batch_size,
        learning_rate,
        patience,
        seed,
        verbose,
        on_save=folder.saved,
    )
    try:
        trained = trainer.train(resume_from_checkpoint=None if folder.resume_from is None else str(folder.resume_from))
        after = scorer.validate(valid_set) if valid_set is not None else None
    except NonFiniteOutputs:  # the weights turned NaN or infinite during training
        trained = None
    diverged = _divergence(trainer, trained, encoder.model)
    if diverged:
        folder.abandon()
        raise ValueError(
            f"training diverged: {diverged} (learning_rate={learning_rate!r}, target_mean={target_mean!r}, "
            f"target_std={target_std!r}): no model was written, and {folder.path} is left as it was before "
            "the run (this run's checkpoints are removed); try a smaller learning_rate"
        )

    history = _history(trainer)
    epochs_trained = round(trainer.state.epoch or 0)
    seconds = [entry["seconds"] for entry in history if entry.get("seconds")]
    cpu_seconds = [entry["cpu_seconds"] for entry in history if entry.get("cpu_seconds")]
    result = FinetuneResult(
        path=str(Path(output).resolve()),  # the card's How to use works from any folder
        validation_before=before,
        validation_after=after,
        history=history,
        seconds_per_epoch=float(np.mean(seconds)) if seconds else math.nan,
        cpu_seconds_per_epoch=float(np.mean(cpu_seconds)) if cpu_seconds else math.nan,
        n_train=len(train_rows),
        n_validation=len(valid_rows),
        epochs_trained=epochs_trained,
    )
    recipe = {
        "base_model": encoder.name,
        "layer": encoder.layer,
        "layers_in_folder": encoder.model.config.num_hidden_layers,
        "device": str(encoder.device),
        **params,
        "centering": centering,
        "epochs": epochs,
        "epochs_trained": epochs_trained,
        **({"resumed_from": folder.resume_from.name} if folder.resume_from is not None else {}),
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "validation_split": validation_split,
        "standardize": standardize,
        "target_mean": target_mean,
        "target_std": target_std,
        "early_stopping_patience": patience,
        "seed": seed,
        "data": str(data) if isinstance(data, (str, os.PathLike)) else f"datasets.Dataset ({len(data)} rows)",
        "groups": sorted(set(judged.groups)),
        **({"excluded_groups": excluded} if excluded else {}),
    }
    folder.install(encoder.model, encoder.tokenizer, model_card(recipe, result))
    folder.finish(keep_checkpoints, epochs_trained)
    return result


class OutputFolder:
    """The output folder of a run (see the module doc): checked when made, before any work, then
    written by :meth:`begin`, :meth:`saved`, :meth:`install` and :meth:`finish`, which keep
    :data:`MARKER` up to date and touch nothing that no run of ours wrote."""

    def __init__(self, path: str | os.PathLike, *, overwrite: bool = False, resume: bool = False):
        self.path = Path(path)
        self.checkpoints = self.path / "checkpoints"
        self.overwrite = overwrite
        self.resume_from: Path | None = None
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"output folder {self.path} is not a folder")
        entries = sorted(os.listdir(self.path)) if self.path.is_dir() else []
        marker = self._read_marker() if MARKER in entries else None
        # What :meth:`abandon` puts back: whether the folders existed, and the earlier run's marker.
        self._existed = (self.path.is_dir(), self.checkpoints.is_dir())
        self._earlier_marker = marker
        if resume and marker is None:
            raise ValueError(
                f"resume=True (--resume) continues an earlier run of moverkit finetune into {self.path}, "
                f"and there is none there (no {MARKER})"
            )
        if marker is None and entries and not overwrite:
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
            raise ValueError(
                f"output folder {self.path} is not empty ({shown}) and no run of moverkit finetune wrote it "
                f"(it has no {MARKER}): choose a new or empty folder, or pass overwrite=True (--overwrite) to "
                "write the model's files over any of the same name there (nothing else is deleted)"
            )
        self.files = set((marker or {}).get("files", []))
        self.ours = set((marker or {}).get("checkpoints", []))
        if self.checkpoints.exists() and not self.checkpoints.is_dir():
            raise ValueError(f"{self.checkpoints} is not a folder; the Trainer writes its checkpoints there")
        found = self._trainer_checkpoints()
        foreign = sorted(set(found) - self.ours)
        if foreign:
            raise ValueError(
                f"{self.checkpoints} holds checkpoint folders that no run of moverkit finetune wrote "
                f"({', '.join(foreign)}): the Trainer would delete them as it rotates its checkpoints, or "
                "resume from them; move them away or choose another output folder"
            )
        self.ours &= set(found)
        if marker is not None and not overwrite:
            clash = [
                name
                for name in entries
                if name not in self.files and any(fnmatch.fnmatch(name, p) for p in MODEL_FOLDER_FILES)
            ]
            if clash:
                raise ValueError(
                    f"output folder {self.path} holds {', '.join(clash)}, which no run of moverkit finetune wrote "
                    "and the model folder would replace: move them away, or pass overwrite=True (--overwrite)"
                )
        if resume:
            if not self.ours:
                raise ValueError(
                    f"resume=True (--resume): {self.checkpoints} holds no checkpoint of an earlier run to resume "
                    "from (runs remove theirs at the end unless keep_checkpoints=True / --keep-checkpoints)"
                )
            self.resume_from = self.checkpoints / max(self.ours, key=_checkpoint_step)

    def begin(self) -> None:
        """Create the folder and write the marker (status ``training``); a run that does not
        resume first removes the checkpoints of earlier runs here (they are ours, and the
        Trainer would mix them with its own)."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.resume_from is None:
            for name in sorted(self.ours):
                shutil.rmtree(self.checkpoints / name, ignore_errors=True)
            self.ours = set()
        self._write_marker("training")

    def saved(self, step: int) -> None:
        """After the Trainer saved ``checkpoint-<step>`` (and maybe rotated older ones away)."""
        self.ours = (self.ours | {f"checkpoint-{step}"}) & set(self._trainer_checkpoints())
        self._write_marker("training")

    def install(self, model, tokenizer, card: str) -> None:
        """Write the model folder: ``model`` and ``tokenizer`` (``save_pretrained``) and the card
        (README.md), staged in a new folder inside the output folder and moved in once none of
        them would replace a file that no run of ours wrote (unless ``overwrite``); files of the
        earlier run that this one does not write again are removed."""
        staging = Path(tempfile.mkdtemp(prefix=".moverkit-finetune-", dir=self.path))
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "README.md").write_text(card, encoding="utf-8")
        names = sorted(os.listdir(staging))
        clash = [n for n in names if os.path.lexists(self.path / n) and n not in self.files]
        if clash and not self.overwrite:
            raise FileExistsError(
                f"output folder {self.path} holds {', '.join(clash)}, which no run of moverkit finetune wrote: "
                f"nothing was replaced; the fine-tuned model folder is in {staging}"
            )
        stale = self.files - set(names)
        self.files |= set(names)
        self._write_marker("training")  # ours before they are moved in, should the move be cut short
        for name in names:
            os.replace(staging / name, self.path / name)
        for name in sorted(stale):
            if (self.path / name).is_file():
                (self.path / name).unlink()
        staging.rmdir()
        self.files = set(names)

    def abandon(self) -> None:
        """After a run that produced nothing worth keeping (training diverged): remove the
        checkpoints this run wrote, put the earlier run's marker back (or remove ours), and remove
        ``checkpoints/`` and the folder itself where this run made them and left them empty. The
        model files of an earlier run are untouched (:meth:`install` was not called)."""
        earlier = set((self._earlier_marker or {}).get("checkpoints", []))
        for name in sorted(self.ours - earlier):
            shutil.rmtree(self.checkpoints / name, ignore_errors=True)
        self.ours &= earlier
        staged = self.path / (MARKER + ".tmp")
        if staged.exists():
            staged.unlink()
        if self._earlier_marker is None:
            (self.path / MARKER).unlink(missing_ok=True)
        else:
            marker = dict(self._earlier_marker, checkpoints=sorted(self.ours, key=_checkpoint_step))
            (self.path / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        path_existed, checkpoints_existed = self._existed
        for folder, existed in ((self.checkpoints, checkpoints_existed), (self.path, path_existed)):
            if not existed and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()

    def finish(self, keep_checkpoints: bool, epochs_trained: int) -> None:
        """Remove the checkpoints of our runs (unless ``keep_checkpoints``), then ``checkpoints/``
        if nothing else is in it, and mark the run complete."""
        if not keep_checkpoints:
            for name in sorted(self.ours):
                if (self.checkpoints / name).is_dir():
                    shutil.rmtree(self.checkpoints / name)
            self.ours = set()
            if self.checkpoints.is_dir() and not any(self.checkpoints.iterdir()):
                self.checkpoints.rmdir()
        self._write_marker("complete", epochs_trained=epochs_trained)

    def _trainer_checkpoints(self) -> list[str]:
        """The folders of ``checkpoints/`` that the Trainer counts as its checkpoints (it rotates
        and resumes from ``checkpoint-*`` folders)."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(p.name for p in self.checkpoints.glob("checkpoint-*") if p.is_dir())

    def _read_marker(self) -> dict:
        path = self.path / MARKER
        try:
            marker = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ValueError(f"{path} cannot be read as moverkit finetune's marker ({err}); remove it") from None
        names = [marker.get(key, []) for key in ("files", "checkpoints")] if isinstance(marker, dict) else None
        if (
            names is None
            or marker.get("written_by") != "moverkit finetune"
            or not all(isinstance(listed, list) and all(map(_plain_name, listed)) for listed in names)
        ):
            raise ValueError(f"{path} is not moverkit finetune's marker (a JSON object listing files and checkpoints)")
        return marker

    def _write_marker(self, status: str, **extra) -> None:
        from ._version import __version__

        marker = {
            "written_by": "moverkit finetune",
            "moverkit_version": __version__,
            "status": status,
            "files": sorted(self.files),
            "checkpoints": sorted(self.ours, key=_checkpoint_step),
            **extra,
        }
        staged = self.path / (MARKER + ".tmp")
        staged.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        os.replace(staged, self.path / MARKER)


def _plain_name(name) -> bool:
    """A file name in a folder, no path (a marker's list names nothing outside the folder)."""
    return isinstance(name, str) and name not in ("", ".", "..") and os.path.basename(name) == name and "\\" not in name


def _checkpoint_step(name: str) -> int:
    """The step of a ``checkpoint-<step>`` folder (-1 if the name has none)."""
    step = name.rpartition("-")[2]
    return int(step) if step.isdigit() else -1


def trainable_encoder(model_type: str | None = None, num_layers: int | None = None, device: str | None = None):
    """A fresh :class:`~moverkit._core.Encoder` (not the process-wide cached one, which metrics
    share) whose forward pass keeps autograd; its block list is cut after the layer used, and its
    config says so, so that the saved model's last layer is that layer."""
    encoder = load_encoder(model_type, num_layers, device, trainable=True)
    if not encoder.hidden_states_only:
        encoder.model.config.num_hidden_layers = encoder.layer
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
    correlations (the benchmarks' protocol, :func:`moverkit.correlation.correlate`), and
    ``"mse"`` over all pairs."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    figures = [correlate(scores[m], targets[m]) for m in by_group.values() if len(m) >= 3]
    if not figures:  # only tiny groups: correlate over everything
        figures = [correlate(scores, targets)]
    pearson, kendall = np.nanmean(figures, axis=0)
    return {"pearson": float(pearson), "kendall": float(kendall), "mse": float(np.mean((scores - targets) ** 2))}


def load_judgments(data, prediction: str, reference: str, score: str, group: str | None) -> Judgments:
    """(group, prediction, reference, human score) rows from a TSV path or a ``datasets.Dataset``."""
    if isinstance(data, (str, os.PathLike)):
        if group is None:
            raise ValueError("a TSV needs a group column (group_column), e.g. the language pair")
        return read_judgments(data, group=group, prediction=prediction, reference=reference, human=score)
    import datasets

    if not isinstance(data, datasets.Dataset):
        raise TypeError(f"data must be a TSV path or a datasets.Dataset, got {type(data).__name__}")
    wanted = [c for c in (prediction, reference, score, group) if c is not None]
    missing = [c for c in dict.fromkeys(wanted) if c not in data.column_names]
    if missing:
        raise ValueError(
            f"the dataset lacks the column(s) {', '.join(map(repr, missing))}; it has {', '.join(data.column_names)}"
        )
    groups = [str(g) for g in data[group]] if group is not None else ["all"] * len(data)
    return Judgments(
        groups,
        [_dataset_text(value, row, prediction) for row, value in enumerate(data[prediction])],
        [_dataset_text(value, row, reference) for row, value in enumerate(data[reference])],
        [_dataset_score(value, row, score) for row, value in enumerate(data[score])],
    )


def _dataset_text(value, row: int, column: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"datasets.Dataset row {row}: column {column!r} is not a text: {value!r}")
    return value


def _dataset_score(value, row: int, column: str) -> float:
    """A human score of a dataset row: a real number, or a text that reads as one; finite."""
    where = f"datasets.Dataset row {row}: column {column!r}"
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{where} is not a number: {value!r}") from None
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
    else:
        raise ValueError(f"{where} is not a number: {value!r}")
    if not math.isfinite(number):
        raise ValueError(f"{where} is not a finite number: {value!r}")
    return number


def _without_empty(judged: Judgments, source: str = "the data") -> Judgments:
    """The rows whose prediction and reference both hold text; ``source`` names the data in errors."""
    if not judged.human:
        raise ValueError(
            f"{source} has no row of data (a header only?); fine-tuning needs at least 2 "
            "(prediction, reference, human score) rows"
        )
    keep = [i for i, (p, r) in enumerate(zip(judged.predictions, judged.references)) if p.strip() and r.strip()]
    if len(keep) < 2:
        raise ValueError(
            f"fine-tuning needs at least 2 pairs with non-empty texts; {source} has {len(keep)} "
            f"of its {len(judged.human)} rows"
        )
    if any(not math.isfinite(judged.human[i]) for i in keep):
        raise ValueError("every human score must be a finite number")
    return Judgments(*([column[i] for i in keep] for column in dataclasses.astuple(judged)))


def _target_mean(value) -> float:
    """``target_mean``, a finite number in :data:`TARGET_RANGE`."""
    low, high = TARGET_RANGE
    what = f"a finite number in [{low:g}, {high:g}] (the range of Sim, Eq. 1, which the targets ask it to average)"
    value = checks.real("target_mean", value, what=what)
    if not low <= value <= high:  # NaN fails too
        raise ValueError(f"target_mean must be {what}, got {value!r}")
    return value


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


def _with_spread(judged: Judgments, standardize: str) -> tuple[Judgments, list[str]]:
    """The rows whose human scores can teach, and the groups left out. Scores that are all equal
    are refused (no target to learn, and validation correlations would be NaN). With ``group``
    standardization a group whose scores are all equal has z = 0 throughout, nothing to learn
    within it: it is left out with a warning, and refused when no group is left."""
    values = np.asarray(judged.human, dtype=np.float64)
    if values.min() == values.max():
        raise ValueError(
            f"the human scores have no spread: all {len(values)} are {values[0]:g}; fine-tuning fits the "
            "metric to how they vary (and a correlation with constant scores is undefined)"
        )
    if standardize != "group":
        return judged, []
    by_group = judged.by_group()
    constant = sorted(g for g, rows in by_group.items() if values[rows].min() == values[rows].max())
    if len(constant) == len(by_group):
        shown = ", ".join(constant[:10]) + (f" and {len(constant) - 10} more" if len(constant) > 10 else "")
        raise ValueError(
            f"no group has human scores with spread (in each of {shown} they are all equal): "
            "standardize='group' compares scores within a group only; use standardize='global' if the "
            "scores are comparable across groups"
        )
    if not constant:
        return judged, []
    keep = [i for i, g in enumerate(judged.groups) if g not in set(constant)]
    warn_user(
        f"fine-tuning leaves out the group(s) {', '.join(constant)} ({len(judged.groups) - len(keep)} pairs): "
        "their human scores are all equal, so standardize='group' gives them nothing to learn"
    )
    return Judgments(*([column[i] for i in keep] for column in dataclasses.astuple(judged))), constant


def _check_validation(targets: np.ndarray, groups: Sequence[str]) -> None:
    """Refuse a validation split whose Pearson r (:func:`correlations`: the mean over its groups
    of at least 3 pairs, else over all pairs) is undefined whatever the scores: no such group,
    or the pairs, with targets that vary."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    sets = [rows for rows in by_group.values() if len(rows) >= 3] or [list(range(len(targets)))]
    if all(np.ptp(targets[rows]) == 0 for rows in sets):
        where = "in no group of 3 or more of them" if len(sets) > 1 or len(sets[0]) < len(targets) else "among them"
        raise ValueError(
            f"the {len(targets)} validation pairs have no human scores that vary {where}, so the validation "
            "Pearson r is undefined: change validation_split (0: no validation) or the seed"
        )


def standardized(scores: Sequence[float], groups: Sequence[str], how: str) -> np.ndarray:
    r""":math:`z = (s - \bar s) / \sigma_s` within each group (``group``), over all rows
    (``global``), or the scores as given (``none``); a constant group gets 0."""
    values = np.asarray(scores, dtype=np.float64)
    if how == "none":
        return values
    keys = np.asarray(groups) if how == "group" else np.zeros(len(values))
    z = np.zeros_like(values)
    for key in np.unique(keys):
        members = keys == key
        spread = values[members].std()
        z[members] = (values[members] - values[members].mean()) / spread if spread > 0 else 0.0
    return z


def split_rows(n: int, validation_split: float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded random split of ``range(n)`` into training and validation rows."""
    order = np.random.default_rng(seed).permutation(n)
    n_valid = int(round(validation_split * n))
    if n - n_valid < 1:
        raise ValueError(f"validation_split={validation_split} leaves no training pair of {n}")
    return sorted(order[n_valid:].tolist()), sorted(order[:n_valid].tolist())


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


def _trainer(
    scorer, train_set, valid_set, checkpoints, epochs, batch_size, learning_rate, patience, seed, verbose, on_save=None
):
    """transformers' Trainer on the encoder's model, with the MSE-of-Sim loss and validation by
    the scorer (Pearson r picks the best epoch; early stopping after ``patience`` worse epochs);
    ``on_save(step)`` is called after each checkpoint is saved."""
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
            *([EarlyStoppingCallback(early_stopping_patience=patience)] if validate else []),
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


def model_card(recipe: dict, result: FinetuneResult) -> str:
    """The model folder's README.md: what it is, how to use it, how it was trained, its figures."""
    name = Path(result.path).resolve().name
    variant = recipe["variant"]
    t = f", T = {recipe['temperature']}" if "temperature" in recipe else ""
    steps = f", {recipe['sinkhorn_iterations']} Sinkhorn step(s)" if "sinkhorn_iterations" in recipe else ""

    def figures(v):
        return (
            "n/a"
            if v is None
            else f"Pearson r {fixed(v['pearson'], '.1f', 100)}, Kendall tau {fixed(v['kendall'], '.1f', 100)}, "
            f"MSE of Sim against the training targets {fixed(v['mse'], '.4f')}"
        )

    rows = "\n".join(
        f"| {e['epoch']} | {fixed(e.get('train_loss'), '.4f')} | {fixed(e.get('pearson'), '.1f', 100)} | "
        f"{fixed(e.get('kendall'), '.1f', 100)} | {fixed(e.get('seconds'), '.0f')} | "
        f"{fixed(e.get('cpu_seconds'), '.0f')} |"
        for e in result.history
    )
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
    base = recipe["base_model"]
    layer = recipe["layer"]
    if recipe["layers_in_folder"] == layer:
        cut = f"cut after layer {layer} (the layer the metric reads; it is this folder's last layer, the default)"
        layer_arg = ""
    else:  # no block list was found to cut: the folder keeps every layer
        cut = f"read at layer {layer} of {recipe['layers_in_folder']} (pass num_layers={layer})"
        layer_arg = f", num_layers={layer}"
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
with `{recipe["centering"]}` centering (over each training mini-batch of {recipe["batch_size"]} pairs).

## How to use

Every moverkit metric loads this folder as its model; the hashcode names it (folder name and a
digest of its files):

```python
from moverkit import functional
functional.twmd(predictions, references, model_type="{result.path}"{layer_arg}, variant="{variant}", centering="{recipe["centering"]}")
```

## Training

- Data: {recipe["data"]}; groups {", ".join(recipe["groups"])}{excluded}; {result.n_train} training pairs,
  {result.n_validation} validation pairs (a random {recipe["validation_split"]:.0%} of the rows, seed {recipe["seed"]}).
- Targets: human scores standardized `{recipe["standardize"]}` (z-scores {"within each group" if recipe["standardize"] == "group" else "over all rows" if recipe["standardize"] == "global" else "not: used as given"}),
  mapped to y = {recipe["target_mean"]} + {recipe["target_std"]} z.
- Loop: transformers' Trainer, AdamW, learning rate {recipe["learning_rate"]} (constant),
  weight decay 0.01, batch size {recipe["batch_size"]}, {loop_epochs}, early
  stopping on validation Pearson r (patience {recipe["early_stopping_patience"]}; the best epoch's weights kept), seed {recipe["seed"]}.
- Time per epoch (training steps) on {recipe["device"]}: {fixed(result.seconds_per_epoch, ".0f")} s wall,
  {fixed(result.cpu_seconds_per_epoch, ".0f")} s of CPU time (all threads of the process).

## Validation

Per-group Pearson r and Kendall tau (x100), averaged over the groups, of {variant} against the
standardized human scores of the validation pairs:

- before fine-tuning: {figures(result.validation_before)}
- after (weights kept): {figures(result.validation_after)}

The MSE is the training loss on the validation pairs: the mean squared distance of Sim to the
targets (the human scores standardized, then set to mean {recipe["target_mean"]} and standard deviation {recipe["target_std"]}).
It measures calibration to that scale, not agreement: it can rise while r and tau rise, as when
scores spread out to order the pairs better but around another mean.

| epoch | training loss | Pearson r | Kendall tau | wall s | CPU s |
|---|---|---|---|---|---|
{rows}

## Recipe

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
