"""rescale_with_baseline for all five metrics (issue 23, item 4): the rescaled score is the documented
map of the raw score and the file's value ((s - b) / (1 - b) for a similarity, d / b for lazy_emd),
identical texts keep the best value, a baseline is never applied to a call it was not fitted for
(another metric, variant, setting, centering, layer), and fit -> file -> read round-trips."""

from __future__ import annotations

import csv
import math
import warnings

import pytest

from moverkit import functional
from moverkit._core.call.baseline import BASELINE_DIR, baseline_csv, baseline_name, read_baseline, settings_key
from moverkit.baselines import baseline_columns, fit_baseline
from moverkit.cli import main
from moverkit.facts.specs import SPECS

METRICS = sorted(SPECS)
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
LAYER = {"sbertscore": -1}  # the others: the embedded model's default layer, 6
PAIRS = (
    ["The cat sat on the mat.", "Stocks fell sharply on Monday.", "He went home early."],
    ["A cat was sitting on the mat.", "Parliament passed a law.", "He left for home."],
)
TEXTS = [
    "the cat sat on the mat",
    "stocks fell on monday",
    "he went home early",
    "a law was passed",
    "rain is expected this week",
    "the museum opens at nine",
    "scientists found water",
    "the team won the final",
    "prices keep rising",
    "a new bridge links two towns",
]


def _shipped(name: str):
    """The shipped file of ``name``'s default settings, as rows of strings (read without moverkit)."""
    centering = "corpus" if name in ("centered_bertscore", "twmd") else "none"
    path = BASELINE_DIR / baseline_name(name, MODEL, centering)
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return path, rows[0], {int(row[0]): row[1:] for row in rows[1:]}


def _baseline_values(name: str) -> list[float]:
    _, header, table = _shipped(name)
    row = table[LAYER.get(name, 6)]
    return [float(v) for v in row[: len(header) - 1 - (header[-1] == "SETTINGS")]]


def _expected(name: str, raw: list[float], b: float) -> list[float]:
    # (s - b) / (1 - b) for a similarity; d / b for a distance (lazy_emd), written out by hand
    if name == "lazy_emd":
        return [d / b for d in raw]
    return [(s - b) / (1 - b) for s in raw]


@pytest.mark.parametrize("name", METRICS)
def test_rescaled_score_is_the_formula_of_the_raw_score_and_the_shipped_value(name):
    function = getattr(functional, name)
    spec = SPECS[name]
    raw = function(*PAIRS)
    rescaled = function(*PAIRS, rescale_with_baseline=True)
    values = _baseline_values(name)
    for key, b in zip(spec.outputs, values):
        assert rescaled[key] == pytest.approx(_expected(name, raw[key], b), abs=1e-12), key
    assert f"_rescaled={','.join(f'{b:.6f}' for b in values)}_version=" in rescaled["hashcode"]
    assert rescaled["hashcode"].replace(f"_rescaled={','.join(f'{b:.6f}' for b in values)}", "") == raw["hashcode"]
    # The shipped baseline of the default settings is the spec's "unrelated" reference point.
    assert values[-1] == pytest.approx(spec.unrelated, abs=5e-4)


@pytest.mark.parametrize("name", [name for name in METRICS if SPECS[name].identical == SPECS[name].best])
def test_identical_texts_keep_exactly_the_best_value(name):
    spec = SPECS[name]
    texts = PAIRS[0] + PAIRS[1] + ["the " * 30]
    result = getattr(functional, name)(texts, texts, rescale_with_baseline=True)
    for key in spec.outputs:
        assert result[key] == [spec.best] * len(texts), key
    assert spec.rescaled(spec.best) == spec.best


@pytest.mark.parametrize("name", METRICS)
def test_the_shipped_file_records_the_default_settings(name):
    """Every file but centered_bertscore's (bert-score's format) holds the settings it was fitted
    under: those of a default call, so a refit of the shipped corpus statistic cannot go unnoticed."""
    path, header, table = _shipped(name)
    if name == "centered_bertscore":
        assert header == ["LAYER", "P", "R", "F"] and sorted(table) == list(range(7))
        return
    assert header == ["LAYER", *baseline_columns(name), "SETTINGS"]
    assert sorted(table) == [LAYER.get(name, 6)]
    default = getattr(functional, name)(*PAIRS)["hashcode"]
    assert table[LAYER.get(name, 6)][-1] == settings_key(default)


# One setting per metric under which the shipped baseline does not hold: refused, naming fit-baseline.
MISMATCHES = [
    ("twmd", {"variant": "trwmd"}, "header must be LAYER,TRWMD"),
    ("twmd", {"temperature": 0.5}, r"fitted under other settings.*temperature=0\.1.*temperature=0\.5"),
    ("twmd", {"sinkhorn_iterations": 3}, "fitted under other settings"),
    ("twmd", {"centering": "none"}, "no baseline ships .* centering='none' for twmd"),
    ("twmd", {"num_layers": 3}, "no row for layer 3"),
    ("moverscore", {"version": "v1"}, "fitted under other settings"),
    ("moverscore", {"idf": False}, r"fitted under other settings.*the file has idf"),
    ("moverscore", {"centering": "dim"}, "no baseline ships .* for moverscore"),
    ("lazy_emd", {"epsilon": 0.05}, r"fitted under other settings.*epsilon=0\.009.*epsilon=0\.05"),
    ("lazy_emd", {"idf": True}, "fitted under other settings"),
    ("lazy_emd", {"reg_c": 1.0}, "fitted under other settings"),
    ("lazy_emd", {"max_length": 8}, "fitted under other settings"),
    ("sbertscore", {"centering": "dim"}, "no baseline ships .* for sbertscore"),
]


@pytest.mark.parametrize(("name", "kwargs", "message"), MISMATCHES)
def test_a_mismatched_setting_is_refused_naming_fit_baseline(name, kwargs, message, recwarn):
    with pytest.raises(ValueError, match=message) as caught:
        getattr(functional, name)(*PAIRS, rescale_with_baseline=True, **kwargs)
    assert "moverkit fit-baseline" in str(caught.value)


@pytest.mark.parametrize("name", METRICS)
def test_another_model_without_baseline_path_is_refused(name, tiny_model_path):
    with pytest.raises(
        ValueError, match=rf"no baseline ships for model .* for {name} .*moverkit fit-baseline --metric {name}"
    ):
        getattr(functional, name)(*PAIRS, model_type=tiny_model_path, centering="none", rescale_with_baseline=True)


@pytest.mark.slow
def test_a_baseline_of_another_metric_is_refused():
    twmd_file = _shipped("twmd")[0]
    for name in ("lazy_emd", "moverscore", "sbertscore", "centered_bertscore"):
        with pytest.raises(ValueError, match="header must be .*found LAYER,TWMD,SETTINGS"):
            getattr(functional, name)(*PAIRS, rescale_with_baseline=True, baseline_path=str(twmd_file))
    # sbertscore's P,R,F file has the header of centered_bertscore, but sentence vectors only (layer -1)
    with pytest.raises(ValueError, match=r"no row for layer 6 \(it has layers -1\)"):
        functional.centered_bertscore(*PAIRS, rescale_with_baseline=True, baseline_path=str(_shipped("sbertscore")[0]))


@pytest.mark.parametrize("name", METRICS)
def test_fit_file_read_round_trip(name, tiny_model_path, tmp_path):
    """A baseline fitted on random pairs, written, read back and applied to those same pairs: their
    rescaled mean is the rescaled value of the unrelated point, 0 (1 for lazy_emd), up to the
    file's 10 decimals."""
    from moverkit.baselines import random_pairs

    options = {"variant": "trwmd"} if name == "twmd" else {}
    layers = None if name == "sbertscore" else [2]
    rows = fit_baseline(
        TEXTS, metric=name, model_type=tiny_model_path, centering="none", layers=layers, n_pairs=12, options=options
    )
    columns = baseline_columns(name, options)
    path = tmp_path / f"{name}.csv"
    path.write_text(baseline_csv(rows, columns))
    layer = -1 if name == "sbertscore" else 2
    assert [row[0] for row in rows] == [layer]
    assert read_baseline(path, layer, columns).tolist() == pytest.approx(rows[0][1 : 1 + len(columns)], abs=1e-10)
    call = {"model_type": tiny_model_path, "centering": "none", **options}
    if name != "sbertscore":
        call["num_layers"] = 2
    predictions, references = random_pairs(TEXTS, 12, 0)
    rescaled = getattr(functional, name)(
        predictions, references, rescale_with_baseline=True, baseline_path=str(path), **call
    )
    unrelated = 1.0 if name == "lazy_emd" else 0.0
    for key in [k for k in rescaled if k != "hashcode"]:
        assert math.fsum(rescaled[key]) / len(rescaled[key]) == pytest.approx(unrelated, abs=1e-8), key
    if name != "centered_bertscore":  # the others' files record their settings: another call is refused
        other = {**call, "centering": "dim"}
        with pytest.raises(ValueError, match=r"fitted under other settings.*center=none.*center=dim"):
            getattr(functional, name)(
                predictions, references, rescale_with_baseline=True, baseline_path=str(path), **other
            )


def test_fit_baseline_command_fits_any_metric_with_its_options(tiny_model_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "lazy.csv"
    args = [
        "fit-baseline",
        "--metric",
        "lazy_emd",
        "--texts",
        str(texts),
        "--out",
        str(out),
        "--model",
        tiny_model_path,
    ]
    args += ["--pairs", "8", "--layers", "1", "--arg", "epsilon=0.05", "--arg", "idf=true"]
    assert main(args) == 0
    assert "lazy_emd baseline of 8 random pairs" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert lines[0] == "LAYER,LAZY_EMD,SETTINGS" and lines[1].startswith("1,")
    assert "_idf_" in lines[1] and "epsilon=0.05" in lines[1]
    call = {"model_type": tiny_model_path, "num_layers": 1, "rescale_with_baseline": True, "baseline_path": str(out)}
    result = functional.lazy_emd(*PAIRS, epsilon=0.05, idf=True, **call)
    assert all(v >= 0 for v in result["lazy_emd"])
    with pytest.raises(ValueError, match="fitted under other settings"):
        functional.lazy_emd(*PAIRS, **call)  # epsilon 0.009, no IDF


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "sbertscore", "--layers", "1"], "sbertscore scores sentence vectors: it has no layers"),
        (["--metric", "twmd", "--arg", "temperature"], "is not KEY=VALUE"),
        (["--metric", "twmd", "--arg", "colour=red"], "options: twmd takes no argument 'colour'"),
        (["--metric", "twmd", "--arg", "num_layers=3"], "set by fit_baseline's own argument"),
        (["--metric", "twmd", "--centering-stats", "x.npz"], "--centering-stats is used only with --centering corpus"),
        (["--metric", "bleu"], "invalid choice: 'bleu'"),
    ],
)
def test_fit_baseline_command_refuses_bad_options(args, message, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "out.csv"
    try:
        code = main(["fit-baseline", "--texts", str(texts), "--out", str(out), "--pairs", "2", *args])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert "error: " in err and message in err and "Traceback" not in err
    assert not out.exists()


def test_spec_states_the_rescaled_reference_points_and_range():
    for name, spec in SPECS.items():
        points = spec.rescaled_reference_points()
        assert points["identical texts"] == spec.rescaled(spec.identical)
        assert spec.rescaled(spec.best) == spec.best
        assert points["unrelated texts"] == (1.0 if name == "lazy_emd" else 0.0)
        assert spec.better(points["identical texts"], points["a machine translation"])
        assert spec.better(points["a machine translation"], points["unrelated texts"])
        if spec.higher_is_better:
            assert spec.rescaling == "(s - b) / (1 - b)" and spec.rescaled_high == 1.0
            assert spec.rescaled_low < min(spec.low, 0.0)  # below 0, below -1 for the [-1, 1] metrics
        else:
            assert spec.rescaling == "s / b" and (spec.rescaled_low, spec.rescaled_high) == (0.0, math.inf)


def test_rescaled_lazy_emd_stays_a_distance_and_rescaled_similarities_may_pass_minus_one():
    # lazy_emd: >= 0, an empty side 1 / b; a similarity: a pair as far apart as possible (s = -1)
    # rescales below -1, as the cards say.
    b = _baseline_values("lazy_emd")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty texts may warn: tested in lazy_emd's own file
        empty = functional.lazy_emd(["", "a cat"], ["a cat", "a dog"], rescale_with_baseline=True)
    assert empty["lazy_emd"][0] == pytest.approx(1.0 / b, abs=1e-12) and empty["lazy_emd"][1] >= 0
    assert SPECS["centered_bertscore"].rescaled(-1.0) < -1.0
