"""The demo builder's parts, without a server: parsing the boxes, turning inputs into compute
arguments, picking the scores, and drawing the heatmap."""

from __future__ import annotations

import numpy as np
import pytest

from moverkit.demo import (
    MAX_PREDICTIONS,
    Heatmap,
    Param,
    Scored,
    heatmap_figure,
    parse_pairs,
    pick_heatmap,
    score,
)


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
    unset = Param("idf", "IDF", "bool").component(gr, None)  # None: the module decides (a preset)
    assert isinstance(unset, gr.Dropdown) and unset.value == ""
    assert isinstance(Param("idf", "IDF", "bool").component(gr, False), gr.Checkbox)
    assert Param("stop_words", "S", "words").component(gr, ["a", "b"]).value == "a b"


class _Module:
    """Stands in for an evaluate module's compute, to test which outputs are taken as scores."""

    def __init__(self, result):
        self.result, self.calls = result, []

    def compute(self, **kwargs):
        self.calls.append(kwargs)
        return self.result


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


def test_summary_holds_the_means_and_the_table_every_score():
    scored = Scored(["p", "q"], [["r"], ["s", "t"]], {"f1": [0.5, 1.0], "recall": [0.25, 0.5]}, "h", [])
    # means: f1 (0.5 + 1.0) / 2 = 0.75; recall (0.25 + 0.5) / 2 = 0.375
    assert scored.summary().splitlines()[-1] == "| mean of 2 | 0.7500 | 0.3750 |"
    table = scored.table()
    assert list(table.columns) == ["#", "prediction", "references", "f1", "recall"]
    assert table["references"].tolist() == ["r", "s ||| t"] and table["f1"].tolist() == [0.5, 1.0]


def test_heatmap_shows_the_matrix_with_tokens_on_both_axes():
    matrix = [[0.9, -0.1, 0.2], [0.3, 0.8, -0.4]]
    alignment = {"prediction_tokens": ["the", "cat"], "reference_tokens": ["a", "cat", "x" * 40], "similarity": matrix}
    fig = heatmap_figure(alignment, Heatmap("similarity", "cosine similarity"), "title")
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), np.array(matrix))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["the", "cat"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "cat", "x" * 29 + "…"]
    assert sorted(t.get_text() for t in ax.texts) == sorted(format(v, ".2f") for row in matrix for v in row)
    # Light cells (yellow, the top of viridis) get black text, dark ones (purple) white.
    colors = {t.get_text(): t.get_color() for t in ax.texts}
    assert colors["0.90"] == "black" and colors["-0.40"] == "white"


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


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (Param("temprature", "T"), "centered_bertscore takes no argument temprature"),
        (Param("centering", "C", "choice", ("none", "dim")), "lack its default 'batch'"),
    ],
)
def test_a_param_that_does_not_fit_the_module_fails_at_start(param, message):
    pytest.importorskip("gradio")
    from moverkit.demo import build_demo

    with pytest.raises(ValueError, match=message):
        build_demo(
            "centered_bertscore", title="t", params=[param], heatmaps=[Heatmap("similarity", "s")], examples=[("a", "a")]
        )
