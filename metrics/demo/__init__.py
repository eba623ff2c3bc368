"""The Gradio demo of every moverkit metric: one builder, configured per metric by each Space's ``app.py``.

    from moverkit.demo import Heatmap, build_demo, centering_params, layer_param, model_param

    demo = build_demo(
        "centered_bertscore",
        title="Centered BERTScore",
        params=[model_param(), layer_param(), *centering_params()],
        heatmaps=[Heatmap("similarity", "cosine similarity")],
        examples=[("the cat sat on the mat", "a cat sat on the mat")],
        main_params=["centering"],  # in view under the Score button; the others in "More settings"
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

The parts: :mod:`.widgets` (the settings, heatmaps, examples and models a page offers),
:mod:`.scoring` (the boxes read as pairs, the module run, the scores summarised, free of Gradio),
:mod:`.plotting` (the heatmap figure) and :mod:`.app` (the Gradio page: layout, events, card).
"""

from __future__ import annotations

from moverkit._core.centering import MIN_BATCH_TEXTS
from moverkit.demo.app import build_demo
from moverkit.demo.plotting import LABEL_CHARS, heatmap_figure, pick_heatmap
from moverkit.demo.scoring import (
    MAX_PREDICTIONS,
    MAX_REFERENCES,
    MAX_TEXT_CHARS,
    MAX_TOTAL_CHARS,
    REFERENCE_SEPARATOR,
    USER_ERRORS,
    Scored,
    empty_table,
    parse_pairs,
    score,
)
from moverkit.demo.widgets import (
    DEMO_MODELS_VARIABLE,
    EXAMPLES,
    MAX_UPLOAD_BYTES,
    Heatmap,
    Param,
    allowed_models,
    beyond_loopback,
    centering_params,
    idf_param,
    layer_param,
    model_param,
    preset_default,
)

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
    "USER_ERRORS",
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
