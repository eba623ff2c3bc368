"""What one press of the Score button computes, free of Gradio: the two text boxes read as pairs
(one text per line, :func:`moverkit.formats.lines.split_lines`) within the bounds of one press, the
module run on them, and its scores as a summary and a table."""

from __future__ import annotations

import math
from dataclasses import dataclass

from moverkit.facts.specs import MetricSpec
from moverkit.formats.lines import split_lines

REFERENCE_SEPARATOR = "|||"
"""Separates the references of one prediction on a line of the references box."""

_TABLE_COLUMNS = ("#", "prediction", "references")

MAX_PREDICTIONS = 100
"""A page scores at most this many predictions at a time (``moverkit score`` is for files)."""

MAX_REFERENCES = 16
"""At most this many references (separated by ``|||``) for one prediction."""

MAX_TEXT_CHARS = 20_000
"""At most this many characters in one prediction or reference: sbertscore's sentence splitter
(pysbd) takes time quadratic in a text's length (here 0.46 s for 20,000 characters, 1.6 s for
40,000; 7.9 s for 100,000 in issue 12), and the token-level metrics read only the first 512
tokens (about 2,500 characters of English) of a text anyway."""

MAX_TOTAL_CHARS = 200_000
"""At most this many characters in the two boxes together: :data:`MAX_TEXT_CHARS` alone would let
one press hold 100 x 17 texts of 20,000 characters (minutes of sentence splitting); 200,000
characters are 100 predictions with 16 references each of about 120 characters."""

USER_ERRORS = (ValueError, TypeError, OSError)
"""What a module raises for bad input (OSError: a model path or id that does not load); shown in
the page. Anything else is a bug and keeps its traceback in the server log."""


@dataclass(frozen=True)
class Scored:
    """What one press of the button computed: per-prediction scores, their means, the hashcode
    and the alignments; free of Gradio, so it can be tested without a server."""

    predictions: list[str]
    references: list[list[str]]
    scores: dict[str, list[float]]
    hashcode: str
    alignments: list[dict]

    def means(self) -> dict[str, float]:
        return {key: math.fsum(values) / len(values) for key, values in self.scores.items()}

    def summary(self, spec: MetricSpec | None = None) -> str:
        """Markdown: a heading, a table of the mean of each score, one row each (its label carries
        the metric's direction, :func:`score_header`; the column says over how many predictions:
        a phone shows two columns whole), and the reference points of ``spec``
        (:func:`reference_points`) where its main output is among the scores."""
        n = len(self.predictions)
        column = "the prediction" if n == 1 else f"mean of {n} predictions"
        lines = [
            "### Score" if n == 1 else "### Mean scores",
            "",
            f"| score | {column} |",
            "|---|---|",
            *(f"| {score_header(key, spec)} | {value:.4f} |" for key, value in self.means().items()),
        ]
        if spec is not None and spec.main in self.scores:
            lines += ["", reference_points(spec)]
        return "\n".join(lines)

    def table(self, spec: MetricSpec | None = None):
        """One row per prediction: its number, every score, its text and its references. Scores
        are rounded to 4 decimals as in the summary (the hashcode and the module give every digit)
        and come before the texts, so that on a narrow screen they are in view and the long texts
        scroll; with ``spec``, their headers carry the metric's direction (:func:`score_header`)."""
        import pandas as pd

        numbers = list(range(1, len(self.predictions) + 1))
        references = [f" {REFERENCE_SEPARATOR} ".join(refs) for refs in self.references]
        rounded = {score_header(key, spec): [round(v, 4) for v in values] for key, values in self.scores.items()}
        number, prediction, reference = _TABLE_COLUMNS
        return pd.DataFrame({number: numbers, **rounded, prediction: self.predictions, reference: references})


def direction(spec: MetricSpec) -> str:
    """``"higher is closer"`` or ``"lower is closer"``: which way a score of the metric points
    (``spec.higher_is_better``), said of the two texts it compares."""
    return "higher is closer" if spec.higher_is_better else "lower is closer"


def score_header(key: str, spec: MetricSpec | None) -> str:
    """The header of the score ``key``: ``"f1 (higher is closer)"``; the bare key without a spec."""
    return key if spec is None else f"{key} ({direction(spec)})"


def reference_points(spec: MetricSpec) -> str:
    """One Markdown line of what the main output scores for texts one knows (the embedded model,
    default settings): identical texts, and where the spec has them, a machine translation
    against its reference and unrelated texts; then the documented range."""
    points = [f"identical texts **{_number(spec.identical)}**"]
    for name, label in (("translation", "a machine translation"), ("unrelated", "unrelated texts")):
        value = getattr(spec, name, None)
        if value is not None:
            points.append(f"{label} about **{_number(value)}**")
    points.append(f"range {_number(spec.low)} to {_number(spec.high)}")
    return f"**To compare** ({spec.main}, embedded model, default settings): " + "; ".join(points) + "."


def _number(value: float) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:g}"


def empty_table():
    """The score table before any score (or after an error): its text columns, no row. (Gradio's
    own empty table is headed "1 2 3".)"""
    import pandas as pd

    return pd.DataFrame(columns=list(_TABLE_COLUMNS))


def parse_pairs(predictions_text: str, references_text: str) -> tuple[list[str], list[str] | list[list[str]]]:
    """The two text boxes as ``compute`` inputs: one prediction per line, one reference per line
    (lines as ``moverkit score`` reads them: :func:`moverkit.formats.lines.split_lines`).

    A reference line holding ``|||`` gives that prediction several references; then every line is
    passed as a list (evaluate takes one reference layout per call). Line counts are left for the
    module to check, so its own error message reaches the page. What one press may hold is
    bounded (:data:`MAX_TOTAL_CHARS`, :data:`MAX_PREDICTIONS`, :data:`MAX_REFERENCES`,
    :data:`MAX_TEXT_CHARS`): past a bound, an error names it.
    """
    predictions_text, references_text = predictions_text or "", references_text or ""
    total = len(predictions_text) + len(references_text)
    if total > MAX_TOTAL_CHARS:
        raise ValueError(
            f"this page scores at most {MAX_TOTAL_CHARS:,} characters at a time, got {total:,}; "
            "use 'moverkit score' for files"
        )
    predictions, lines = split_lines(predictions_text), split_lines(references_text)
    if not any(p.strip() for p in predictions):
        raise ValueError("type at least one prediction (one per line)")
    if len(predictions) > MAX_PREDICTIONS:
        raise ValueError(
            f"this page scores at most {MAX_PREDICTIONS} predictions at a time, got {len(predictions)}; "
            "use 'moverkit score' for files"
        )
    grouped = [[part.strip() for part in line.split(REFERENCE_SEPARATOR)] for line in lines]
    for i, references in enumerate(grouped, start=1):
        if len(references) > MAX_REFERENCES:
            raise ValueError(
                f"line {i} of the references has {len(references)} references; this page takes at most "
                f"{MAX_REFERENCES} per prediction"
            )
    named = [(f"prediction {i}", text) for i, text in enumerate(predictions, start=1)]
    named += [(f"line {i} of the references", text) for i, refs in enumerate(grouped, start=1) for text in refs]
    for name, text in named:
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(
                f"{name} has a text of {len(text):,} characters; this page takes at most {MAX_TEXT_CHARS:,} "
                "per text; use 'moverkit score' for longer texts"
            )
    if any(REFERENCE_SEPARATOR in line for line in lines):
        return predictions, grouped
    return predictions, lines


def score(module, predictions_text: str, references_text: str, kwargs: dict) -> Scored:
    """Run the module on the boxes' pairs with ``return_alignment=True``.

    Per-prediction scores are the result's lists of numbers, one per prediction (so a metric
    whose output key depends on its arguments needs no configuration here). ``batch`` centering
    over fewer than :data:`MIN_BATCH_TEXTS` distinct texts warns (the metrics' own ``UserWarning``,
    which the page shows).
    """
    predictions, references = parse_pairs(predictions_text, references_text)
    result = module.compute(predictions=predictions, references=references, return_alignment=True, **kwargs)
    scores = {
        key: [float(v) for v in values]
        for key, values in result.items()
        if key != "alignment"
        and isinstance(values, list)
        and len(values) == len(predictions)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    }
    grouped = [refs if isinstance(refs, list) else [refs] for refs in references]
    return Scored(predictions, grouped, scores, result["hashcode"], result["alignment"])
