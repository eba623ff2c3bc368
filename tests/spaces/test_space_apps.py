"""Each Space's app, served on 127.0.0.1 and called with gradio_client, gives the module's numbers;
bad input comes back as the module's own error message."""

from __future__ import annotations

import base64
import io
import re
import warnings
from dataclasses import dataclass, field

import pytest
from spaceserver import APPS

import moverkit
from moverkit import MoverkitWarning
from moverkit.facts.specs import spec

pytest.importorskip("gradio")


@dataclass(frozen=True)
class Case:
    """Inputs for one app: pairs (several references on one line exercise the `|||` path; an
    empty prediction in the middle, the empty-text path), settings other than the defaults as
    the page takes them and as compute takes them (where they differ), and a setting the module
    refuses."""

    predictions: list[str]
    references: list[list[str]]
    settings: dict = field(default_factory=dict)
    compute_settings: dict | None = None
    bad_settings: dict = field(default_factory=dict)
    warns: tuple[str, ...] = ()  # what compute warns (the page shows it as a toast), at the defaults
    settings_warns: tuple[str, ...] = ()  # and in addition with the settings

    def boxes(self) -> dict:
        return {
            "predictions_text": "\n".join(self.predictions),
            "references_text": "\n".join(" ||| ".join(refs) for refs in self.references),
        }


PAIRS = {
    "predictions": ["the cat sat on the mat", "", "The weather is cold today. It may snow."],
    "references": [
        ["a cat was sitting on the mat"],
        ["an empty prediction"],
        ["It is freezing today.", "Today is cold."],
    ],
}

CASES = {
    "centered_bertscore": Case(
        **PAIRS, settings={"centering": "sentence", "idf": True, "num_layers": 4}, bad_settings={"num_layers": 99}
    ),
    "twmd": Case(
        **PAIRS,
        settings={"variant": "trwmd", "temperature": 0.05, "centering": "none", "num_layers": 5},
        bad_settings={"temperature": -1.0},
    ),
    "moverscore": Case(
        **PAIRS,
        settings={
            "version": "v1",
            "n_gram": 2,
            "score_form": "1/(1+wmd)",
            "remove_punctuation": "no",
            "stop_words": "the, a",
        },
        compute_settings={
            "version": "v1",
            "n_gram": 2,
            "score_form": "1/(1+wmd)",
            "remove_punctuation": False,
            "stop_words": ["the", "a"],
        },
        bad_settings={"n_gram": 0},
    ),
    "lazy_emd": Case(
        **PAIRS,
        settings={"lang": "zh", "reg_c": "inf", "reg_r": 0.5, "epsilon": 0.02, "idf": True},
        compute_settings={"lang": "zh", "reg_c": float("inf"), "reg_r": 0.5, "epsilon": 0.02, "idf": True},
        bad_settings={"reg_c": -1.0},
        settings_warns=("lang='zh' is scored with the English embedded model",),
    ),
    "sbertscore": Case(
        **PAIRS,
        settings={"centering": "batch", "lang": "de"},
        bad_settings={"lang": "xx"},
        warns=(r"1 prediction\(s\) and 0 reference\(s\) hold no sentence",),
        settings_warns=("lang='de' is scored with the English embedded model", "centering='batch' over only 7"),
    ),
}


def test_every_metric_has_an_app_and_a_case():
    assert set(APPS) == set(moverkit.METRICS)
    assert set(CASES) == set(APPS)


def _module_scores(result: dict) -> dict:
    """The module's per-prediction score lists (everything but the hashcode and alignments)."""
    return {key: value for key, value in result.items() if key not in ("hashcode", "alignment")}


@pytest.mark.slow
@pytest.mark.parametrize("with_settings", [False, True], ids=["defaults", "settings"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_app_gives_the_modules_numbers(name, with_settings, client_of, load_metric):
    case = CASES[name]
    settings = case.settings if with_settings else {}
    compute_settings = (case.compute_settings or case.settings) if with_settings else {}
    outputs = client_of(name).predict(**case.boxes(), **settings, api_name="/score")
    summary, table, hashcode, shown, matrix, plot = outputs

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = load_metric(name).compute(
            predictions=case.predictions, references=case.references, **compute_settings
        )
    warned = [str(w.message) for w in caught if issubclass(w.category, MoverkitWarning)]
    patterns = case.warns + (case.settings_warns if with_settings else ())
    assert len(warned) == len(patterns) and all(any(re.search(p, m) for m in warned) for p in patterns), warned
    scores = _module_scores(expected)
    # Scores come first, so that they stay in view on a narrow screen; each header says its direction.
    closer = "higher is closer" if spec(name).higher_is_better else "lower is closer"
    assert table["headers"] == ["#", *(f"{key} ({closer})" for key in scores), "prediction", "references"]
    columns = list(zip(*table["data"]))
    assert list(columns[1 + len(scores)]) == case.predictions
    shown_columns = list(zip(*table["metadata"]["display_value"]))
    for i, key in enumerate(scores, start=1):  # the table holds and shows 4 decimals (0.8210, not 0.821)
        assert list(columns[i]) == pytest.approx([round(v, 4) for v in scores[key]], rel=0, abs=1e-12), key
        assert list(shown_columns[i]) == [f"{v:.4f}" for v in scores[key]], key
    assert hashcode == expected["hashcode"]
    for key, values in scores.items():
        assert f"{sum(values) / len(values):.4f}" in summary, key
    assert [value for _, value in shown["choices"]] == list(range(len(case.predictions)))

    # The heatmap: a matplotlib figure sent as an image.
    from PIL import Image

    assert plot["type"] == "matplotlib"
    header, data = plot["plot"].split(",", 1)
    assert header == "data:image/webp;base64"
    width, height = Image.open(io.BytesIO(base64.b64decode(data))).size
    assert width >= 300 and height >= 200


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_shows_the_modules_error(name, client_of, load_metric):
    from gradio_client.exceptions import AppError

    case = CASES[name]
    module = load_metric(name)
    attempts = [
        ({"predictions_text": "one\ntwo", "references_text": "one"}, (["one", "two"], ["one"]), {}),
        (case.boxes(), (case.predictions, case.references), case.bad_settings),
    ]
    for boxes, (predictions, references), settings in attempts:
        with pytest.raises((ValueError, TypeError)) as expected:
            module.compute(predictions=predictions, references=references, **settings)
        with pytest.raises(AppError) as shown:
            client_of(name).predict(**boxes, **settings, api_name="/score")
        assert str(shown.value) == str(expected.value)
        assert "Traceback" not in str(shown.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_space_refuses_models_it_does_not_offer_alike_for_any_path(name, client_of, monkeypatch, tmp_path):
    from gradio_client.exceptions import AppError

    monkeypatch.setenv("SPACE_ID", f"acme/{name}")  # as on the Hub; the page reads it at each press
    monkeypatch.delenv("MOVERKIT_DEMO_MODELS", raising=False)
    messages = set()
    for model in (str(tmp_path), str(tmp_path / "absent"), "some-org/some-model"):
        with pytest.raises(AppError, match="^this page does not offer the model") as refused:
            client_of(name).predict(
                predictions_text="a cat", references_text="the cat", model_type=model, api_name="/score"
            )
        messages.add(str(refused.value).replace(repr(model), "MODEL"))
    assert len(messages) == 1


def test_empty_box_is_refused_with_a_message(client_of):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="type at least one prediction"):
        client_of(APPS[0]).predict(predictions_text=" \n", references_text="a", api_name="/score")


def _blocks(demo, kind):
    import gradio as gr

    return [block for block in demo.blocks.values() if isinstance(block, getattr(gr, kind))]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_apps_own_examples_score_without_a_warning(name, running_app, load_metric):
    # Each example holds enough distinct texts for batch centering and for IDF weights: a visitor
    # trying the page's own examples must not be told the input is too small.
    from moverkit.demo import score

    app, _ = running_app(name)
    (examples,) = _blocks(app.demo, "Dataset")
    assert len(examples.samples) >= 2
    for predictions, references in examples.samples:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            score(load_metric(name), predictions, references, {})
        assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == [], predictions


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_setting_shows_the_value_it_uses(name, running_app):
    """A box shows its value or, blank, the value blank gives (greyed); a dropdown its entry; none
    a bare "(default)"."""
    import gradio as gr

    app, _ = running_app(name)
    settings = [b for b in app.demo.blocks.values() if str(getattr(b, "elem_id", "")).startswith("param-")]
    assert settings
    for block in settings:
        if isinstance(block, gr.Textbox):
            shown = block.value or block.placeholder
        elif isinstance(block, gr.Dropdown):
            shown = next(label for label, value in block.choices if value == block.value)
        else:  # a checkbox shows its state, an upload is empty
            assert isinstance(block, (gr.Checkbox, gr.File)), block
            continue
        assert shown and "default" not in shown, (block.elem_id, shown)


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_label_names_code(name, running_app):
    # Labels and hints speak to users: commands they can type, never a Python call or a private name.
    app, _ = running_app(name)
    for block in app.demo.blocks.values():
        for text in (getattr(block, "label", None), getattr(block, "info", None)):
            if isinstance(text, str):
                assert not re.search(r"\w\(|\b_[a-z]|\w\.\w+\(", text), (block.elem_id, text)
