"""What a fine-tuned model was trained on, and whether data it is evaluated on is among it.

``moverkit finetune`` writes :func:`training_record` of its judgments into the folder's marker
(``.moverkit-finetune.json``, a hidden file: no part of the model's identity): how many segments,
their groups (language pairs), a digest of the whole data and a short hash of each segment's
(prediction, reference) pair. :func:`trained_overlap` reads it back for a folder about to be
evaluated on judgments, so that ``moverkit combine``, ``moverkit tune`` and ``moverkit bench tune``
can say which figures are not held out (:func:`overlap_warning`): a leave-one-language-pair-out
table of an encoder trained on all five pairs measures nothing held out (issue 66).

Standard library only: read by the CLI and by tuning without loading a model.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

MARKER = ".moverkit-finetune.json"
"""The marker file of a fine-tuned folder (:mod:`moverkit.finetune.folder` writes it)."""

RECORD_KEY = "trained_on"


def pair_hash(prediction: str, reference: str) -> str:
    """A segment's short hash (12 hex digits of SHA-256 of its two texts)."""
    return hashlib.sha256(f"{prediction}\0{reference}".encode()).hexdigest()[:12]


def training_record(predictions: Sequence[str], references: Sequence[str], groups: Sequence[str]) -> dict:
    """The record of the judgments a model was trained on (training and validation rows both:
    early stopping reads the validation rows): ``rows``, ``groups`` (each with its count),
    ``digest`` (SHA-256 of every segment in order, with its group) and ``pairs`` (the sorted
    :func:`pair_hash` of each distinct segment)."""
    digest = hashlib.sha256()
    for group, prediction, reference in zip(groups, predictions, references):
        digest.update(f"{group}\0{prediction}\0{reference}\n".encode())
    return {
        "rows": len(predictions),
        "groups": dict(sorted(Counter(map(str, groups)).items())),
        "digest": digest.hexdigest(),
        "pairs": sorted({pair_hash(p, r) for p, r in zip(predictions, references)}),
    }


def read_record(model_type) -> dict | None:
    """The training record of a local fine-tuned folder, or None (a Hub id, a folder no run of
    ``moverkit finetune`` wrote, a marker without a record or that does not read)."""
    if not isinstance(model_type, (str, os.PathLike)) or not os.path.isdir(model_type):
        return None
    try:
        record = json.loads((Path(model_type) / MARKER).read_text(encoding="utf-8")).get(RECORD_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pairs"), list) else None


def trained_overlap(
    model_type, predictions: Sequence[str], references: Sequence[str], groups: Sequence[str]
) -> tuple[dict[str, int], list[str]]:
    """``(segments, groups)``: per evaluated group, how many of its segments the model at
    ``model_type`` was trained on (groups with none left out), and the evaluated groups it was
    trained on any segment of. Both empty for a model without a record (:func:`read_record`)."""
    record = read_record(model_type)
    if record is None:
        return {}, []
    seen = set(record["pairs"])
    segments = Counter(str(g) for g, p, r in zip(groups, predictions, references) if pair_hash(p, r) in seen)
    trained_groups = set(record.get("groups") or ())
    return dict(sorted(segments.items())), sorted({str(g) for g in groups} & trained_groups)


def overlap_warning(model_type, predictions, references, groups, where: str) -> str | None:
    """The warning for evaluating ``model_type`` on judgments it was trained on (None if it was
    not): which segments and groups, and what that makes of ``where``'s figures."""
    segments, trained_groups = trained_overlap(model_type, predictions, references, groups)
    if not segments and not trained_groups:
        return None
    counts = ", ".join(f"{group} {n}" for group, n in segments.items()) or "none of the segments themselves"
    return (
        f"model_type={os.fspath(model_type)!r} was fine-tuned (moverkit finetune) on {sum(segments.values())} of "
        f"these {len(predictions)} segments ({counts}) and on the groups {', '.join(trained_groups)}: {where} "
        "on them are not held out (a fold that leaves a group out still holds it in the encoder). Evaluate a "
        "fine-tuned model on data it was not trained on (its training record is in the folder's "
        f"{MARKER})."
    )
