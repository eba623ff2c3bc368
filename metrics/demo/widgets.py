"""What a demo page shows per metric: its settings (:class:`Param`, one ``compute`` argument
each, with its widget and the value blank gives), the matrices it can draw (:class:`Heatmap`), its
example texts, and which models its model box takes (:func:`allowed_models`)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from moverkit._core.centering import MAX_STATS_FILE_BYTES

MAX_UPLOAD_BYTES = MAX_STATS_FILE_BYTES
"""The largest upload a page takes (1 MiB): its one upload is a corpus statistic, and no statistic
is larger (``moverkit._core.centering.stats_file.MAX_STATS_FILE_BYTES``; a real one of a 4,096-dim model is
34 KB). Checked before the file is read (``Param.convert``), and passed to Gradio as
``max_file_size`` by the page's ``launch``, so that a larger upload is cut off while it arrives
instead of filling the server's disk first."""

DEMO_MODELS_VARIABLE = "MOVERKIT_DEMO_MODELS"
"""The environment variable listing the models a page offers besides the embedded one
(comma-separated Hugging Face ids or local paths, exactly as typed; ``*`` for any model)."""

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
    initial value is the metric's default (``moverkit.functional.<metric>``'s signature), so the page cannot drift
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
    from moverkit._core.encoding import DEFAULT_MODEL

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


def layer_param(default_layer: int | None = None) -> Param:
    """``num_layers``, the layer whose token vectors are compared; blank gives the metric's default
    (its spec's ``default_layer``, :class:`moverkit.facts.specs.MetricSpec`): ``-1``, the last layer
    (MoverScore, as the authors' releases); ``None``, the tuned layer of the model
    (:data:`moverkit._core.encoding.request.MODEL_LAYERS`: the embedded model's is its last, 6th),
    else its last layer."""
    if default_layer == -1:
        return Param(
            "num_layers", "Layer", "int", info="blank: the last layer, as the authors' releases", unset="the last"
        )
    from moverkit._core.encoding import DEFAULT_MODEL, MODEL_LAYERS

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
