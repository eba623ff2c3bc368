"""The Gradio page of one metric: its layout, the wiring of the Score button and of the heatmap's
switches, the bounded queue and ``launch``, and the card shown below (the Space's README)."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from moverkit._core.base import collected_warnings
from moverkit.demo.plotting import HEATMAP_CSS, heatmap_figure, pick_heatmap, shorten
from moverkit.demo.scoring import REFERENCE_SEPARATOR, USER_ERRORS, empty_table, score, score_header
from moverkit.demo.widgets import MAX_UPLOAD_BYTES, Heatmap, Param, _models_info, allowed_models
from moverkit.facts.specs import MetricSpec, spec


def build_demo(
    metric: str,
    *,
    title: str,
    description: str = "",
    params: Sequence[Param],
    heatmaps: Sequence[Heatmap],
    examples: Sequence[tuple[str, str]],
    card: str | os.PathLike | None = None,
    main_params: Sequence[str] = (),
):
    """The ``gr.Blocks`` page of ``metric`` (a bundled moverkit module, loaded once, here):
    ``title`` and a Markdown ``description`` (one line: what the score means) on top.

    ``params`` are the inputs besides the texts (each an argument of the metric: checked here, so a
    renamed argument fails at start, not on a click); ``main_params`` names the two or three of
    them that stay in view under the Score button (at most :data:`MAX_MAIN_PARAMS`), the others
    sit in a closed "More settings"; ``heatmaps``, the matrices of the alignment one can draw (the
    first is drawn after scoring; with several, a switch picks); ``examples`` are (predictions,
    references) box contents, the first one prefilled; ``card``, a Markdown file shown below the
    page with its YAML front matter left out (the Space's README).

    The page reads top down, a phone first: the two boxes, the Score button, the main settings;
    then the scores, each header with its direction and the metric's reference points beside
    them (:mod:`moverkit.facts.specs`), the heatmap drawn to the width of its box, the hashcode. A bad
    input shows one message under the button (the module's own), and clears the results of the
    previous press; the button first clears them anyway, so that an error never stands above old
    scores.

    The API endpoint ``/score`` takes the two boxes and the params by their argument names and
    returns (summary, table, hashcode, prediction shown, matrix shown, heatmap); a bad input is
    an error there (the module's message).

    The page holds its visitors in a bounded queue (:func:`_bound_queue`): one press scores at a
    time, at most :data:`MAX_QUEUE` wait, and a press past them is refused at once with a busy
    message. Each press shows its own call's warnings (moverkit's, gathered by
    :func:`~moverkit._core.base.collected_warnings` in the worker thread Gradio runs it in), never
    another visitor's, and leaves the process's warnings filters alone.

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
    metric_spec = spec(metric)
    defaults = _defaults(metric, params)
    _check_main(metric, params, main_params)
    # Named after the compute arguments, so that API callers pass them by the module's names.
    boxes = {"predictions_text": examples[0][0], "references_text": examples[0][1]}
    scoring = _Scoring(module, metric_spec, params, heatmaps, _signature({**boxes, **defaults}))
    with gr.Blocks(title=title, analytics_enabled=False) as demo:
        gr.HTML(f"<style>{_CSS}</style>", padding=False, container=False)
        gr.Markdown(f"# {title}\n{description}", elem_id="intro")
        inputs = _inputs(gr, params, defaults, main_params, examples)
        results = _results(gr, scoring.titles)
        if card is not None:
            with gr.Accordion("About this metric", open=False):
                gr.Markdown(_local_card(metric, Path(card)))
        _wire(gr, demo, scoring, inputs, results)
    _bound_queue(demo)
    _bound_launch(demo, [box for p, box in zip(params, inputs.settings) if p.kind == "model"])
    return demo


@dataclass(frozen=True)
class _Scoring:
    """What a press needs besides the page: the loaded module, its reference points
    (:mod:`moverkit.facts.specs`), the params in the order the settings are passed, the heatmaps
    one can draw, and the signature of the ``/score`` endpoint (the two boxes, then the params by
    their argument names, with the module's defaults)."""

    module: object
    spec: MetricSpec
    params: Sequence[Param]
    heatmaps: Sequence[Heatmap]
    signature: inspect.Signature

    @property
    def titles(self) -> list[str]:
        return [h.title for h in self.heatmaps]


@dataclass(frozen=True)
class _Inputs:
    """What the reader fills in and presses: the two text boxes, the Score button with the error
    line under it, and one component per param (in the order of ``params``)."""

    texts: list
    button: object
    error: object
    settings: list


@dataclass(frozen=True)
class _Results:
    """What a press fills in, and the hidden state beside it: the heatmap box's width (0: not
    measured, as for API callers), the alignments the switches redraw from, and the hidden
    Markdown whose value hides the error line."""

    summary: object
    table: object
    hashcode: object
    shown: object
    matrix: object
    plot: object
    alignments: object
    width: object
    no_error: object

    @property
    def outputs(self) -> list:
        """The components a press writes, in the order :func:`_wire`'s ``run`` returns them."""
        return [self.summary, self.table, self.hashcode, self.shown, self.matrix, self.plot, self.alignments]


def _inputs(gr, params: Sequence[Param], defaults: dict, main_params: Sequence[str], examples) -> _Inputs:
    """The top of the page: the two boxes side by side (prefilled with the first example), the
    Score button, its error line, the main settings in view, the others in a closed "More
    settings", then the examples."""
    with gr.Row():
        predictions_box = gr.Textbox(
            value=examples[0][0],
            label="Predictions",
            info="one per line",
            lines=4,
            max_lines=8,
            elem_id="predictions",
            placeholder="one per line",
            min_width=320,  # on a narrow screen the two boxes stack, so line i of each stays paired
        )
        references_box = gr.Textbox(
            value=examples[0][1],
            label="References",
            info=f"line i for prediction i; several: separate them by {REFERENCE_SEPARATOR}",
            lines=4,
            max_lines=8,
            elem_id="references",
            placeholder="one per line",
            min_width=320,
        )
    button = gr.Button("Score", variant="primary", elem_id="score-button")
    error = gr.Markdown(visible=False, elem_id="error")
    components = {}
    if main_params:
        with gr.Row(elem_id="main-settings"):
            for p in params:
                if p.name in main_params:
                    components[p.name] = p.component(gr, defaults[p.name])
    if len(main_params) < len(params):
        with gr.Accordion("More settings", open=False, elem_id="more-settings"), gr.Row():
            for p in params:
                if p.name not in main_params:
                    components[p.name] = p.component(gr, defaults[p.name])
    texts = [predictions_box, references_box]
    gr.Examples([list(e) for e in examples], inputs=texts, cache_examples=False)
    return _Inputs(texts, button, error, [components[p.name] for p in params])


def _results(gr, titles: list[str]) -> _Results:
    """The results under the settings: the summary, the table of scores, the switches of the
    heatmap (which prediction, which matrix: shown only with several), the heatmap, the
    hashcode; then the hidden components."""
    summary = gr.Markdown(elem_id="summary")
    table = gr.Dataframe(empty_table(), label="Scores per prediction", interactive=False, wrap=True, elem_id="scores")
    shown = gr.Dropdown(label="Alignment of prediction", choices=[], interactive=True, elem_id="shown")
    matrix = gr.Radio(titles, value=titles[0], label="Matrix", visible=len(titles) > 1, elem_id="matrix")
    plot = gr.Plot(label="Alignment", show_label=False, elem_id="heatmap")  # the figure has its title
    hashcode = gr.Textbox(
        label="hashcode (the settings that produced these scores)",
        interactive=False,
        buttons=["copy"],
        lines=1,
        max_lines=2,
        elem_id="hashcode",
    )
    no_error = gr.Markdown(value="", visible=False)
    width = gr.Number(0, visible=False, elem_id="plot-width")
    alignments = gr.State([])
    return _Results(summary, table, hashcode, shown, matrix, plot, alignments, width, no_error)


def _wire(gr, demo, scoring: _Scoring, inputs: _Inputs, results: _Results) -> None:
    """The events: the page's Score button (measure the heatmap's box, clear, then score; private,
    its errors are shown in the page), the hidden button behind the API endpoint ``/score`` (the
    same scoring, whose errors are errors), and the heatmap's switches, which redraw it."""
    titles = scoring.titles

    def run(predictions_text, references_text, *values, plot_width=None):
        # Where Gradio serves the page (set by launch, and by mount_gradio_app); unset before.
        served = {"server_name": getattr(demo, "server_name", None), "share": getattr(demo, "share", None)}
        with collected_warnings() as caught:
            try:
                kwargs = {
                    p.name: v for p, raw in zip(scoring.params, values) if (v := p.convert(raw, **served)) is not None
                }
                scored = score(scoring.module, predictions_text, references_text, kwargs)
            except USER_ERRORS as err:
                raise gr.Error(str(err), print_exception=False) from err
        for message in dict.fromkeys(str(w) for w in caught):
            gr.Warning(message)
        labels = [(f"{i + 1}. {shorten(p, 34)}", i) for i, p in enumerate(scored.predictions)]
        headers = [score_header(key, scoring.spec) for key in scored.scores]
        return (
            scored.summary(scoring.spec),
            scored.table(scoring.spec).style.format("{:.4f}", subset=headers),  # 0.8210, not 0.821
            scored.hashcode,
            gr.Dropdown(choices=labels, value=0),
            titles[0],
            draw(scored.alignments, 0, titles[0], plot_width),
            scored.alignments,
        )

    def run_in_page(predictions_text, references_text, *values):
        # The page's press: the last input is the heatmap box's width; an error is one message.
        *values, plot_width = values
        try:
            return (*run(predictions_text, references_text, *values, plot_width=plot_width), results.no_error)
        except gr.Error as err:
            return (*clear(), gr.Markdown(f"**Error:** {err.message}", visible=True))

    def clear():
        return "", empty_table(), "", gr.Dropdown(choices=[], value=None), titles[0], None, []

    def clear_page():
        return (*clear(), results.no_error)

    def draw(aligned, index, title, plot_width=None):
        if not aligned or index is None:
            return None
        heatmap = pick_heatmap(aligned[index], scoring.heatmaps, title)
        name = f"{heatmap.title}, prediction {index + 1}"
        return heatmap_figure(aligned[index], heatmap, name, max_width=plot_width or None)

    run.__signature__ = scoring.signature
    outputs, width = results.outputs, results.width
    inputs.button.click(None, outputs=width, js=_MEASURE, api_visibility="private", queue=False)
    inputs.button.click(clear_page, outputs=[*outputs, inputs.error], api_visibility="private", queue=False).then(
        run_in_page,
        inputs=[*inputs.texts, *inputs.settings, width],
        outputs=[*outputs, inputs.error],
        api_visibility="private",
        concurrency_id=SCORING,
    )
    api = gr.Button(visible=False, elem_id="score-api")
    api.click(run, inputs=[*inputs.texts, *inputs.settings], outputs=outputs, api_name="score", concurrency_id=SCORING)
    for control in (results.shown, results.matrix):
        control.input(
            draw,
            inputs=[results.alignments, results.shown, results.matrix, width],
            outputs=results.plot,
            api_visibility="private",
        )


SCORING = "score"
"""The concurrency group of the page's press and of the ``/score`` endpoint: one queue, one limit."""

CONCURRENCY_LIMIT = 1
"""Presses (page or ``/score``) that score at once. One: the page's one module object runs one
``compute`` at a time anyway (``TextPairMetric`` holds a lock: evaluate keeps one writer per
object), and on a Space's 2 vCPUs one call's forward passes already take both cores. The
heatmap's switches redraw in queues of their own, so a redraw never waits for a press."""

MAX_QUEUE = 20
"""Presses that may wait for :data:`CONCURRENCY_LIMIT` (Gradio's ``max_size``, over every queue
of the page). Past it a press is refused at once with Gradio's busy message (the page: "This
application is currently busy. Please try again."; ``gradio_client``: ``QueueError("Queue is
full! Please try again.")``) instead of waiting without end, and the server holds at most this
many waiting presses' inputs (each within :data:`~moverkit.demo.scoring.MAX_TOTAL_CHARS` and
:data:`MAX_UPLOAD_BYTES`) besides the one it scores. docs/speed.md gives the latencies measured
with 12 visitors at once."""


def _bound_queue(demo) -> None:
    """Gradio's queue with :data:`MAX_QUEUE` and :data:`CONCURRENCY_LIMIT` (the default of every
    event; both scoring events share the :data:`SCORING` group, so one press of either scores at
    a time)."""
    demo.queue(max_size=MAX_QUEUE, default_concurrency_limit=CONCURRENCY_LIMIT)


MAX_MAIN_PARAMS = 3
"""At most this many settings stay in view under the Score button (``main_params``)."""


def _check_main(metric: str, params: Sequence[Param], main_params: Sequence[str]) -> None:
    names = [p.name for p in params]
    unknown = [name for name in main_params if name not in names]
    if unknown:
        raise ValueError(f"{metric}: main_params {', '.join(unknown)} are not among the params ({', '.join(names)})")
    if len(main_params) > MAX_MAIN_PARAMS:
        raise ValueError(f"{metric}: at most {MAX_MAIN_PARAMS} main_params stay in view, got {len(main_params)}")


_MEASURE = """() => {
  const box = document.querySelector('#heatmap');
  return Math.max(240, Math.floor((box && box.clientWidth) || window.innerWidth) - 24);
}"""
"""The pixels the heatmap may take: its box's width, less the box's padding."""

_CSS = (
    HEATMAP_CSS
    + " #hashcode textarea {font-family: var(--font-mono); font-size: 12px; white-space: pre; overflow-x: auto;"
    + " overflow-y: hidden; min-height: 3.4em}"
    + " #error {color: var(--error-text-color); border: 1px solid var(--error-border-color);"
    + " background: var(--error-background-fill); border-radius: var(--radius-md); padding: 4px 12px}"
    + " #intro h1 {margin-bottom: 4px}"
    + " #scores th, #scores th * {word-break: normal; overflow-wrap: normal}"
)
"""The page's own style: the heatmap within its box, the hashcode on one line (it scrolls
sideways), the error message in the theme's error colours, the score table's headers broken
between words only."""


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


def _defaults(metric: str, params: Sequence[Param]) -> dict:
    """The metric's default of every parameter, read from its public function
    (``moverkit.functional.<metric>``, whose signature the module's is pinned to); an argument it does not take, a default of None
    whose value the page does not state (``Param.unset``; an upload is simply empty), or a
    dropdown without the module's default among its choices, fails here."""
    from moverkit.integrations.registry import REGISTRY

    signature = REGISTRY[metric].defaults
    missing = [p.name for p in params if p.name not in signature]
    if missing:
        raise ValueError(f"{metric} takes no argument {', '.join(missing)}; it takes {', '.join(signature)}")
    defaults = {p.name: signature[p.name] for p in params}
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


def _local_card(metric: str, card: Path) -> str:
    """The Space README as this page shows it: front matter left out, its placeholders filled as a
    dry-run ``moverkit publish`` fills them (this checkout's repository and commit where it can
    tell, else ``OWNER/moverkit`` and zeros), so no ``{..._PLACEHOLDER}`` shows when run locally."""
    import moverkit
    from moverkit.publish import resolve_release

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
