"""The demo builder's parts, without a server: parsing the boxes and their bounds, turning inputs
into compute arguments (the model allow-list), picking the scores, the table, the warnings, the
wiring of the button, and drawing the heatmap."""

from __future__ import annotations

import inspect
import os
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from moverkit._core import DEFAULT_MODEL
from moverkit.demo import (
    DEMO_MODELS_VARIABLE,
    LABEL_CHARS,
    MAX_PREDICTIONS,
    MAX_REFERENCES,
    MAX_TEXT_CHARS,
    MAX_TOTAL_CHARS,
    MAX_UPLOAD_BYTES,
    MIN_BATCH_TEXTS,
    Heatmap,
    Param,
    Scored,
    allowed_models,
    beyond_loopback,
    heatmap_figure,
    model_param,
    parse_pairs,
    pick_heatmap,
    preset_default,
    score,
)
from moverkit.demo.scoring import reference_points
from moverkit.facts.specs import spec


def test_one_reference_per_line():
    assert parse_pairs("a b\nc\n", "x\ny") == (["a b", "c"], ["x", "y"])


def test_separator_gives_every_line_a_list_of_references():
    predictions, references = parse_pairs("a\n\nc", "x ||| y\nz\nw|||v")
    assert predictions == ["a", "", "c"]  # a blank line in the middle is an empty prediction
    assert references == [["x", "y"], ["z"], ["w", "v"]]


@pytest.mark.parametrize("text", ["", " \n\t", None])
def test_no_prediction_is_refused(text):
    with pytest.raises(ValueError, match="at least one prediction"):
        parse_pairs(text, "x")


def test_too_many_predictions_are_refused():
    with pytest.raises(ValueError, match=f"at most {MAX_PREDICTIONS}"):
        parse_pairs("a\n" * (MAX_PREDICTIONS + 1), "x\n" * (MAX_PREDICTIONS + 1))


@pytest.mark.parametrize("inside", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"])
def test_lines_end_at_newline_only(inside):
    # str.splitlines would also break at these, shifting every later pair.
    assert parse_pairs(f"a{inside}b\nc\r\n", f"x\ny{inside}z") == ([f"a{inside}b", "c"], ["x", f"y{inside}z"])


def test_references_per_prediction_are_bounded():
    line = " ||| ".join(["r"] * MAX_REFERENCES)
    assert len(parse_pairs("a", line)[1][0]) == MAX_REFERENCES
    with pytest.raises(
        ValueError,
        match=f"^line 2 of the references has {MAX_REFERENCES + 1} references; .* at most {MAX_REFERENCES} per prediction$",
    ):
        parse_pairs("a\nb", f"x\n{line} ||| r")


@pytest.mark.parametrize(
    ("predictions", "references", "named"),
    [
        ("a\n" + "p" * (MAX_TEXT_CHARS + 1), "x\ny", "prediction 2"),
        ("a\nb", "x\ny ||| " + "r" * (MAX_TEXT_CHARS + 1), "line 2 of the references"),
    ],
)
def test_characters_per_text_are_bounded(predictions, references, named):
    assert parse_pairs("p" * MAX_TEXT_CHARS, "x") == (["p" * MAX_TEXT_CHARS], ["x"])
    with pytest.raises(
        ValueError,
        match=f"^{named} has a text of {MAX_TEXT_CHARS + 1:,} characters; .* at most {MAX_TEXT_CHARS:,} per text",
    ):
        parse_pairs(predictions, references)


def test_characters_per_press_are_bounded():
    # Every text within its own bound, too many together: 11 texts of 20,000 characters.
    text = "\n".join(["p" * MAX_TEXT_CHARS] * 11)
    with pytest.raises(ValueError, match=f"at most {MAX_TOTAL_CHARS:,} characters at a time, got {len(text) * 2:,}"):
        parse_pairs(text, text)


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        ("text", "  some/model ", "some/model"),
        ("text", "   ", None),
        ("words", "the, a  of", ["the", "a", "of"]),
        ("words", " , ", None),
        ("int", 4.0, 4),
        ("int", " -2 ", -2),
        ("int", "", None),
        ("int", None, None),
        ("float", 2, 2.0),
        ("float", "1e-3", 0.001),
        ("float", "inf", float("inf")),
        ("bool", True, True),
        ("bool", "no", False),
        ("bool", "yes", True),
        ("bool", "", None),
        ("file", "/tmp/stats.npz", "/tmp/stats.npz"),
    ],
)
def test_inputs_become_compute_arguments(kind, raw, expected):
    value = Param("x", "X", kind).convert(raw)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("kind", "raw"), [("int", "four"), ("int", "4.5"), ("int", 4.5), ("float", "1,5")])
def test_a_number_that_does_not_parse_is_a_clear_error(kind, raw):
    with pytest.raises(ValueError, match=f"^n_gram must be an? (integer|number), got {raw!r}$"):
        Param("n_gram", "n-gram", kind).convert(raw)


def test_choice_default_entry_leaves_the_modules_default():
    param = Param("variant", "Variant", "choice", ("wmd", "smd"))
    assert param.convert("") is None and param.convert("smd") == "smd"


def test_param_kinds_are_checked():
    with pytest.raises(ValueError, match="kind"):
        Param("x", "X", "slider")
    with pytest.raises(ValueError, match="choices"):
        Param("x", "X", "choice")


def test_widgets_start_at_the_modules_default():
    gr = pytest.importorskip("gradio")
    # Numbers sit in text boxes: Gradio's number widget cannot be blank (it sends 0).
    assert Param("n", "N", "int").component(gr, 3).value == "3"
    assert Param("t", "T", "float").component(gr, None).value == ""
    # None: the module decides (a preset); the page says what blank gives, greyed or as an entry.
    assert Param("t", "T", "float", unset="0.1 (twmd)").component(gr, None).placeholder == "0.1 (twmd)"
    unset = Param("idf", "IDF", "bool", unset="yes (v2)").component(gr, None)
    assert isinstance(unset, gr.Dropdown) and unset.value == ""
    assert unset.choices == [("yes (v2)", ""), ("yes", "yes"), ("no", "no")]
    assert isinstance(Param("idf", "IDF", "bool").component(gr, False), gr.Checkbox)
    assert Param("stop_words", "S", "words").component(gr, ["a", "b"]).value == "a b"


@pytest.fixture
def served(monkeypatch):
    """``served(space_id, models)``: the environment of a page run as a Space (SPACE_ID set) or
    locally (None), with MOVERKIT_DEMO_MODELS set to ``models`` (None: unset)."""

    def environment(space_id, models):
        for name, value in (("SPACE_ID", space_id), (DEMO_MODELS_VARIABLE, models)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

    for name in ("GRADIO_SERVER_NAME", "GRADIO_SHARE"):  # a page on loopback unless a test says otherwise
        monkeypatch.delenv(name, raising=False)
    return environment


def test_a_local_page_takes_any_model(served):
    served(None, None)
    assert model_param().convert(" /any/folder ") == "/any/folder"
    assert model_param().convert("") is None


def test_a_space_takes_only_the_embedded_model_and_does_not_tell_which_paths_exist(served, tmp_path):
    served("acme/twmd", None)
    model = model_param()
    assert model.convert("") is None and model.convert(DEFAULT_MODEL) == DEFAULT_MODEL
    messages = []
    for path in (tmp_path, tmp_path / "absent", "/etc", "bert-base-uncased"):
        with pytest.raises(ValueError, match="^this page does not offer the model") as refused:
            model.convert(str(path))
        messages.append(str(refused.value).replace(repr(str(path)), "MODEL"))
    assert len(set(messages)) == 1 and "only the embedded all-MiniLM-L6-v2" in messages[0]


@pytest.mark.parametrize("space_id", [None, "acme/twmd"])
def test_the_allow_list_comes_from_the_environment(served, space_id):
    served(space_id, " org/model-a , /models/b ,")
    model = model_param()
    assert model.convert("org/model-a") == "org/model-a" and model.convert("/models/b") == "/models/b"
    with pytest.raises(ValueError, match="also offered: org/model-a, /models/b"):
        model.convert("/models/c")
    served(space_id, "*")
    assert model.convert("/models/c") == "/models/c"


LOOPBACK = ["127.0.0.1", "localhost", "LocalHost", "::1", "[::1]", "127.0.1.1", None, ""]
"""Server names of a page only this machine reaches (None and "": Gradio's default, 127.0.0.1)."""

BEYOND_LOOPBACK = ["0.0.0.0", "::", "192.168.1.20", "10.0.0.5", "myhost.example.org", "fe80::1", "127.0.0.1.nip.io"]
"""Server names that other machines reach (a host name too: it may resolve anywhere)."""


@pytest.mark.parametrize(
    ("server_name", "local"), [(n, True) for n in LOOPBACK] + [(n, False) for n in BEYOND_LOOPBACK]
)
def test_a_page_served_beyond_loopback_takes_only_the_offered_models(served, server_name, local):
    # Neither SPACE_ID nor the allow-list set: a page on 0.0.0.0 serves the network, not its owner.
    served(None, None)
    assert beyond_loopback(server_name) is not local
    assert allowed_models(server_name) == (None if local else ())
    model = model_param()
    assert model.convert("", server_name=server_name) is None
    assert model.convert(DEFAULT_MODEL, server_name=server_name) == DEFAULT_MODEL
    if local:
        assert model.convert("/any/folder", server_name=server_name) == "/any/folder"
    else:
        with pytest.raises(
            ValueError, match="^this page does not offer the model '/any/folder'; this page offers only"
        ):
            model.convert("/any/folder", server_name=server_name)
    # The allow-list applies as on a Space.
    served(None, "org/model-a")
    assert model.convert("org/model-a", server_name=server_name) == "org/model-a"
    with pytest.raises(ValueError, match="also offered: org/model-a"):
        model.convert("/any/folder", server_name=server_name)


@pytest.mark.parametrize(
    ("variable", "value"), [("GRADIO_SERVER_NAME", "0.0.0.0"), ("GRADIO_SERVER_NAME", ""), ("GRADIO_SHARE", "True")]
)
def test_gradios_environment_or_a_share_link_count_as_beyond_loopback(served, monkeypatch, variable, value):
    served(None, None)
    monkeypatch.setenv(variable, value)
    assert beyond_loopback() and allowed_models() == ()
    with pytest.raises(ValueError, match="does not offer the model"):
        model_param().convert("/any/folder")
    monkeypatch.delenv(variable)
    assert allowed_models() is None and allowed_models(share=True) == ()
    # An explicit server name is the one Gradio binds, whatever the environment says.
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    assert not beyond_loopback("127.0.0.1")


def _launched(monkeypatch, **launch):
    """A page launched with ``launch`` arguments, as Gradio records them, without a server."""
    gr = pytest.importorskip("gradio")
    calls = []

    def fake_launch(self, *args, **kwargs):
        calls.append(kwargs)
        self.server_name = kwargs.get("server_name") or os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1")
        self.share = bool(kwargs.get("share"))

    fake_launch.__signature__ = inspect.signature(gr.Blocks.launch)
    monkeypatch.setattr(gr.Blocks, "launch", fake_launch)
    demo = _page()
    demo.launch(**launch)
    (scoring,) = [fn for fn in demo.fns.values() if fn.api_name == "score"]
    (box,) = [block for block in demo.blocks.values() if getattr(block, "elem_id", None) == "param-model_type"]
    return demo, calls, scoring, box


@pytest.mark.parametrize(
    ("launch", "local"), [({}, True), ({"server_name": "0.0.0.0"}, False), ({"share": True}, False)]
)
def test_a_launched_page_applies_the_allow_list_of_its_own_address(served, monkeypatch, launch, local):
    gr = pytest.importorskip("gradio")
    served(None, None)
    demo, calls, scoring, box = _launched(monkeypatch, **launch)
    assert calls == [{**launch, "max_file_size": MAX_UPLOAD_BYTES}]  # uploads bounded by Gradio too
    assert ("only the embedded" in box.info) is not local  # the box says what the page takes
    if local:
        with pytest.raises(gr.Error, match="not-a-model"):  # the model was offered, and fails to load
            scoring.fn("a", "b", "/tmp/not-a-model")
    else:
        with pytest.raises(gr.Error, match="this page does not offer the model '/tmp/not-a-model'"):
            scoring.fn("a", "b", "/tmp/not-a-model")


def test_a_launch_keeps_its_own_upload_bound(served, monkeypatch):
    served(None, None)
    _, calls, _, _ = _launched(monkeypatch, server_name="127.0.0.1", max_file_size="100kb")
    assert calls == [{"server_name": "127.0.0.1", "max_file_size": "100kb"}]


def test_an_upload_larger_than_any_statistic_is_refused_before_loading(tmp_path):
    upload = tmp_path / "gradio" / "stats.npz"
    upload.parent.mkdir()
    upload.write_bytes(bytes(MAX_UPLOAD_BYTES))
    param = Param("centering_stats", "Corpus statistic (.npz)", "file")
    assert param.convert(str(upload)) == str(upload)
    upload.write_bytes(bytes(MAX_UPLOAD_BYTES + 1))
    with pytest.raises(
        ValueError,
        match=f"^centering_stats: the uploaded file 'stats.npz' has {MAX_UPLOAD_BYTES + 1:,} bytes; "
        f"this page takes at most {MAX_UPLOAD_BYTES:,}",
    ):
        param.convert(str(upload))


class _Module:
    """Stands in for an evaluate module's compute, to test which outputs are taken as scores; its
    ``_compute`` signature gives the centering default (``batch`` unless told)."""

    def __init__(self, result, centering="batch"):
        self.result, self.calls, self.centering = result, [], centering

    def compute(self, **kwargs):
        self.calls.append(kwargs)
        return self.result

    @property
    def _compute(self):
        def compute(predictions, references, centering=self.centering, temperature=0.1): ...

        return compute


def test_scores_are_the_per_prediction_number_lists():
    alignment = [{"m": [[1.0]]}, {"m": [[0.0]]}]
    module = _Module(
        {
            "f1": [0.5, 1.0],
            "twmd": [1, 0.25],
            "names": ["a", "b"],
            "flags": [True, False],
            "corpus": [0.3],
            "hashcode": "h",
            "alignment": alignment,
        }
    )
    scored = score(module, "p\nq", "r ||| s\nt", {"temperature": 0.1})
    assert module.calls == [
        {"predictions": ["p", "q"], "references": [["r", "s"], ["t"]], "return_alignment": True, "temperature": 0.1}
    ]
    assert scored.scores == {"f1": [0.5, 1.0], "twmd": [1.0, 0.25]}
    assert scored.hashcode == "h" and scored.alignments == alignment


@pytest.mark.parametrize(("texts", "warns"), [(MIN_BATCH_TEXTS - 1, True), (MIN_BATCH_TEXTS, False)])
def test_batch_centering_of_too_few_texts_warns_once(load_metric, tiny_model_path, texts, warns):
    # The metric's own warning (moverkit._core.centering.maths), not a second one of the page. Distinct
    # non-blank texts count: a repeated text and a blank line add nothing.
    predictions = [f"word{i}" for i in range(texts)] + ["word0", " "]
    references = ["word1"] * len(predictions)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        score(
            load_metric("twmd"),
            "\n".join(predictions),
            "\n".join(references),
            {"model_type": tiny_model_path, "centering": "batch"},
        )
    messages = [str(w.message) for w in caught if "centering='batch'" in str(w.message)]
    if warns:
        assert len(messages) == 1 and messages[0].startswith(f"centering='batch' over only {texts} distinct texts")
    else:
        assert messages == []


def test_summary_holds_the_means_and_the_table_every_score():
    scored = Scored(["p", "q"], [["r"], ["s", "t"]], {"f1": [0.5, 1.0], "recall": [0.25, 0.5]}, "h", [])
    # means: f1 (0.5 + 1.0) / 2 = 0.75; recall (0.25 + 0.5) / 2 = 0.375; one row per score (a phone shows it whole)
    assert scored.summary().splitlines() == [
        "### Mean scores",
        "",
        "| score | mean of 2 predictions |",
        "|---|---|",
        "| f1 | 0.7500 |",
        "| recall | 0.3750 |",
    ]
    table = scored.table()
    assert list(table.columns) == ["#", "f1", "recall", "prediction", "references"]  # scores first: in view
    assert table["references"].tolist() == ["r", "s ||| t"] and table["f1"].tolist() == [0.5, 1.0]


@pytest.mark.parametrize(("name", "direction"), [("centered_bertscore", "higher"), ("lazy_emd", "lower")])
def test_every_score_header_carries_the_metrics_direction(name, direction):
    metric = spec(name)
    scores = {key: [0.5] for key in metric.outputs}
    scored = Scored(["p"], [["r"]], scores, "h", [])
    headers = [f"{key} ({direction} is closer)" for key in metric.outputs]
    assert list(scored.table(metric).columns) == ["#", *headers, "prediction", "references"]
    summary = scored.summary(metric)
    assert summary.startswith("### Score\n") and "| score | the prediction |" in summary
    assert all(f"| {header} | 0.5000 |" in summary for header in headers)


def test_the_reference_points_stand_beside_the_scores():
    metric = spec("lazy_emd")
    line = reference_points(metric)
    assert line.startswith(
        f"**To compare** (lazy_emd, embedded model, default settings): identical texts **{metric.identical:g}**"
    )
    assert f"unrelated texts about **{metric.unrelated:g}**" in line
    assert f"a machine translation about **{metric.translation:g}**" in line and line.endswith("range 0 to ∞.")
    scored = Scored(["p"], [["r"]], {"lazy_emd": [0.1]}, "h", [])
    assert scored.summary(metric).endswith(line)
    # A spec without the measured points (as the lead may ship them later) shows the others.
    bare = SimpleNamespace(main="f1", identical=1.0, low=-1.0, high=1.0)
    assert (
        reference_points(bare)
        == "**To compare** (f1, embedded model, default settings): identical texts **1**; range -1 to 1."
    )
    # Where the main output is not among the scores (twmd's other variants), its points are left out.
    assert "To compare" not in Scored(["p"], [["r"]], {"trwmd": [0.1]}, "h", []).summary(spec("twmd"))


def test_table_scores_have_four_decimals():
    scored = Scored(["p", "q"], [["r"], ["s"]], {"f1": [0.123456789, -0.98765], "twmd": [1 / 3, 2e-5]}, "h", [])
    table = scored.table()
    assert table["f1"].tolist() == [0.1235, -0.9877] and table["twmd"].tolist() == [0.3333, 0.0]
    # The summary's means keep every digit until they are printed (4 decimals).
    assert scored.summary().splitlines()[-1] == f"| twmd | {(1 / 3 + 2e-5) / 2:.4f} |"
    assert scored.summary().splitlines()[-2] == f"| f1 | {(0.123456789 - 0.98765) / 2:.4f} |"


def test_heatmap_shows_the_matrix_with_tokens_on_both_axes():
    matrix = [[0.9, -0.1, 0.2], [0.3, 0.8, -0.4]]
    alignment = {"prediction_tokens": ["the", "cat"], "reference_tokens": ["a", "cat", "x" * 40], "similarity": matrix}
    fig = heatmap_figure(alignment, Heatmap("similarity", "cosine similarity"), "title")
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), np.array(matrix))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["the", "cat"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "cat", "x" * (LABEL_CHARS - 1) + "…"]
    assert sorted(t.get_text() for t in ax.texts) == sorted(format(v, ".2f") for row in matrix for v in row)
    # Light cells (yellow, the top of viridis) get black text, dark ones (purple) white.
    colors = {t.get_text(): t.get_color() for t in ax.texts}
    assert colors["0.90"] == "black" and colors["-0.40"] == "white"


def _tick_labels(fig, axis):
    """The visible tick labels of ``axis`` ("x" or "y") and their drawn boxes (pixels), laid out
    as when the page renders the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    labels = [label for label in getattr(fig.axes[0], f"get_{axis}ticklabels")() if label.get_text()]
    return labels, [label.get_window_extent(canvas.get_renderer()) for label in labels]


def _similarity(rows: list[str], columns: list[str]) -> dict:
    rng = np.random.default_rng(0)
    return {"prediction_tokens": rows, "reference_tokens": columns, "similarity": rng.random((len(rows), len(columns)))}


_WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "wizards",
    "quietly",
    "mix",
    "jam",
)


def _labels(n: int, length: int) -> list[str]:
    """``n`` distinct labels of ``length`` characters, of English words."""
    text = " ".join(_WORDS * (length // 3 + 2))
    return [(f"{i} " + text[i % 7 :])[:length] for i in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n_columns", "length", "rotation"),
    [(7, 8, 0), (5, 25, 0), (40, 10, 45), (300, 6, 45), (6, 60, 45)],
    ids=["tokens", "sentences", "many-tokens", "a-512-token-text", "long-sentences"],
)
def test_heatmap_labels_are_readable(n_columns, length, rotation):
    # Column labels are horizontal while they fit, else at 45° (never 90°); long ones end in an
    # ellipsis; no two labels overlap, however many tokens (past a size only every k-th shows).
    n_rows = n_columns // 2 + 2
    fig = heatmap_figure(
        _similarity(_labels(n_rows, length), _labels(n_columns, length)), Heatmap("similarity", "s"), "t"
    )
    for axis, n in (("x", n_columns), ("y", n_rows)):
        labels, boxes = _tick_labels(fig, axis)
        angle = rotation if axis == "x" else 0
        assert {label.get_rotation() for label in labels} == {angle}
        assert len(labels) == n if n <= 20 else len(labels) >= 20  # every label, or every k-th of many
        line = 9 * fig.dpi / 72  # a 9 pt line, in pixels
        for a, b in zip(boxes, boxes[1:]):
            if axis == "y":
                assert a.y0 - b.y1 >= 0  # rows go down
            elif angle == 0:
                assert b.x0 - a.x1 >= 0
            else:  # parallel 45° lines: their distance is the horizontal gap / sqrt 2
                assert (b.x1 - a.x1) / 2**0.5 >= line
    texts = [label.get_text() for label in fig.axes[0].get_xticklabels()]
    assert all(len(text) <= LABEL_CHARS for text in texts)
    assert all(text.endswith("…") for text in texts) == (length > LABEL_CHARS)


def test_heatmap_grows_with_its_labels():
    few = heatmap_figure(_similarity(["a", "b"], ["c", "d"]), Heatmap("similarity", "s"), "t")
    wide = heatmap_figure(_similarity(["a", "b"], [f"w{i}" for i in range(20)]), Heatmap("similarity", "s"), "t")
    tall = heatmap_figure(_similarity([f"r{i}" for i in range(20)], ["c", "d"]), Heatmap("similarity", "s"), "t")
    (w0, h0), (w1, _), (_, h2) = (f.get_size_inches() for f in (few, wide, tall))
    assert w1 > w0 and h2 > h0


PHONE = 297
"""The pixels of the heatmap's box on a 400 px wide screen (measured in the browser test)."""


@pytest.mark.parametrize(
    ("n_rows", "n_columns", "length"),
    [(6, 7, 7), (3, 2, 25), (2, 2, 3), (22, 40, 10), (150, 300, 6)],
    ids=["tokens", "sentences", "tiny", "many-tokens", "a-512-token-text"],
)
def test_a_heatmap_fits_a_phone_with_its_title_and_colour_bar(n_rows, n_columns, length):
    # Drawn no wider than its box: the title, every label and the colour bar inside the figure,
    # the colour bar below the matrix (a phone is narrow, not short); labels still apart.
    fig = heatmap_figure(
        _similarity(_labels(n_rows, length), _labels(n_columns, length)),
        Heatmap("similarity", "cosine similarity"),
        "cosine similarity, prediction 1",
        max_width=PHONE,
    )
    assert fig.get_size_inches()[0] * fig.dpi <= PHONE
    labels, boxes = _tick_labels(fig, "x")  # draws the figure
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    (ax, colorbar) = fig.axes
    parts = [fig._suptitle, ax.xaxis.label, ax.yaxis.label, colorbar.xaxis.label, *ax.get_yticklabels(), *labels]
    for part in parts:
        box = part.get_window_extent(renderer)
        assert box.x0 >= -1 and box.x1 <= width + 1 and box.y0 >= -1 and box.y1 <= height + 1, part
    assert fig._suptitle.get_text() == "cosine similarity, prediction 1"
    assert colorbar.get_position().y1 < ax.get_position().y0  # below the matrix
    for a, b in zip(boxes, boxes[1:]):
        assert (b.x1 - a.x1) / 2**0.5 >= 9 * fig.dpi / 72 or b.x0 - a.x1 >= 0
    assert all(len(label.get_text()) <= LABEL_CHARS for label in labels)


def test_a_heatmap_that_fits_keeps_its_size():
    alignment = _similarity(["the", "cat"], ["a", "cat", "sat"])
    free = heatmap_figure(alignment, Heatmap("similarity", "s"), "t")
    wide = heatmap_figure(alignment, Heatmap("similarity", "s"), "t", max_width=1200)
    assert tuple(free.get_size_inches()) == tuple(wide.get_size_inches()) and len(wide.axes[0].texts) == 6
    # In a narrow box, a value that does not fit its cell is left out (the colour bar gives it).
    narrow = heatmap_figure(_similarity(["a"] * 3, ["b"] * 14), Heatmap("similarity", "s"), "t", max_width=PHONE)
    assert len(narrow.axes[0].texts) == 0 and narrow.get_size_inches()[0] * narrow.dpi == PHONE


def test_a_preset_default_names_its_value_and_source():
    presets = {"v2": {"form": "1/(1+wmd)", "idf": True, "stop": ()}, "v1": {"form": "1-wmd", "idf": True, "stop": ()}}
    assert preset_default("version", presets, "form", "v2") == {
        "unset": "1/(1+wmd) (v2)",
        "info": "from version (v1: 1-wmd)",
    }
    assert preset_default("version", presets, "idf", "v2", "weights") == {
        "unset": "yes (v2)",
        "info": "weights; from version",
    }
    assert preset_default("version", presets, "stop", "v2")["unset"] == "none (v2)"


def test_cells_that_round_to_zero_are_left_blank():
    alignment = {"prediction_tokens": ["a", "b"], "reference_tokens": ["c", "d"], "plan": [[0.5, 1e-9], [-1e-9, 0.5]]}
    ax = heatmap_figure(alignment, Heatmap("plan", "transport plan", colormap="Blues", value_format=".3f"), "t").axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["0.500", "0.500"]
    assert all(t.get_color() == "white" for t in ax.texts)  # the dark end of Blues


def test_heatmap_of_an_empty_text_says_so():
    alignment = {"prediction_tokens": [], "reference_tokens": ["a"], "similarity": []}
    ax = heatmap_figure(alignment, Heatmap("similarity", "cosine similarity"), "title").axes[0]
    assert not ax.images and "nothing to align" in ax.texts[0].get_text()


def test_missing_matrix_falls_back_to_the_next_heatmap():
    plan, similarity = Heatmap("plan", "transport plan"), Heatmap("similarity", "cosine similarity")
    cka = {"plan": None, "similarity": [[1.0]]}
    assert pick_heatmap(cka, [plan, similarity], "transport plan") is similarity
    assert pick_heatmap({"plan": [[1.0]], "similarity": [[1.0]]}, [plan, similarity], "cosine similarity") is similarity


def _page(metric="centered_bertscore"):
    from moverkit.demo import build_demo

    return build_demo(
        metric, title="t", params=[model_param()], heatmaps=[Heatmap("similarity", "s")], examples=[("a", "b")]
    )


def test_the_empty_table_is_headed_by_its_text_columns():
    pytest.importorskip("gradio")
    (table,) = [block for block in _page().blocks.values() if getattr(block, "elem_id", None) == "scores"]
    assert table.value["headers"] == ["#", "prediction", "references"] and table.value["data"] == []


def _button_events(demo):
    """The page's press (measure the heatmap's box in the browser, clear, score) and /score."""
    (button,) = [block for block in demo.blocks.values() if getattr(block, "elem_id", None) == "score-button"]
    measure, clear = sorted(
        (fn for fn in demo.fns.values() if (button._id, "click") in fn.targets), key=lambda fn: fn.fn is not None
    )
    (scoring,) = [fn for fn in demo.fns.values() if fn.trigger_after == clear._id]
    (api,) = [fn for fn in demo.fns.values() if fn.api_name == "score"]
    return measure, clear, scoring, api


def test_the_button_clears_old_results_before_scoring():
    """The click first empties every output (so that an error, which leaves the outputs as they
    are, never stands above the previous scores), then scores, whether the clearing ran or not."""
    pytest.importorskip("gradio")
    demo = _page()
    measure, clear, scoring, api = _button_events(demo)
    assert measure.fn is None and "clientWidth" in measure.js  # the browser measures the heatmap's box
    assert not scoring.trigger_only_on_success and scoring.api_name != "score"  # the page's own press
    assert [block._id for block in clear.outputs] == [block._id for block in scoring.outputs]
    # /score returns what the page shows, less the error line.
    assert [block._id for block in api.outputs] == [block._id for block in scoring.outputs][:-1]
    cleared = dict(zip((getattr(block, "elem_id", None) for block in clear.outputs), clear.fn()))
    assert cleared["summary"] == "" and cleared["hashcode"] == "" and cleared["heatmap"] is None
    assert list(cleared["scores"].columns) == ["#", "prediction", "references"] and cleared["scores"].empty
    assert cleared["shown"].choices == [] and cleared[None] == []  # the alignments kept for redrawing
    assert cleared["error"].visible is False


def test_a_bad_input_is_one_message_in_the_page_and_an_error_for_the_api():
    gr = pytest.importorskip("gradio")
    demo = _page()
    _, _, scoring, api = _button_events(demo)
    # The page: one message under the button, every output cleared (no error state in each box).
    shown = dict(zip((getattr(block, "elem_id", None) for block in scoring.outputs), scoring.fn(" \n", "a", "", 0)))
    assert shown["error"].visible and shown["error"].value == "**Error:** type at least one prediction (one per line)"
    assert shown["summary"] == "" and shown["heatmap"] is None and shown["scores"].empty
    with pytest.raises(gr.Error, match="type at least one prediction"):
        api.fn(" \n", "a", "")


@pytest.mark.slow
def test_the_page_draws_the_heatmap_to_the_width_of_its_box():
    pytest.importorskip("gradio")
    demo = _page()
    _, _, scoring, api = _button_events(demo)
    names = [getattr(block, "elem_id", None) for block in scoring.outputs]
    phone = dict(zip(names, scoring.fn("the cat sat on the mat", "a cat was sitting on the mat", "", PHONE)))
    assert phone["heatmap"].get_size_inches()[0] * phone["heatmap"].dpi <= PHONE and not phone["error"].visible
    assert "f1 (higher is closer)" in phone["summary"] and "To compare" in phone["summary"]
    # /score (API callers) draws at the figure's own size.
    free = dict(zip(names, api.fn("the cat sat on the mat", "a cat was sitting on the mat", "")))
    assert free["heatmap"].get_size_inches()[0] * free["heatmap"].dpi > PHONE


def test_main_params_are_checked():
    pytest.importorskip("gradio")
    from moverkit.demo import build_demo

    page = {"title": "t", "heatmaps": [Heatmap("similarity", "s")], "examples": [("a", "b")]}
    with pytest.raises(ValueError, match="main_params temperature are not among the params"):
        build_demo("centered_bertscore", params=[model_param()], main_params=["temperature"], **page)
    with pytest.raises(ValueError, match="at most 3 main_params"):
        build_demo("centered_bertscore", params=[model_param()], main_params=["model_type"] * 4, **page)
    demo = build_demo("centered_bertscore", params=[model_param()], main_params=["model_type"], **page)
    assert not any(getattr(block, "elem_id", None) == "more-settings" for block in demo.blocks.values())


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (Param("temprature", "T"), "centered_bertscore takes no argument temprature"),
        (Param("centering", "C", "choice", ("none", "dim")), "lack its default 'corpus'"),
        # A default of None: the page must say which value blank gives (the module's resolved one).
        (Param("num_layers", "Layer", "int"), "num_layers default to None; give Param.unset"),
        (Param("model_type", "Model", "model"), "model_type default to None; give Param.unset"),
    ],
)
def test_a_param_that_does_not_fit_the_module_fails_at_start(param, message):
    pytest.importorskip("gradio")
    from moverkit.demo import build_demo

    with pytest.raises(ValueError, match=message):
        build_demo(
            "centered_bertscore",
            title="t",
            params=[param],
            heatmaps=[Heatmap("similarity", "s")],
            examples=[("a", "a")],
        )
