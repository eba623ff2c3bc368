"""moverkit.tuning and settings files: the grid scores exactly what the metric gives under each
setting, the cross-validation holds each group out, and a settings file applies in every metric,
the CLI and compare, with its digest in the hashcode."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import moverkit
from moverkit import functional
from moverkit.cli import main
from moverkit.facts.specs import spec
from moverkit.formats.settings import Settings, load_settings
from moverkit.integrations.registry import REGISTRY
from moverkit.judgments import read_judgments
from moverkit.tuning import expand_grid, score_settings, tune

DATA = "data/wmt17_seg_da_to_en.tsv"


@pytest.fixture(scope="module")
def small():
    """Three language pairs, 8 segments each, of the shared WMT17 file."""
    data = read_judgments(DATA)
    index = [i for g, rows in data.by_group().items() if g in ("cs-en", "de-en", "zh-en") for i in rows[:8]]
    return (
        [data.predictions[i] for i in index],
        [data.references[i] for i in index],
        [data.human[i] for i in index],
        [data.groups[i] for i in index],
    )


GRIDS = {
    "twmd": [
        {"num_layers": [3, 6], "centering": ["none", "corpus"], "variant": ["twmd"], "temperature": [0.02, 0.2]},
        {"num_layers": [5], "centering": ["batch"], "variant": ["trwmd", "cka", "sbert"]},
    ],
    "centered_bertscore": {"num_layers": [2, 6], "centering": ["none", "batch"], "idf": [False, True]},
    "lazy_emd": {"num_layers": [4], "centering": ["none"], "idf": [True], "epsilon": [0.009, 0.05]},
    "moverscore": {"num_layers": [-2, 6], "centering": ["none"], "n_gram": [1, 2]},
    "sbertscore": {"centering": ["none", "batch"]},
}


@pytest.mark.slow
@pytest.mark.parametrize("metric", sorted(REGISTRY))
def test_every_setting_scores_what_the_metric_gives(small, metric):
    """One forward pass for all layers, one preparation per layer and centering: the same numbers
    as a call of the metric with those arguments (the encoder cut at that layer)."""
    predictions, references, _, _ = small
    settings = expand_grid(GRIDS[metric])
    if metric != "sbertscore":
        settings = [{"centering": "corpus" if metric == "twmd" else "none", **s} for s in settings]
    scores, seconds = score_settings(predictions, references, {metric: settings})
    assert seconds["score"] > 0
    for setting, got in zip(settings, scores[metric]):
        output = setting.get("variant", "twmd") if metric == "twmd" else spec(metric).main  # twmd's key is the variant
        expected = getattr(functional, metric)(predictions, references, **setting)[output]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6, err_msg=str(setting))


@pytest.mark.slow
def test_tune_cross_validates_by_group(small):
    predictions, references, human, groups = small
    result = tune(predictions, references, human, groups, "twmd", GRIDS["twmd"])
    assert result.groups == ["cs-en", "de-en", "zh-en"]
    assert result.correlations.shape == (len(result.settings), 3)
    # The default (layer 6, corpus centering, twmd at T = 0.1) is not in this grid: it is added.
    assert result.settings[result.default] == {
        "num_layers": 6,
        "centering": "corpus",
        "variant": "twmd",
        "temperature": None,
    }
    # cka and sbert ignore the temperature: listed once each.
    assert sum(s["variant"] == "cka" for s in result.settings) == 1
    for k, fold in enumerate(result.folds):
        others = [j for j in range(3) if j != k]
        chosen = int(np.argmax(np.nanmean(result.correlations[:, others], axis=1)))
        assert fold["chosen"] == result.settings[chosen]
        assert fold["tuned"] == pytest.approx(result.correlations[chosen, k])
        assert fold["default"] == pytest.approx(result.correlations[result.default, k])
    assert result.chosen == result.settings[int(np.argmax(result.correlations.mean(axis=1)))]
    # The reported correlation is the one of the metric's own scores.
    setting = result.settings[result.best]
    scores = functional.twmd(predictions, references, **setting)["twmd"]
    rows = [i for i, g in enumerate(groups) if g == "de-en"]
    r = np.corrcoef([scores[i] for i in rows], [human[i] for i in rows])[0, 1]
    assert result.correlations[result.best, 1] == pytest.approx(r, abs=1e-9)


@pytest.mark.slow
def test_a_distance_is_sign_flipped(small):
    predictions, references, human, groups = small
    result = tune(predictions, references, human, groups, "lazy_emd", GRIDS["lazy_emd"])
    scores = functional.lazy_emd(predictions, references, **result.settings[0])["lazy_emd"]
    rows = [i for i, g in enumerate(groups) if g == "cs-en"]
    r = np.corrcoef([scores[i] for i in rows], [human[i] for i in rows])[0, 1]
    assert result.correlations[0, 0] == pytest.approx(-r, abs=1e-9)


@pytest.mark.parametrize(
    "grid, message",
    [
        ({"dtype": ["bfloat16"]}, "not an argument of twmd that tuning varies"),
        ({"num_layers": []}, "non-empty list"),
        ({"num_layers": "6"}, "non-empty list"),
        ([], "non-empty list"),
        ({"num_layers": [99]}, "grid: num_layers must be an int from -7 to 6"),
        ({"num_layers": ["6"]}, "grid: num_layers must be an int from -7 to 6 for .*, got '6'"),
        (
            {"num_layers": [[6]]},
            r"grid\['num_layers'\]: each value must be a string, number, boolean or null, got \[6\]",
        ),
        ({"temperature": [{"a": 1}]}, r"grid\['temperature'\]: each value must be"),
        (
            {"num_layers": list(range(100)), "temperature": list(range(100))},
            "grid: 10,000 settings, more than the 2,000",
        ),
    ],
)
def test_bad_grids_are_refused(small, grid, message):
    predictions, references, human, groups = small
    with pytest.raises(ValueError, match=message):
        tune(predictions, references, human, groups, "twmd", grid)


def test_a_grid_too_large_is_refused_before_any_work(small, monkeypatch):
    """A grid of 10^6 settings ran unbounded (killed after 120 s at 1.7 GB): it is counted, not
    expanded, and refused before the model loads."""
    import itertools

    import moverkit.tuning as tuning

    monkeypatch.setattr(tuning, "_model_facts", lambda *a: pytest.fail("loaded the model before counting"))
    monkeypatch.setattr(itertools, "product", lambda *a: pytest.fail("expanded before counting"))
    predictions, references, human, groups = small
    grid = {k: list(range(10)) for k in ("num_layers", "temperature", "sinkhorn_iterations", "normalize", "centering")}
    grid["variant"] = list(range(10))
    with pytest.raises(ValueError, match=r"grid: 1,000,000 settings, more than the 2,000 .*MAX_SETTINGS"):
        tune(predictions, references, human, groups, "twmd", grid)


def _constant_in(monkeypatch, groups, constant_groups, settings_constant=None):
    """Replace the scoring: random scores, constant in ``constant_groups`` (every segment when
    None) under the settings whose index is in ``settings_constant`` (all when None)."""
    import moverkit.tuning as tuning

    def scores(predictions, references, settings, **kwargs):
        (metric, chosen), rng = next(iter(settings.items())), np.random.default_rng(0)
        out = []
        for k in range(len(chosen)):
            row = rng.normal(size=len(predictions))
            if settings_constant is None or k in settings_constant:
                row[[i for i, g in enumerate(groups) if g in constant_groups] if constant_groups else slice(None)] = 0.5
            out.append(row)
        return {metric: out}, {"encode": 0.0, "score": 0.0}

    monkeypatch.setattr(tuning, "score_settings", scores)


def test_a_group_where_every_setting_is_constant_is_refused_by_name(small, monkeypatch, tmp_path, capsys):
    """The metric constant in a group printed and wrote "tuned": NaN; constant in every group,
    tune exited 0 and wrote a settings file."""
    predictions, references, human, groups = small
    _constant_in(monkeypatch, groups, {"de-en"})
    with pytest.raises(ValueError, match=r"twmd scores of group\(s\) de-en are constant under every setting"):
        tune(predictions, references, human, groups, "twmd", {"num_layers": [5, 6]})
    _constant_in(monkeypatch, groups, None)
    out = tmp_path / "s.json"
    argv = ["tune", "--data", DATA, "--metric", "twmd", "--out", str(out), "--grid", '{"num_layers": [5, 6]}']
    assert main(argv) == 2
    error = capsys.readouterr().err.splitlines()[-1]  # after transformers' loading bar, if this process loads the model
    assert error.startswith("moverkit: error: ") and "constant under every setting" in error and "de-en" in error
    assert not out.exists()


def test_a_correlation_that_does_not_exist_is_never_nan_in_the_output(small, monkeypatch):
    """The default setting constant in one group (another setting not): that fold's default
    correlation reads n/a and is null in JSON, never NaN."""
    predictions, references, human, groups = small
    _constant_in(monkeypatch, groups, {"de-en"}, settings_constant={2})  # the default, added after the grid's two
    result = tune(predictions, references, human, groups, "twmd", {"num_layers": [4, 5]})
    assert result.default == 2 and result.folds[1]["default"] is None
    json.dumps(result.to_dict(), allow_nan=False)
    result.to_settings().to_json()  # allow_nan=False
    text = result.to_markdown()
    assert "nan" not in text.lower() and "| de-en |" in text and "n/a" in text


def test_bad_judgments_are_refused(small):
    predictions, references, human, groups = small
    with pytest.raises(TypeError, match=r"human\[0\] must be a number \(a human score\), got '0.5'"):
        tune(predictions, references, ["0.5", *human[1:]], groups, "twmd", {"num_layers": [6]})
    with pytest.raises(ValueError, match="group 'a.u2028b': a name may hold no"):
        tune(predictions, references, human, ["a\u2028b", *groups[1:]], "twmd", {"num_layers": [6]})
    with pytest.raises(ValueError, match="at least two groups"):
        tune(predictions, references, human, ["one"] * len(groups), "twmd", {"num_layers": [6]})
    with pytest.raises(ValueError, match="finite"):
        tune(predictions, references, [float("nan")] * len(groups), groups, "twmd", {"num_layers": [6]})
    with pytest.raises(ValueError, match="one item per segment"):
        tune(predictions, references[:-1], human, groups, "twmd", {"num_layers": [6]})
    with pytest.raises(ValueError, match="metric must be one of"):
        tune(predictions, references, human, groups, "bleu")


@pytest.fixture
def settings_file(tmp_path):
    path = tmp_path / "tuned.json"
    Settings("twmd", {"num_layers": 4, "centering": "none", "temperature": 0.05}, {"data": "test"}).save(path)
    return path


def test_a_settings_file_applies_in_functional_evaluate_and_compare(settings_file):
    predictions, references = ["a cat sat on the mat", "hello there"], ["the cat sat on a mat", "hi there"]
    expected = functional.twmd(predictions, references, num_layers=4, centering="none", temperature=0.05)
    got = functional.twmd(predictions, references, settings=str(settings_file))
    digest = load_settings(settings_file).digest
    assert got["twmd"] == expected["twmd"]
    assert got["hashcode"] == f"{expected['hashcode']}|settings:{digest[:16]}"
    module = moverkit.load("twmd").compute(predictions=predictions, references=references, settings=str(settings_file))
    assert module == got
    # An argument given as well must agree with the file, or be left at its default.
    assert functional.twmd(predictions, references, settings=str(settings_file), num_layers=4) == got
    with pytest.raises(ValueError, match="num_layers=3 contradicts the settings file"):
        functional.twmd(predictions, references, settings=str(settings_file), num_layers=3)
    comparison = moverkit.compare(
        references,
        {"A": predictions, "B": references},
        ["twmd"],
        metric_kwargs={"twmd": {"settings": str(settings_file)}},
    )
    assert comparison.hashcodes["twmd"].endswith(f"|settings:{digest[:16]}")


def test_an_argument_given_at_its_default_value_contradicting_the_file_is_refused(settings_file, capsys):
    # The file sets centering="none"; "corpus" is twmd's default, given explicitly: the file won
    # silently before (functional, the evaluate module and the CLI alike).
    predictions, references = ["a cat sat on the mat"], ["the cat sat on a mat"]
    message = "centering='corpus' contradicts the settings file, which sets centering='none'"
    with pytest.raises(ValueError, match=message):
        functional.twmd(predictions, references, settings=str(settings_file), centering="corpus")
    with pytest.raises(ValueError, match=message):
        moverkit.load("twmd").compute(
            predictions=predictions, references=references, settings=str(settings_file), centering="corpus"
        )
    text = settings_file.parent / "t.txt"
    text.write_text("a cat sat on the mat\n", encoding="utf-8")
    argv = ["score", "--settings", str(settings_file), "--predictions", str(text), "--references", str(text)]
    for extra in (["--arg", "centering=corpus"], ["--centering", "corpus"]):
        assert main([*argv, *extra]) == 2, extra
        assert message in capsys.readouterr().err


def test_the_digest_follows_the_arguments_only():
    a = Settings("twmd", {"num_layers": 4}, {"data": "x"})
    assert a.digest == Settings("twmd", {"num_layers": 4}, {"data": "y"}).digest
    assert a.digest != Settings("twmd", {"num_layers": 5}, {"data": "x"}).digest
    assert a.digest != Settings("lazy_emd", {"num_layers": 4}, {"data": "x"}).digest
    # The canonical form of version 1 (json's default separators), so that a file keeps its digest.
    canonical = json.dumps({"metric": "twmd", "arguments": {"num_layers": 4}}, sort_keys=True)
    assert a.digest == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    "record, message",
    [
        ({"format": "other"}, "not a moverkit-settings file"),
        ({"version": 2}, "version 2"),
        ({"metric": "bleu"}, "none of"),
        ({"arguments": {"batch_size": 8}}, "'batch_size' is not a setting of twmd"),
        ({"arguments": {"num_layrs": 8}}, "'num_layrs' is not a setting of twmd"),
        ({"arguments": {"temperature": {"x": 1}}}, "must be a JSON string"),
        ({"arguments": []}, "'arguments' must be a JSON object"),
    ],
)
def test_bad_settings_files_are_refused(tmp_path, record, message):
    path = tmp_path / "bad.json"
    base = {"format": "moverkit-settings", "version": 1, "metric": "twmd", "arguments": {}, "tuning": {}}
    path.write_text(json.dumps({**base, **record}))
    with pytest.raises(ValueError, match=message):
        load_settings(path, "twmd", functional.twmd)
    with pytest.raises(ValueError, match=message):  # the metric checks the file it is given
        functional.twmd(["a cat"], ["a dog"], settings=str(path))
    path.write_text(
        '{"format": "moverkit-settings", "version": 1, "metric": "twmd", "arguments": {"temperature": NaN}, "tuning": {}}'
    )
    with pytest.raises(ValueError, match="not a JSON file .NaN is not a number JSON allows"):
        load_settings(path)


def test_settings_of_another_metric_are_refused(settings_file):
    with pytest.raises(ValueError, match="holds settings of twmd, not of lazy_emd"):
        functional.lazy_emd(["a"], ["b"], settings=str(settings_file))


@pytest.mark.slow
def test_the_cli_tunes_and_scores_with_the_file(tmp_path, capsys):
    data = read_judgments(DATA)
    rows = [i for g, ix in data.by_group().items() if g in ("cs-en", "de-en") for i in ix[:6]]
    tsv = tmp_path / "judgments.tsv"
    lines = ["lp\thypothesis\treference\thuman"]
    lines += [f"{data.groups[i]}\t{data.predictions[i]}\t{data.references[i]}\t{data.human[i]}" for i in rows]
    tsv.write_text("\n".join(lines) + "\n")
    out = tmp_path / "tuned.json"
    grid = json.dumps({"num_layers": [5, 6], "centering": ["none"], "temperature": [0.05, 0.1]})
    assert main(["tune", "--data", str(tsv), "--metric", "twmd", "--grid", grid, "--out", str(out)]) == 0
    report = capsys.readouterr().out
    assert "held-out group" in report and "cs-en" in report and "de-en" in report
    tuned = load_settings(out)
    assert tuned.metric == "twmd" and set(tuned.arguments) == {"num_layers", "centering", "temperature"}
    assert len(tuned.tuning["folds"]) == 2

    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a cat sat\nhello\n")
    ref.write_text("the cat sat\nhi\n")
    scores = tmp_path / "scores.jsonl"
    assert (
        main(
            ["score", "--settings", str(out), "--predictions", str(hyp), "--references", str(ref), "--out", str(scores)]
        )
        == 0
    )
    first = json.loads(scores.read_text().splitlines()[0])
    expected = functional.twmd(["a cat sat"], ["the cat sat"], **tuned.arguments)["twmd"][0]
    assert first["twmd"] == pytest.approx(expected, abs=1e-6)
    assert tuned.digest[:16] in capsys.readouterr().out


def test_the_cli_refuses_bad_tuning_arguments(tmp_path, capsys):
    assert (
        main(["tune", "--data", str(tmp_path / "missing.tsv"), "--metric", "twmd", "--out", str(tmp_path / "o.json")])
        == 2
    )
    assert "moverkit: error:" in capsys.readouterr().err
    assert (
        main(["tune", "--data", DATA, "--metric", "twmd", "--grid", "{not json", "--out", str(tmp_path / "o.json")])
        == 2
    )
    assert "--grid" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_a_constant_setting_is_never_chosen_and_constant_humans_are_refused(small):
    from moverkit.tuning import best_setting

    nan = float("nan")
    assert best_setting(np.array([[nan, nan], [0.1, 0.2], [0.3, nan]])) == 2
    assert best_setting(np.array([[nan, nan], [-0.5, -0.4]])) == 1
    predictions, references, human, groups = small
    flat = [0.5 if g == "de-en" else h for h, g in zip(human, groups)]
    with pytest.raises(ValueError, match="de-en are all equal"):
        tune(predictions, references, flat, groups, "twmd", {"num_layers": [6]})


@pytest.mark.slow
def test_a_layer_counted_from_the_top_is_the_same_setting(small):
    predictions, references, human, groups = small
    result = tune(predictions, references, human, groups, "centered_bertscore", {"num_layers": [-1, 6, 5]})
    assert [s["num_layers"] for s in result.settings] == [6, 5]


def test_deeply_nested_json_is_a_message_naming_the_file(tmp_path, capsys):
    """A settings file or a --grid nested past Python's recursion limit gave a RecursionError
    traceback (exit 1), from the CLI and from load_settings."""
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "deep.json"
    path.write_text(deep)
    with pytest.raises(ValueError, match=f"settings file {path}: not a JSON file moverkit reads .nested too deeply"):
        load_settings(path)
    t = str(tmp_path / "t.txt")
    (tmp_path / "t.txt").write_text("a cat\n")
    assert main(["score", "--metric", "twmd", "--predictions", t, "--references", t, "--settings", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"moverkit: error: settings file {path}: not a JSON file moverkit reads (nested too deeply")
    out = tmp_path / "s.json"
    assert main(["tune", "--data", DATA, "--metric", "twmd", "--out", str(out), "--grid", deep]) == 2
    assert capsys.readouterr().err.startswith(
        "moverkit: error: --grid: not a JSON file moverkit reads (nested too deeply"
    )


def test_a_group_a_report_row_cannot_hold_is_refused_with_its_line(tmp_path):
    path = tmp_path / "j.tsv"
    path.write_text("lp\thypothesis\treference\thuman\nde-en\ta\tb\t0.1\nde\u2028en\ta\tb\t0.2\n")
    with pytest.raises(ValueError, match=f"{path} line 3: column 'lp' 'de.u2028en': a name may hold no"):
        read_judgments(path)
