r"""Baseline rescaling (Zhang et al., 2020, Section 4 "Baseline rescaling"), for all five metrics.

A similarity :math:`s` whose best value is 1 (BERTScore's precision, recall and F1; sBERTScore;
TWMD and its family; MoverScore) is mapped to

.. math::

    \hat s = \frac{s - b}{1 - b},

and a distance whose best value is 0 (Lazy-EMD) to

.. math::

    \hat d = \frac{d}{b},

where :math:`b` is the mean score of random pairs of unrelated sentences with the same model,
layer and settings. A rescaled similarity is 1 for identical texts and about 0 for unrelated ones
(below 0 for pairs less alike than unrelated text, below -1 only for pairs close to opposite); a
rescaled distance is 0 for identical texts and about 1 for unrelated ones (still a distance: lower
is closer). Both maps are increasing, so rankings and correlations do not change.

A baseline file is bert-score's CSV format, one row per layer (``k``: the output of the k-th
block, 0 the embeddings; -1: sentence vectors, sbertscore)::

    LAYER,P,R,F
    0,0.5,0.5,0.5
    ...

``P,R,F`` for the metrics with precision, recall and F1; one column named after the score for the
others (``LAYER,TWMD``, ``LAYER,TRWMD``, ``LAYER,MOVERSCORE``, ``LAYER,LAZY_EMD``, ...). A last
column ``SETTINGS`` (written by ``moverkit fit-baseline`` for every metric but centered_bertscore,
whose files stay bert-score's) holds, per row, the settings the baseline was fitted under: the
score's hashcode without the versions and the two settings that leave a baseline unchanged
(:func:`settings_key`). A file with it rescales only a call with the same settings.

:func:`moverkit.baselines.fit_baseline` fits one for any metric, model, layer and setting
(``moverkit fit-baseline``); the baselines of the embedded model at each metric's default settings
ship with the package (:func:`default_baseline_path`).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from pathlib import Path

import torch

from moverkit._core.encoding.request import is_english
from moverkit.facts.specs import SPECS

BASELINE_DIR = Path(__file__).resolve().parents[2] / "baselines"
"""The shipped baselines: ``<model name, / as __>.<centering>.csv`` for a metric whose files are
bert-score's (centered_bertscore), ``<metric>.<model name, / as __>.<centering>.csv`` for the others
(:func:`baseline_name`)."""

HEADER = ("LAYER", "P", "R", "F")
"""bert-score's header: the columns of centered_bertscore and sbertscore."""

SETTINGS = "SETTINGS"
"""The optional last column: the settings each row was fitted under (:func:`settings_key`)."""

DISTANCE_COLUMNS = tuple(
    output.upper() for spec in SPECS.values() if not spec.higher_is_better for output in spec.outputs
)
"""Columns of distances (best value 0; the outputs of the metrics whose spec says lower is better):
rescaled as ``d / b``, their baseline a finite number >= :data:`MIN_DISTANCE_BASELINE`."""

MIN_DISTANCE_BASELINE = 1e-3
"""The smallest baseline of a distance taken. A baseline is the mean distance of unrelated
sentence pairs: Lazy-EMD's is 0.19 with the embedded model (the shipped file), and of that order
for any encoder, since unrelated texts are far apart; a baseline near 0 says the file is wrong (or
that the encoder maps every text to one point), and ``d / b`` then blows up (5e-324 made every
score inf). At 1e-3, two orders of magnitude below a real fit, ``d / b`` stays within 1,000 times
the raw distance."""

MAX_SIMILARITY_BASELINE = 0.99
"""The largest baseline of a similarity taken. ``(s - b) / (1 - b)`` divides by ``1 - b``: a
baseline of 0.9999999 gave F1 down to -1.6e12. Unrelated texts score far below 1 under any useful
encoder (the embedded model's baselines are 0.03-0.43; bert-score's for roberta-large about 0.83),
and at 0.99 a rescaled score stays in [(-1 - b) / (1 - b), 1], at least -199."""

SENTENCE_LAYER = -1
"""The layer of sentence vectors (sbertscore), as in hashcodes (``_L-1``)."""

UNKEYED = ("dtype", "long_texts")
"""Hashcode fields left out of :func:`settings_key`: the forward pass's precision moves a score by
about 1e-3, a baseline (a mean of 1,000 scores) by less; and a text within the token limit scores
the same with either long-text mode (baseline pairs are sentences)."""


def score_columns(outputs) -> tuple[str, ...]:
    """The file's value columns for a metric's per-example ``outputs`` (its result keys):
    ``("P", "R", "F")`` for precision, recall and F1, else the output's name in capitals."""
    outputs = tuple(outputs)
    if outputs == ("precision", "recall", "f1"):
        return HEADER[1:]
    return tuple(name.upper() for name in outputs)


def baseline_name(metric: str, model: str, mode: str) -> str:
    """The file name of a shipped baseline (:data:`BASELINE_DIR`) of centering ``mode``, prefixed by
    the metric's name but for a metric whose files are bert-score's (:data:`PREFIXED`)."""
    name = f"{model.replace('/', '__')}.{mode}.csv"
    return f"{metric}.{name}" if metric in PREFIXED else name


def fit_command(metric: str, mode: str | None = None, layer: int | None = None) -> str:
    """The ``moverkit fit-baseline`` command line that fits a baseline for ``metric`` (under centering ``mode``)."""
    command = f"moverkit fit-baseline --metric {metric} --texts CORPUS.txt --out OUT.csv --model ..."
    if mode is not None:
        command += f" --centering {mode}"
    if layer is not None and layer != SENTENCE_LAYER:
        command += f" --layers {layer}"
    return f"`{command}` (add --arg KEY=VALUE for each other setting of the call)"


PREFIXED = tuple(name for name, spec in SPECS.items() if spec.baseline_form != "bert-score")
"""The metrics whose shipped file names start with the metric's name (:func:`baseline_name`): all
but those whose files are bert-score's own, named as bert-score names them (their spec's
``baseline_form``)."""


def shipped_baselines(metric: str) -> list[str]:
    """The names of the shipped baseline files of ``metric``."""
    names = sorted(p.name for p in BASELINE_DIR.glob("*.csv"))
    if metric in PREFIXED:
        return [n for n in names if n.startswith(f"{metric}.")]
    return [n for n in names if not n.startswith(tuple(f"{m}." for m in PREFIXED))]


def default_baseline_path(model: str, mode: str, metric: str = "centered_bertscore") -> Path:
    """The shipped baseline of ``metric`` for ``model`` (a resolved model name) under centering ``mode``,
    or a ``ValueError`` that says how to make one."""
    path = BASELINE_DIR / baseline_name(metric, model, mode)
    if not path.is_file():
        shipped = ", ".join(shipped_baselines(metric)) or "none"
        raise ValueError(
            f"rescale_with_baseline=True: no baseline ships for model {model!r} with centering={mode!r} "
            f"for {metric} (shipped for it: {shipped}); make one with {fit_command(metric, mode)} "
            "and pass baseline_path=OUT.csv"
        )
    return path


def settings_key(hashcode: str) -> str:
    """The settings a score was computed under, for matching a baseline to a call: its
    ``hashcode`` without the versions and the :data:`UNKEYED` fields (the model, the layer, IDF,
    centering and its statistic's digest, the token limit and the metric's own parameters stay)."""
    head = hashcode.rsplit("_version=", 1)[0]
    return re.sub(rf"_(?:{'|'.join(UNKEYED)})=[^_]*", "", head)


def _differences(fitted: str, call: str) -> str:
    """The ``_``-separated fields of two settings keys that differ, for an error message."""
    a, b = fitted.split("_"), call.split("_")
    only_file = [f for f in a if f not in b]
    only_call = [f for f in b if f not in a]
    return f"the file has {'_'.join(only_file) or '-'}, this call {'_'.join(only_call) or '-'}"


def read_baseline(
    path: str | os.PathLike,
    layer: int,
    columns: tuple[str, ...] = HEADER[1:],
    *,
    settings: str | None = None,
) -> torch.Tensor:
    """The baseline of ``layer`` from a ``LAYER,<columns>[,SETTINGS]`` file, float64, one value per column.

    The whole file is checked first (a short row would otherwise apply P's baseline to R and F):
    UTF-8, the header ``LAYER,<columns>`` (``LAYER,P,R,F`` by default, bert-score's), optionally
    followed by ``SETTINGS``, at least one row, as many fields per row as the header, an integer
    layer >= -1 (-1: sentence vectors) given once, and finite numbers in (-1, :data:`MAX_SIMILARITY_BASELINE`] for a similarity (a
    baseline of 1 or more makes (s - b) / (1 - b) meaningless, one of -1 or less is below the range
    of the scores it would be the mean of, and one far below it maps every score to about 1) or
    >= :data:`MIN_DISTANCE_BASELINE` for a distance (d / b).
    A row that csv cannot read (a field over its limit of 131,072 characters) is a ``ValueError`` too.
    With ``settings`` (a :func:`settings_key`) and a ``SETTINGS`` column, the row of ``layer`` must
    have been fitted under the same settings. Every error names ``baseline_path``, the file, the
    line and the field."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"baseline_path must be a path to a LAYER,{','.join(columns)} csv file, got {type(path).__name__}"
        )
    where = f"baseline_path={str(path)!r}"
    if not os.path.isfile(path):
        raise ValueError(f"{where} is not a file")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            rows = []
            try:
                rows.extend(reader)
            except csv.Error as err:  # a field over csv's limit (131,072 characters), a NUL byte, ...
                raise ValueError(f"{where}, line {reader.line_num}: not a baseline csv row ({err})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{where} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    header = ("LAYER", *columns)
    given = tuple(cell.strip() for cell in rows[0]) if rows else ()
    if given not in (header, (*header, SETTINGS)):
        expected = ",".join(header)
        what = (
            "bert-score's format" if header == HEADER else f"this metric's scores; {','.join(HEADER)} is bert-score's"
        )
        found = f" (found {','.join(given)}: a baseline of another metric or variant?)" if given else ""
        raise ValueError(
            f"{where}, line 1: the header must be {expected}[,{SETTINGS}] ({what}){found}; fit a baseline for "
            "this metric and its settings with `moverkit fit-baseline --metric ...`"
        )
    width = len(given)
    table = {}
    for number, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != width:
            raise ValueError(f"{where}, line {number}: {len(row)} field(s) {row}, expected {width} ({','.join(given)})")
        table_row = _read_row(where, number, row, columns, table)
        table[table_row[0]] = table_row[1:]
    if not table:
        raise ValueError(f"{where} has a header but no row")
    if layer not in table:
        layers = ", ".join(str(k) for k in sorted(table))
        raise ValueError(
            f"{where} has no row for layer {layer} (it has layers {layers}); fit one with `moverkit fit-baseline --layers {layer}`"
        )
    values, fitted = table[layer]
    if settings is not None and fitted is not None and fitted != settings:
        raise ValueError(
            f"{where}: the baseline of layer {layer} was fitted under other settings than this call's "
            f"({_differences(fitted, settings)}); rescaling with it would be wrong. Fit one under this call's "
            f"settings with `moverkit fit-baseline` (--metric, --centering, --layers, --arg KEY=VALUE)"
        )
    return torch.tensor(values, dtype=torch.float64)


def _read_row(where: str, number: int, row: list[str], columns: tuple[str, ...], table: dict):
    """``(layer, values, settings or None)`` of one checked row."""
    try:
        k = int(row[0])
    except ValueError:
        raise ValueError(f"{where}, line {number}, field LAYER: {row[0]!r} is not an integer") from None
    if k < SENTENCE_LAYER:
        raise ValueError(f"{where}, line {number}, field LAYER: {k} is below -1 (-1: sentence vectors)")
    if k in table:
        raise ValueError(f"{where}, line {number}, field LAYER: layer {k} is given twice")
    values = []
    for name, cell in zip(columns, row[1:]):
        try:
            value = float(cell)
        except ValueError:
            raise ValueError(f"{where}, line {number}, field {name}: {cell!r} is not a number") from None
        if name in DISTANCE_COLUMNS:
            if not math.isfinite(value) or value < MIN_DISTANCE_BASELINE:
                raise ValueError(
                    f"{where}, line {number}, field {name}: {cell} is not a finite number >= "
                    f"{MIN_DISTANCE_BASELINE:g} (a distance's baseline, the mean distance of unrelated pairs)"
                )
        elif not math.isfinite(value) or not -1 < value <= MAX_SIMILARITY_BASELINE:
            raise ValueError(
                f"{where}, line {number}, field {name}: {cell} is not a finite number in (-1, "
                f"{MAX_SIMILARITY_BASELINE:g}] (a similarity's baseline, the mean similarity of unrelated pairs; "
                "nearer 1, (s - b) / (1 - b) would blow the scores up)"
            )
        values.append(value)
    settings = row[len(columns) + 1].strip() if len(row) > len(columns) + 1 else None
    return k, values, settings


def check_rescaling(metric: str, rescale_with_baseline, baseline_path, *, lang: str, centering) -> bool:
    """``rescale_with_baseline``, checked with ``baseline_path`` before anything is encoded.

    Without ``baseline_path`` the shipped baselines cannot hold, and the call is refused, for
    non-English text (``lang``, checked: they were fitted on English sentences) and for
    ``centering="corpus"`` with the user's own statistic (they were fitted under the shipped one).
    ``centering`` is the call's :class:`~moverkit._core.centering.Centering`."""
    if not isinstance(rescale_with_baseline, bool):
        raise TypeError(f"rescale_with_baseline must be True or False, got {rescale_with_baseline!r}")
    if baseline_path is not None and not isinstance(baseline_path, (str, os.PathLike)):
        raise TypeError(f"baseline_path must be a path to a baseline csv file, got {type(baseline_path).__name__}")
    if not rescale_with_baseline or baseline_path is not None:
        return rescale_with_baseline
    if not is_english(lang):
        raise ValueError(
            f"rescale_with_baseline=True with lang={lang!r}: the shipped baselines were fitted on English "
            f"sentences (WMT17 to-English) and do not hold for other languages; pass baseline_path= a "
            f"baseline fitted on text of your language with {fit_command(metric, centering.mode)}"
        )
    if centering.mode == "corpus" and centering.stats is not None:
        raise ValueError(
            "rescale_with_baseline=True with your own centering_stats needs a baseline_path fitted under "
            "that statistic (the shipped baseline of centering='corpus' holds for the shipped statistic only): "
            f"{fit_command(metric, 'corpus')} with --centering-stats STATS"
        )
    return True


def load_baseline(
    metric: str,
    outputs,
    *,
    model: str,
    layer: int,
    centering,
    lang: str,
    baseline_path,
    hashcode: str,
) -> torch.Tensor:
    """The baseline that rescales one call (checked by :func:`check_rescaling`): ``baseline_path``'s
    row of ``layer``, or that of the shipped file of ``metric``, ``model`` and the mode of
    ``centering`` (:func:`default_baseline_path`), checked against the call's settings (from its
    unrescaled ``hashcode``) where the file records them."""
    check_rescaling(metric, True, baseline_path, lang=lang, centering=centering)
    if baseline_path is None:
        baseline_path = default_baseline_path(model, centering.mode, metric)
    return read_baseline(baseline_path, layer, score_columns(outputs), settings=settings_key(hashcode))


def apply_baseline(
    scores: torch.Tensor, metric: str, outputs, *, encoder, centering, lang: str, baseline_path, hashcode: str
) -> tuple[torch.Tensor, str]:
    """``scores`` (one row per output of ``outputs``) rescaled by the baseline of this call
    (:func:`load_baseline` for ``encoder``'s model and layer, then :func:`rescale`), and the
    baseline's tag for the hashcode (:func:`baseline_tag`): what every metric's
    ``rescale_with_baseline=True`` does."""
    values = load_baseline(
        metric,
        outputs,
        model=encoder.name,
        layer=encoder.layer,
        centering=centering,
        lang=lang,
        baseline_path=baseline_path,
        hashcode=hashcode,
    )
    return rescale(scores, values, score_columns(outputs)), baseline_tag(values)


def rescale(scores: torch.Tensor, baseline: torch.Tensor, columns: tuple[str, ...] = HEADER[1:]) -> torch.Tensor:
    """Each row of ``scores`` (one per column, e.g. (3, n) precision, recall, F1; or (n,) for one
    column) rescaled by its baseline: ``(s - b) / (1 - b)`` for a similarity, ``d / b`` for a
    distance (:data:`DISTANCE_COLUMNS`). A text against itself stays exactly 1 (or 0)."""
    flat = scores.dim() == 1
    rows = scores[None] if flat else scores
    b = baseline.to(device=rows.device, dtype=rows.dtype)[:, None]
    distance = torch.tensor([c in DISTANCE_COLUMNS for c in columns], device=rows.device)[:, None]
    out = torch.where(distance, rows / b, (rows - b) / (1 - b))
    return out[0] if flat else out


def baseline_tag(baseline: torch.Tensor) -> str:
    """The baseline's values, for the hashcode."""
    return ",".join(f"{v:.6f}" for v in baseline.tolist())


def baseline_csv(rows, columns: tuple[str, ...] = HEADER[1:]) -> str:
    """``(layer, *values)`` rows, or ``(layer, *values, settings)`` rows (a :func:`settings_key`
    each), as ``LAYER,<columns>[,SETTINGS]`` CSV text (bert-score's ``LAYER,P,R,F`` by default)."""
    rows = [tuple(row) for row in rows]
    keyed = any(len(row) == len(columns) + 2 for row in rows)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("LAYER", *columns, *((SETTINGS,) if keyed else ())))
    for layer, *values in rows:
        settings = values[len(columns) :]
        writer.writerow([layer, *(f"{v:.10f}" for v in values[: len(columns)]), *settings])
    return out.getvalue()
