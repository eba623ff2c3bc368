"""The Gradio demo of every moverkit metric: one builder, configured per metric by each Space's ``app.py``.

    from moverkit.demo import Heatmap, build_demo, centering_params, layer_param, model_param

    demo = build_demo(
        "centered_bertscore",
        title="Centered BERTScore",
        params=[model_param(), layer_param(), *centering_params()],
        heatmaps=[Heatmap("similarity", "cosine similarity")],
        examples=[("the cat sat on the mat", "a cat sat on the mat")],
    )
    demo.launch()

The page takes one prediction per line and one reference per line (several references for one
prediction separated by ``|||``), the metric's main arguments, and shows the score of every
prediction, the hashcode and a heatmap of the alignment the module returns with
``return_alignment=True`` (similarity matrix or transport plan, tokens on both axes). A bad input
shows the module's own error message in the page, and clears the results of the previous press.

A page serves visitors, so it bounds what one press may cost (:data:`MAX_PREDICTIONS`,
:data:`MAX_REFERENCES`, :data:`MAX_TEXT_CHARS`, :data:`MAX_TOTAL_CHARS`), what one upload may
weigh (:data:`MAX_UPLOAD_BYTES`, and the statistic file is read as hostile:
``CenteringStats.load``), and which models its model box loads (:func:`allowed_models`: on a
published Space or a page that other machines reach, only the embedded model unless the
``MOVERKIT_DEMO_MODELS`` variable lists more).

Gradio (the ``demo`` extra) and matplotlib are imported only when a demo is built or drawn, and
its telemetry is off: no request leaves the machine that serves the page.
"""

from __future__ import annotations

import functools
import inspect
import ipaddress
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._core.centering import MAX_STATS_FILE_BYTES, MIN_BATCH_TEXTS
from .lines import split_lines

REFERENCE_SEPARATOR = "|||"
"""Separates the references of one prediction on a line of the references box."""

_HOW_TO = "One prediction per line; one reference per line (several for one prediction: separate them by `|||`)."

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

MAX_UPLOAD_BYTES = MAX_STATS_FILE_BYTES
"""The largest upload a page takes (1 MiB): its one upload is a corpus statistic, and no statistic
is larger (``moverkit._core.centering.MAX_STATS_FILE_BYTES``; a real one of a 4,096-dim model is
34 KB). Checked before the file is read (``Param.convert``), and passed to Gradio as
``max_file_size`` by the page's ``launch``, so that a larger upload is cut off while it arrives
instead of filling the server's disk first."""

DEMO_MODELS_VARIABLE = "MOVERKIT_DEMO_MODELS"
"""The environment variable listing the models a page offers besides the embedded one
(comma-separated Hugging Face ids or local paths, exactly as typed; ``*`` for any model)."""

USER_ERRORS = (ValueError, TypeError, OSError)
"""What a module raises for bad input (OSError: a model path or id that does not load); shown in
the page. Anything else is a bug and keeps its traceback in the server log."""

EXAMPLES = (
    (
        "the cat sat on the mat\nhello there, general kenobi\nthe train to paris leaves at noon\n"
        "she plays the piano every evening\nwe ordered two pizzas and a salad",
        "a cat was sitting on the mat\nhello there general kenobi\nthe paris train departs at midday\n"
        "every evening she practises piano\nthey brought us a salad with two pizzas",
    ),
    (
        "The weather is cold today.\nThe meeting was moved to Friday.\nHe forgot his keys at home.\n"
        "The museum opens at nine.",
        "It is freezing today. ||| Today is a cold day.\n"
        "The meeting is now on Friday. ||| They postponed the meeting until Friday.\n"
        "He left his keys at home. ||| His keys were still lying on the kitchen table.\n"
        "The museum opens at 9 a.m. ||| Doors open at nine o'clock.",
    ),
    (  # WMT17 cs-en (newstest2017 segments 102, 188, 86, 405, 653): system outputs and their references
        "farmers reaped 7.2 million tons of grain .\nin nigeria , polio cases have occurred again .\n"
        "the bankruptcy case back , advertising cost more , maybe in other places .\n"
        "is this the consequence of some power struggle ?\nsymptoms and prognosis may differ materially .",
        "farmers are expected to harvest 7.2 million tonnes of grain .\npolio cases have resurfaced in nigeria .\n"
        "the bailiff returned the case , the billboards were still there , maybe in other locations .\n"
        "so is this the fall-out from some kind of power struggle ?\nsymptoms and prognosis can vary widely .",
    ),
)
"""(predictions, references) box contents for the token-level metrics: paraphrases (one pair
identical but for a comma), several references per prediction, and real machine translations
(lowercased and tokenized, as the MoverScore release reads WMT17). Each example holds at least
:data:`MIN_BATCH_TEXTS` distinct texts, so that its scores (with the default ``batch`` centering
or IDF weights) come without a warning that the example is too small."""

_KINDS = ("text", "words", "int", "float", "choice", "bool", "file", "model")
_UNSET = ""  # a dropdown's first entry (Param.unset): leave the argument to the module (its default is None)
_YES_NO = {"yes": True, "no": False}


@dataclass(frozen=True)
class Param:
    """One ``compute`` argument of the module, shown as an input of the page.

    ``kind`` picks the widget: ``text`` (a box; blank leaves the module's default), ``words`` (a
    box of words separated by commas or spaces, passed as a list), ``int`` and ``float`` (a box
    parsed as a number: blank leaves the default, and ``inf`` is a float; Gradio's number widget
    cannot be blank, it sends 0), ``choice`` (a dropdown of ``choices``), ``bool`` (a checkbox),
    ``file`` (an upload of at most :data:`MAX_UPLOAD_BYTES`, passed as a path) or ``model`` (a
    box of a model id or path, which must be one the page offers: :func:`allowed_models`). The
    initial value is the default of the module's ``_compute`` signature, so the page cannot drift
    from the module; where that default is None (the module resolves it, e.g. from a preset or the
    model), ``unset`` says which value blank gives (e.g. :func:`preset_default`'s
    ``"1/(1+wmd) (v2)"``): a box shows it greyed while blank, a dropdown as its first entry.
    :func:`build_demo` refuses a None default without it, so that every setting on the page shows
    the value it will use.
    """

    name: str
    label: str
    kind: str = "float"
    choices: tuple = ()
    info: str | None = None
    unset: str = ""

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"Param {self.name!r}: kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        if (self.kind == "choice") != bool(self.choices):
            raise ValueError(f"Param {self.name!r}: choices go with kind='choice' and only with it")

    def component(self, gr, default):
        """The Gradio input for this argument, set to the module's ``default``."""
        common = {"label": self.label, "elem_id": f"param-{self.name}", "min_width": 180}
        if self.kind == "file":
            return gr.File(value=default, type="filepath", height=150, **common)
        common["info"] = _models_info(allowed_models()) if self.kind == "model" else self.info
        if self.kind in ("text", "words", "int", "float", "model"):
            value = " ".join(default) if self.kind == "words" and default else default
            return gr.Textbox(value="" if value is None else str(value), placeholder=self.unset or None, **common)
        if self.kind == "bool" and default is not None:
            return gr.Checkbox(value=bool(default), **common)
        choices = list(_YES_NO) if self.kind == "bool" else list(self.choices)
        if default is None:
            return gr.Dropdown(choices=[(self.unset, _UNSET), *((c, c) for c in choices)], value=_UNSET, **common)
        return gr.Dropdown(choices=choices, value=default, **common)

    def convert(self, value, *, server_name: str | None = None, share: bool | None = None):
        """The page's value as the ``compute`` argument; ``None`` leaves the module's default.
        ``server_name`` and ``share``: where the page is served, which sets the models it offers
        (:func:`allowed_models`)."""
        if isinstance(value, str) and self.kind != "choice":
            value = value.strip()
        if value is None or value == _UNSET:
            return None
        if self.kind == "words":
            return value.replace(",", " ").split() or None
        if self.kind in ("int", "float"):
            return self._number(value)
        if self.kind == "model":
            return _offered_model(value, server_name, share)
        if self.kind == "bool" and isinstance(value, str):
            return _YES_NO[value]
        if self.kind == "file":
            self._check_upload(value)
        return value

    def _check_upload(self, path) -> None:
        """An upload of at most :data:`MAX_UPLOAD_BYTES`, checked before anything reads it (a
        path that does not open is left to the module, which names it)."""
        try:
            size = os.path.getsize(path)
        except (OSError, TypeError, ValueError):
            return
        if size > MAX_UPLOAD_BYTES:
            raise ValueError(
                f"{self.name}: the uploaded file {Path(path).name!r} has {size:,} bytes; this page takes at most "
                f"{MAX_UPLOAD_BYTES:,} (a corpus statistic of a 4,096-dim model has about 34 KB)"
            )

    def _number(self, value) -> int | float:
        kind = int if self.kind == "int" else float
        try:
            number = kind(value)
        except (TypeError, ValueError):
            expected = "an integer" if kind is int else "a number"
            raise ValueError(f"{self.name} must be {expected}, got {value!r}") from None
        if kind is int and isinstance(value, float) and value != number:
            raise ValueError(f"{self.name} must be an integer, got {value!r}")
        return number


_EMBEDDED = "all-MiniLM-L6-v2"


def model_param() -> Param:
    """The encoder ``model_type``: a Hugging Face id or a local folder that the page offers
    (:func:`allowed_models`; blank: the embedded all-MiniLM-L6-v2)."""
    return Param("model_type", "Model (Hugging Face id or local path)", "model", unset=_EMBEDDED)


def allowed_models(server_name: str | None = None, share: bool | None = None) -> tuple[str, ...] | None:
    """The models a page's model box takes besides blank and the embedded model's id; None: any.

    Read from ``MOVERKIT_DEMO_MODELS`` (comma-separated ids or paths; ``*`` for any) at each
    press. Unset, only a page that no other machine reaches takes any model: one served on
    loopback (:func:`beyond_loopback` of its ``server_name`` and ``share``, the arguments of
    ``launch``), and not a published Space (``SPACE_ID`` set, as the Hub sets it). Any other takes
    only the embedded one: its visitors must not make the server load its own folders or download
    any model of the Hub (each loaded model stays in memory). ``demo.launch(server_name="0.0.0.0")``
    of one's own demo on a shared network is such a page too."""
    listed = os.environ.get(DEMO_MODELS_VARIABLE)
    if listed is None:
        return () if os.environ.get("SPACE_ID") or beyond_loopback(server_name, share) else None
    models = tuple(model.strip() for model in listed.split(",") if model.strip())
    return None if "*" in models else models


def beyond_loopback(server_name: str | None = None, share: bool | None = None) -> bool:
    """Whether a page launched with ``server_name`` and ``share`` (``Blocks.launch``'s arguments)
    can be reached from another machine. None stands for Gradio's own default: the
    ``GRADIO_SERVER_NAME`` variable, else ``127.0.0.1``; ``GRADIO_SHARE=true``. A share link
    reaches the page from anywhere; else it is reached from elsewhere unless its address is a
    loopback one (``localhost``, ``127.0.0.0/8``, ``::1``). Any other name (``0.0.0.0``, ``::``,
    an interface's address, a host name, ``GRADIO_SERVER_NAME`` set but empty) binds where other
    machines connect. An empty ``server_name`` is Gradio's default, as None."""
    if share is None:
        share = os.environ.get("GRADIO_SHARE", "").lower() == "true"
    if share:
        return True
    host = server_name or os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1")
    host = host.strip()
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return True


def _offered_model(model: str, server_name: str | None = None, share: bool | None = None) -> str:
    """``model`` if the page offers it, else one same error for any value (nothing is looked up
    before this check, so the page does not tell whether a path exists on the server)."""
    from moverkit._core.encoder import DEFAULT_MODEL

    offered = allowed_models(server_name, share)
    if offered is None or model in (DEFAULT_MODEL, *offered):
        return model
    raise ValueError(f"this page does not offer the model {model!r}; {_models_info(offered)}")


def _models_info(offered: tuple[str, ...] | None) -> str:
    if offered is None:
        return f"blank: the embedded {_EMBEDDED}"
    if not offered:
        return f"this page offers only the embedded {_EMBEDDED}: leave the box blank"
    return f"blank: the embedded {_EMBEDDED}; also offered: {', '.join(offered)}"


def layer_param(unset: str | None = None, info: str | None = None) -> Param:
    """``num_layers``, the layer whose token vectors are compared; blank (``unset``) gives, unless
    told otherwise, the tuned layer of the model (:data:`moverkit._core.encoder.MODEL_LAYERS`:
    the embedded model's is its last, 6th), else its last layer."""
    if unset is None:
        from moverkit._core.encoder import DEFAULT_MODEL, MODEL_LAYERS

        unset = str(MODEL_LAYERS[DEFAULT_MODEL])
        info = f"blank: the model's tuned layer ({unset} for the embedded one), else its last"
    return Param("num_layers", "Layer", "int", info=info, unset=unset)


def centering_params(modes: Sequence[str] | None = None, fitted_by: str = "moverkit fit-centering") -> list[Param]:
    """The centering mode (Chen et al., 2020, Section 5) and, for ``corpus``, the statistic
    (a ``.npz`` file saved by ``fitted_by``)."""
    from moverkit._core import CENTERING_MODES

    info = f"subtract a mean vector first; corpus: upload a .npz from {fitted_by}"
    return [
        Param("centering", "Centering", "choice", tuple(modes or CENTERING_MODES), info=info),
        Param("centering_stats", "Corpus statistic (.npz)", "file"),  # a short label: it sits over the drop area
    ]


def idf_param() -> Param:
    """``idf``: IDF token weights fitted on the references."""
    return Param("idf", "IDF weights", "bool", info="weight tokens by their IDF over the references")


def preset_default(setting: str, presets: Mapping[str, Mapping], key: str, default: str, info: str = "") -> dict:
    """``Param`` keywords for ``key`` when the module takes it from the preset named by
    ``setting`` (whose own default is ``default``): ``unset``, that preset's value, short enough
    for a dropdown (``"1/(1+wmd) (v2)"``); ``info``, ``info`` and where it comes from, with the
    other presets' values where they differ (``"from version (v1: 1-wmd)"``). Booleans show as
    yes/no, an empty list as "none"."""
    value = presets[default][key]
    others = [f"{name}: {_shown(p[key])}" for name, p in presets.items() if name != default and p[key] != value]
    source = f"from {setting}" + (f" ({', '.join(others)})" if others else "")
    return {"unset": f"{_shown(value)} ({default})", "info": f"{info}; {source}" if info else source}


def _shown(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (tuple, list, frozenset, set)):
        return " ".join(value) or "none"
    return str(value)


@dataclass(frozen=True)
class Heatmap:
    """Where the module's alignment (one dict per prediction, for its best reference) keeps the
    matrix to draw and the labels of its rows and columns."""

    matrix: str
    title: str
    rows: str = "prediction_tokens"
    columns: str = "reference_tokens"
    row_label: str = "prediction"
    column_label: str = "reference"
    colormap: str = "viridis"
    value_format: str = ".2f"


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

    def summary(self) -> str:
        """A Markdown table of the mean of each score."""
        n = len(self.predictions)
        head = "| | " + " | ".join(self.scores) + " |\n|---|" + "---|" * len(self.scores) + "\n"
        label = "score" if n == 1 else f"mean of {n}"
        return head + f"| {label} | " + " | ".join(f"{v:.4f}" for v in self.means().values()) + " |"

    def table(self):
        """One row per prediction: its number, every score, its text and its references. Scores
        are rounded to 4 decimals as in the summary (the hashcode and the module give every digit)
        and come before the texts, so that on a narrow screen they are in view and the long texts
        scroll."""
        import pandas as pd

        numbers = list(range(1, len(self.predictions) + 1))
        references = [f" {REFERENCE_SEPARATOR} ".join(refs) for refs in self.references]
        rounded = {key: [round(v, 4) for v in values] for key, values in self.scores.items()}
        number, prediction, reference = _TABLE_COLUMNS
        return pd.DataFrame({number: numbers, **rounded, prediction: self.predictions, reference: references})


def empty_table():
    """The score table before any score (or after an error): its text columns, no row. (Gradio's
    own empty table is headed "1 2 3".)"""
    import pandas as pd

    return pd.DataFrame(columns=list(_TABLE_COLUMNS))


def parse_pairs(predictions_text: str, references_text: str) -> tuple[list[str], list[str] | list[list[str]]]:
    """The two text boxes as ``compute`` inputs: one prediction per line, one reference per line
    (lines as ``moverkit score`` reads them: :func:`moverkit.lines.split_lines`).

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


LABEL_CHARS = 30
"""Axis labels (tokens, sentences) longer than this end in an ellipsis."""

_CHAR = 0.085  # inches of one character of a 9 pt tick label (0.6 em, and some room for wide letters)
_CELL = 0.45  # inches of one heatmap cell, at least, while the plot fits
_PLOT = (12.0, 10.0)  # the largest width and height of the matrix itself, in inches
_TICK = 0.2  # inches between two labels, at least (a 9 pt line is 0.125 in)

_HEATMAP_CSS = (
    "#heatmap .matplotlib {overflow-x: auto; align-items: flex-start}"
    " #heatmap .matplotlib img {max-width: none; width: auto; margin: 0 auto}"
)
"""The heatmap keeps its drawn size (9 pt labels) and scrolls sideways where the screen is
narrower (a phone), instead of shrinking its labels out of legibility."""


def heatmap_figure(alignment: dict, heatmap: Heatmap, title: str):
    """A matplotlib figure of one alignment matrix: rows are the prediction's tokens (or
    sentences), columns the reference's; when the matrix is small, every cell that does not
    round to zero carries its value, in black or white as the cell's luminance asks.

    Labels stay readable: longer than :data:`LABEL_CHARS` they end in "…"; column labels are
    horizontal while a cell can be as wide as the longest, else at 45°; the figure grows with the
    number of labels (up to a 12 x 10 inch matrix), and past that only every k-th label is shown,
    so that none overlaps."""
    import numpy as np
    from matplotlib.figure import Figure

    rows = [_shorten(t, LABEL_CHARS) for t in alignment[heatmap.rows]]
    columns = [_shorten(t, LABEL_CHARS) for t in alignment[heatmap.columns]]
    matrix = np.asarray(alignment[heatmap.matrix], dtype=np.float64).reshape(len(rows), len(columns))
    row_chars = max((len(label) for label in rows), default=1)
    column_chars = max((len(label) for label in columns), default=1)
    flat = max(_CELL, _CHAR * column_chars + 0.2)  # a cell as wide as the longest column label
    upright = len(columns) * flat <= _PLOT[0]
    cell_width = flat if upright else min(_CELL, _PLOT[0] / max(len(columns), 1))
    cell_height = min(0.35, _PLOT[1] / max(len(rows), 1))
    label_height = 0.5 if upright else 0.71 * _CHAR * column_chars + 0.4
    width = max(5.0, _CHAR * row_chars + 0.8 + len(columns) * cell_width + 1.4)
    height = max(3.0, 0.6 + len(rows) * cell_height + label_height + 0.5)
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    if matrix.size == 0:
        ax.text(0.5, 0.5, "nothing to align: a text has no scored token", ha="center", va="center")
        ax.set_axis_off()
        return fig
    image = ax.imshow(matrix, cmap=heatmap.colormap, aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, label=heatmap.title)
    column_step = math.ceil(_TICK / cell_width)
    row_step = math.ceil(_TICK / cell_height)
    ticks = range(0, len(columns), column_step)
    if upright:
        ax.set_xticks(ticks, [columns[j] for j in ticks], fontsize=9)
    else:
        ax.set_xticks(ticks, [columns[j] for j in ticks], fontsize=9, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(0, len(rows), row_step), rows[::row_step], fontsize=9)
    ax.set_xlabel(heatmap.column_label)
    ax.set_ylabel(heatmap.row_label)
    if matrix.size <= 150:
        zero = format(0.0, heatmap.value_format)
        for (i, j), value in np.ndenumerate(matrix):
            text = format(value, heatmap.value_format)
            if text.lstrip("-") == zero:  # a blank cell reads as zero (sparse transport plans)
                continue
            red, green, blue, _ = image.cmap(image.norm(value))
            color = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    return fig


def pick_heatmap(alignment: dict, heatmaps: Sequence[Heatmap], title: str) -> Heatmap:
    """The heatmap called ``title``, or, where this alignment lacks its matrix (None), the next
    one that has it (e.g. Wordset-CKA has a similarity matrix but no transport plan)."""
    start = next((i for i, h in enumerate(heatmaps) if h.title == title), 0)
    ordered = [*heatmaps[start:], *heatmaps[:start]]
    return next((h for h in ordered if alignment.get(h.matrix) is not None), ordered[0])


def build_demo(
    metric: str,
    *,
    title: str,
    description: str = "",
    params: Sequence[Param],
    heatmaps: Sequence[Heatmap],
    examples: Sequence[tuple[str, str]],
    card: str | os.PathLike | None = None,
):
    """The ``gr.Blocks`` page of ``metric`` (a bundled moverkit module, loaded once, here):
    ``title`` and a Markdown ``description`` (one line: what the score means) on top.

    ``params`` are the inputs besides the texts (each a ``_compute`` argument: checked here, so a
    renamed argument fails at start, not on a click); ``heatmaps``, the matrices of the alignment
    one can draw (the first is drawn after scoring; with several, a switch picks); ``examples``
    are (predictions, references) box contents, the first one prefilled; ``card``, a Markdown
    file shown below the page with its YAML front matter left out (the Space's README).

    The API endpoint ``/score`` takes the two boxes and the params by their argument names and
    returns (summary, table, hashcode, prediction shown, matrix shown, heatmap). In the page, the
    button first clears the previous results, so that an error never stands above old scores.

    The page's ``launch`` bounds uploads (``max_file_size``: :data:`MAX_UPLOAD_BYTES`, unless
    given) and states in the model box the models that its address offers; each press checks the
    model against the address Gradio bound (:func:`allowed_models`). A page mounted in another
    app (``gr.mount_gradio_app``, whose ``server_name`` is ``0.0.0.0``) offers the models of a
    page beyond loopback.
    """
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import gradio as gr

    import moverkit

    module = moverkit.load(metric)
    defaults = _defaults(module, metric, params)
    with gr.Blocks(title=title, analytics_enabled=False) as demo:
        gr.Markdown(f"# {title}\n{description}\n\n{_HOW_TO}")
        with gr.Row():
            predictions_box = gr.Textbox(
                value=examples[0][0],
                label="Predictions",
                lines=4,
                elem_id="predictions",
                placeholder="one per line",
                min_width=320,  # on a narrow screen the two boxes stack, so line i of each stays paired
            )
            references_box = gr.Textbox(
                value=examples[0][1],
                label="References",
                lines=4,
                elem_id="references",
                placeholder="one per line",
                min_width=320,
            )
        with gr.Accordion("Settings", open=True), gr.Row():
            inputs = [p.component(gr, defaults[p.name]) for p in params]
        button = gr.Button("Score", variant="primary", elem_id="score-button")
        gr.Examples([list(e) for e in examples], inputs=[predictions_box, references_box], cache_examples=False)
        summary = gr.Markdown(label="mean scores", elem_id="summary")
        table = gr.Dataframe(empty_table(), label="Scores per prediction", interactive=False, elem_id="scores")
        hashcode = gr.Textbox(label="hashcode", interactive=False, buttons=["copy"], elem_id="hashcode")
        with gr.Row():
            shown = gr.Dropdown(label="Alignment of prediction", choices=[], interactive=True, elem_id="shown")
            titles = [h.title for h in heatmaps]
            matrix = gr.Radio(titles, value=titles[0], label="Matrix", visible=len(titles) > 1, elem_id="matrix")
        plot = gr.Plot(label="Alignment", elem_id="heatmap")
        gr.HTML(f"<style>{_HEATMAP_CSS}</style>", padding=False, container=False)
        alignments = gr.State([])
        if card is not None:
            with gr.Accordion("About this metric", open=False):
                gr.Markdown(_local_card(metric, Path(card)))

        def run(predictions_text, references_text, *values):
            # Where Gradio serves the page (set by launch, and by mount_gradio_app); unset before.
            served = {"server_name": getattr(demo, "server_name", None), "share": getattr(demo, "share", None)}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    kwargs = {
                        p.name: v for p, raw in zip(params, values) if (v := p.convert(raw, **served)) is not None
                    }
                    scored = score(module, predictions_text, references_text, kwargs)
                except USER_ERRORS as err:
                    raise gr.Error(str(err), print_exception=False) from err
            for message in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UserWarning)):
                gr.Warning(message)
            labels = [(f"{i + 1}. {_shorten(p, 60)}", i) for i, p in enumerate(scored.predictions)]
            return (
                scored.summary(),
                scored.table().style.format("{:.4f}", subset=list(scored.scores)),  # 0.8210, not 0.821
                scored.hashcode,
                gr.Dropdown(choices=labels, value=0),
                titles[0],
                draw(scored.alignments, 0, titles[0]),
                scored.alignments,
            )

        def clear():
            return "", empty_table(), "", gr.Dropdown(choices=[], value=None), titles[0], None, []

        def draw(aligned, index, title):
            if not aligned or index is None:
                return None
            heatmap = pick_heatmap(aligned[index], heatmaps, title)
            return heatmap_figure(aligned[index], heatmap, f"{heatmap.title}, prediction {index + 1}")

        # Named after the compute arguments, so that API callers pass them by the module's names.
        boxes = {"predictions_text": examples[0][0], "references_text": examples[0][1]}
        run.__signature__ = _signature({**boxes, **defaults})
        results = [summary, table, hashcode, shown, matrix, plot, alignments]
        button.click(clear, outputs=results, api_visibility="private", queue=False).then(
            run, inputs=[predictions_box, references_box, *inputs], outputs=results, api_name="score"
        )
        for control in (shown, matrix):
            control.input(draw, inputs=[alignments, shown, matrix], outputs=plot, api_visibility="private")
    _bound_launch(demo, [box for p, box in zip(params, inputs) if p.kind == "model"])
    return demo


def _bound_launch(demo, model_boxes) -> None:
    """Replace ``demo.launch`` by one that passes ``max_file_size=MAX_UPLOAD_BYTES`` unless told
    otherwise, and first states in ``model_boxes`` the models a page at its address offers (the
    box was built before the address was known)."""
    launch = demo.launch
    signature = inspect.signature(launch)

    @functools.wraps(launch)
    def bounded_launch(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        if "max_file_size" not in arguments:
            kwargs["max_file_size"] = MAX_UPLOAD_BYTES
        info = _models_info(allowed_models(arguments.get("server_name"), arguments.get("share")))
        for box in model_boxes:
            box.info = info
        return launch(*args, **kwargs)

    demo.launch = bounded_launch


def _defaults(module, metric: str, params: Sequence[Param]) -> dict:
    """The module's default of every parameter; an argument it does not take, a default of None
    whose value the page does not state (``Param.unset``; an upload is simply empty), or a
    dropdown without the module's default among its choices, fails here."""
    signature = inspect.signature(module._compute).parameters
    missing = [p.name for p in params if p.name not in signature]
    if missing:
        raise ValueError(f"{metric} takes no argument {', '.join(missing)}; it takes {', '.join(signature)}")
    defaults = {p.name: signature[p.name].default for p in params}
    unstated = [p.name for p in params if defaults[p.name] is None and not p.unset and p.kind != "file"]
    if unstated:
        raise ValueError(
            f"{metric}: {', '.join(unstated)} default to None; give Param.unset, the value blank gives, "
            "so that the page shows it"
        )
    for p in params:
        if p.kind == "choice" and defaults[p.name] not in (None, *p.choices):
            raise ValueError(f"{metric}: the choices of {p.name} {p.choices} lack its default {defaults[p.name]!r}")
    return defaults


def _signature(defaults: dict) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter(name, kind, default=value) for name, value in defaults.items()])


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _local_card(metric: str, card: Path) -> str:
    """The Space README as this page shows it: front matter left out, its placeholders filled as a
    dry-run ``moverkit publish`` fills them (this checkout's repository and commit where it can
    tell, else ``OWNER/moverkit`` and zeros), so no ``{..._PLACEHOLDER}`` shows when run locally."""
    import moverkit

    from .publish import resolve_release

    text = _strip_front_matter(card.read_text(encoding="utf-8"))
    root = card.resolve().parents[2]
    release = resolve_release(root, "moverkit", None, None, dry_run=True)
    for placeholder, value in {**release.placeholders(metric), "{VERSION_PLACEHOLDER}": moverkit.__version__}.items():
        text = text.replace(placeholder, value)
    return text


def _strip_front_matter(markdown: str) -> str:
    if markdown.startswith("---\n"):
        end = markdown.find("\n---\n", 4)
        if end != -1:
            return markdown[end + 5 :].lstrip()
    return markdown


__all__ = [
    "DEMO_MODELS_VARIABLE",
    "EXAMPLES",
    "LABEL_CHARS",
    "MAX_PREDICTIONS",
    "MAX_REFERENCES",
    "MAX_TEXT_CHARS",
    "MAX_TOTAL_CHARS",
    "MAX_UPLOAD_BYTES",
    "MIN_BATCH_TEXTS",
    "REFERENCE_SEPARATOR",
    "Heatmap",
    "Param",
    "Scored",
    "allowed_models",
    "beyond_loopback",
    "build_demo",
    "centering_params",
    "empty_table",
    "heatmap_figure",
    "idf_param",
    "layer_param",
    "model_param",
    "parse_pairs",
    "pick_heatmap",
    "preset_default",
    "score",
]
