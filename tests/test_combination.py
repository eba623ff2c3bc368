"""moverkit.combination: the fits on synthetic data with known answers, the file and its checks,
scoring real pairs with the embedded model, and ``moverkit combine``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from moverkit import combination as combo
from moverkit.cli import main

PAIRS = [
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("a cat was sitting on the mat", "the cat sat on the mat"),
    ("stocks fell sharply today", "shares dropped steeply on tuesday"),
    ("he went home", "rain is expected tomorrow"),
    ("", "an empty prediction"),
]


def synthetic(n=400, seed=0):
    """Three components of different scales; human = 2 z1 + 0.5 z2 - 1 z3 + noise (z3 must get 0)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3))
    features = {"twmd": 0.6 + 0.1 * z[:, 0], "chrF": 50 + 10 * z[:, 1], "BLEU": 20 + 5 * z[:, 2]}
    human = 2 * z[:, 0] + 0.5 * z[:, 1] - 1.0 * z[:, 2] + 0.05 * rng.standard_normal(n)
    return features, human


def test_nnls_recovers_known_weights_and_zeroes_a_negative_one():
    features, human = synthetic()
    level = combo.fit_segment(features, human)
    # The true weights of the z-scores: 2 and 0.5 (up to the sample std being near 1); -1 is clipped to 0.
    assert level.weights[0] == pytest.approx(2.0, rel=0.1)
    assert level.weights[1] == pytest.approx(0.5, rel=0.15)
    assert level.weights[2] == 0.0
    assert level.mean[1] == pytest.approx(50, abs=1.5)
    assert level.std[1] == pytest.approx(10, rel=0.1)


def test_z_normalization_uses_the_training_segments_only():
    features, human = synthetic(300)
    groups = ["a"] * 100 + ["b"] * 100 + ["c"] * 100
    shifted = {name: np.asarray(v, dtype=float).copy() for name, v in features.items()}
    shifted["chrF"][:100] += 30  # group a's chrF is off by a constant
    folds = combo.leave_one_group_out(shifted, human, groups)
    train = {name: v[100:] for name, v in shifted.items()}
    assert folds["a"].fit == combo.fit_segment(train, human[100:])
    assert folds["a"].fit.mean[1] == pytest.approx(float(np.mean(shifted["chrF"][100:])))
    assert list(folds["a"].index) == list(range(100))
    expected = sum(
        w * (shifted[n][:100] - m) / s
        for n, m, s, w in zip(shifted, folds["a"].fit.mean, folds["a"].fit.std, folds["a"].fit.weights)
    )
    np.testing.assert_allclose(folds["a"].scores, expected)
    # The held-out group's own mean would centre its scores at 0; the training mean does not.
    assert folds["a"].scores.mean() > 1.0


def test_constant_component_and_all_zero_weights_are_errors():
    features, human = synthetic(50)
    with pytest.raises(ValueError, match="'BLEU' is constant"):
        combo.fit_segment({**features, "BLEU": np.ones(50)}, human)
    with pytest.raises(ValueError, match="every weight is 0"):
        combo.fit_segment({"BLEU": features["BLEU"]}, -np.asarray(features["BLEU"]))


def test_system_level_fit_on_synthetic_test_sets():
    rng = np.random.default_rng(1)
    test_sets = []
    for t in range(4):
        systems = [f"s{j}" for j in range(8)]
        a, b = rng.standard_normal(8), rng.standard_normal(8)
        # Each test set has its own offsets: only within-set differences carry the signal.
        features = {
            "twmd": {s: 10 * t + 0.1 * x for s, x in zip(systems, a)},
            "chrF": {s: 40 - t + 5 * x for s, x in zip(systems, b)},
        }
        human = {s: 3 * t + a[j] + 0.2 * b[j] for j, s in enumerate(systems)}
        test_sets.append((features, human))
    fit = combo.fit_system(test_sets)
    assert fit.components == ("twmd", "chrF")
    # Within each test set twmd's z-score is a's, chrF's b's: the humans weigh them 1 : 0.2, so
    # leaving a test set out favours the NNLS weights, (1, 0.2) / 1.2, over equal ones.
    assert fit.alpha == 1.0 and fit.held_out[1.0][0] > fit.held_out[0.0][0]
    assert sum(fit.level.weights) == pytest.approx(1) and 4 < fit.level.weights[0] / fit.level.weights[1] < 8
    fitted = combo.Combination(fit.components, system=fit.level)
    for features, human in test_sets:
        scores = combo.system_scores(fitted, {s: {m: features[m][s] for m in fit.components} for s in human})
        names = sorted(human)
        assert np.corrcoef([scores[n] for n in names], [human[n] for n in names])[0, 1] > 0.95
    folds = combo.leave_one_test_set_out(dict(enumerate(test_sets)), fit_on=[0, 1, 2])
    assert folds[3][0] == combo.fit_system(test_sets[:3])
    assert folds[0][0] == combo.fit_system(test_sets[1:3])


def test_system_level_stays_at_equal_weights_unless_held_out_pairs_improve():
    """w(a) = (1 - a) / M + a v / sum(v); a = 0 unless leaving a test set out orders more pairs."""
    rng = np.random.default_rng(2)
    test_sets = []
    for _ in range(5):
        systems = [f"s{j}" for j in range(6)]
        a, b = rng.standard_normal(6), rng.standard_normal(6)
        features = {"twmd": dict(zip(systems, a)), "chrF": dict(zip(systems, b))}
        test_sets.append((features, dict(zip(systems, a + b))))  # both count alike: nothing to gain
    fit = combo.fit_system(test_sets)
    assert sorted(fit.held_out) == list(combo.ALPHAS)
    best = max(agree for agree, _ in fit.held_out.values())
    assert fit.alpha == min(a for a, (agree, _) in fit.held_out.items() if agree == best)
    assert fit.alpha == 0.0 and fit.level.weights == (0.5, 0.5)
    # One test set: nothing to hold out, equal weights.
    assert combo.fit_system(test_sets[:1]).alpha == 0.0
    # Per-test-set z-scores: a test set's scale and offset change nothing.
    fitted = combo.Combination(fit.components, system=fit.level)
    features, human = test_sets[0]
    systems = {s: {m: features[m][s] for m in fit.components} for s in human}
    scaled = {s: {"twmd": 100 * v["twmd"] + 7, "chrF": v["chrF"] / 3 - 1} for s, v in systems.items()}
    assert combo.system_scores(fitted, scaled) == pytest.approx(combo.system_scores(fitted, systems))
    with pytest.raises(ValueError, match="at least two"):
        combo.system_scores(fitted, {"s0": systems["s0"]})


def test_system_level_refuses_a_test_set_that_orders_nothing():
    features = {"twmd": {"a": 0.1, "b": 0.2}}
    with pytest.raises(ValueError, match="test set 1: 2 system.*all equal"):
        combo.fit_system([(features, {"a": 1.0, "b": 2.0}), (features, {"a": 1.0, "b": 1.0})])


def fitted_combination():
    features, human = synthetic(100)
    return combo.fit((features, human), metric_kwargs={"twmd": {"temperature": 0.1}}, fitted_on={"file": "x"})


def test_save_load_round_trip_and_digest(tmp_path):
    fitted = fitted_combination()
    path = tmp_path / "combo.json"
    fitted.save(path)
    loaded = combo.load(path)
    assert loaded == fitted
    assert loaded.digest == fitted.digest == json.loads(path.read_text())["digest"]
    assert combo.Combination(fitted.components, fitted.metric_kwargs, fitted.segment, None, {}).digest == fitted.digest
    weights = list(fitted.segment.weights)
    weights[1] += 1e-9
    changed = combo.Combination(
        fitted.components,
        fitted.metric_kwargs,
        combo.SegmentLevel(fitted.segment.mean, fitted.segment.std, tuple(weights)),
    )
    assert changed.digest != fitted.digest
    assert combo.Combination(fitted.components, {}, fitted.segment).digest != fitted.digest


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d["segment"]["std"].__setitem__(0, float("nan")),
            "not a JSON file .NaN is not a number JSON allows",
        ),
        (lambda d: d["segment"]["weights"].__setitem__(1, -0.5), "segment.weights of chrF: -0.5 is negative"),
        (lambda d: d["segment"]["std"].__setitem__(2, 0.0), r"segment.std of BLEU: 0.0 is outside \[1e-09, 1e\+09\]"),
        # Extreme but finite statistics: combined() gave inf / -inf before (issue 32, 3.6).
        (lambda d: d["segment"]["std"].__setitem__(0, 1e-300), "segment.std of twmd: 1e-300 is outside"),
        (lambda d: d["segment"]["std"].__setitem__(0, 1e300), "segment.std of twmd: 1e[+]300 is outside"),
        (lambda d: d["segment"]["mean"].__setitem__(1, -1e300), "segment.mean of chrF: -1e[+]300 is beyond"),
        (lambda d: d["segment"]["weights"].__setitem__(1, 1e300), "segment.weights of chrF: 1e[+]300 is beyond"),
        (lambda d: d.update(version=1), "version 1: written by an older moverkit.*fit it again"),
        (lambda d: d["components"].__setitem__(2, "meteor"), "unknown component 'meteor'"),
        (lambda d: d["components"].__setitem__(2, "chrF"), "components: chrF given twice"),
        (lambda d: d.update(version=3), "version 3; this moverkit reads version 2"),
        (lambda d: d.update(format="moverkit-settings"), 'not a moverkit-combination file .no "format"'),
        (lambda d: d.pop("system"), "system: missing"),
        (lambda d: d["segment"].pop("mean"), "segment: an object with exactly mean, std, weights"),
        (lambda d: d["segment"]["mean"].pop(), "segment.mean: 2 values for 3 components"),
        (lambda d: d["segment"]["weights"].__setitem__(0, 3.0), "digest: does not match"),
        (lambda d: d.update(segment=None), "neither level is fitted"),
    ],
)
def test_load_refuses(tmp_path, edit, message):
    path = tmp_path / "combo.json"
    fitted_combination().save(path)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as err:
        combo.load(path)
    assert str(err.value).startswith(f"{path}: ")


def test_load_refuses_all_zero_weights_and_non_json(tmp_path):
    path = tmp_path / "combo.json"
    fitted = fitted_combination()
    with pytest.raises(ValueError, match="segment.weights: all 0"):
        combo.Combination(
            fitted.components, segment=combo.SegmentLevel(fitted.segment.mean, fitted.segment.std, (0, 0, 0))
        )
    path.write_text("[1, 2")
    with pytest.raises(ValueError, match="not a JSON file"):
        combo.load(path)
    path.write_text('[{"format": "moverkit-combination"}]')
    with pytest.raises(ValueError, match="a JSON array, not an object: a moverkit-combination file is one JSON object"):
        combo.load(path)


def test_load_refuses_deeply_nested_json_and_a_path_that_is_none(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=f"^{path}: not a JSON file moverkit reads .nested too deeply"):
        combo.load(path)  # RecursionError before
    with pytest.raises(ValueError, match="^path: a combination file's path .str or Path., got None"):
        combo.load(None)  # TypeError from pathlib before
    with pytest.raises(ValueError, match="^combination: a combination file's path .str or Path., got None"):
        combo.combined(["a"], ["a"], None)
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("a cat\n")
    argv = ["score", "--combination", str(path), "--predictions", str(hyp), "--references", str(hyp)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "moverkit: error:" in err and str(path) in err and "Traceback" not in err


def test_a_combined_score_is_never_infinite():
    """The file's bounds keep a combined score finite for any sane component score; one near the
    float range is refused, not returned as inf."""
    fitted = combo.Combination(("twmd", "chrF"), segment=combo.SegmentLevel((0.0, 0.0), (1e-9, 1e-9), (1e9, 1e9)))
    assert np.isfinite(combo.segment_scores(fitted, {"twmd": [1e9], "chrF": [-1e9]})).all()
    with pytest.raises(ValueError, match="combined score of item 0 overflows"):
        combo.segment_scores(fitted, {"twmd": [1e300], "chrF": [1e300]})
    system = combo.Combination(("twmd", "chrF"), system=combo.SystemLevel((1e-9, 1e-9), (0.5, 0.5)))
    with pytest.raises(ValueError, match="overflows"):
        combo.system_score(system, {"twmd": 1e300, "chrF": 1e300})


def test_combined_equals_the_manual_sum_with_the_embedded_model(tmp_path):
    import sacrebleu

    from moverkit import functional

    predictions, references = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    bert = functional.centered_bertscore(predictions, references)
    chrf = [sacrebleu.metrics.CHRF().sentence_score(p, [r]).score for p, r in PAIRS]
    fitted = combo.Combination(
        ("centered_bertscore", "chrF"),
        segment=combo.SegmentLevel((0.7, 40.0), (0.1, 15.0), (0.3, 0.2)),
        system=combo.SystemLevel((0.05, 5.0), (1.0, 0.5)),
    )
    path = tmp_path / "combo.json"
    fitted.save(path)
    result = combo.combined(predictions, references, path)
    expected = [0.3 * (b - 0.7) / 0.1 + 0.2 * (c - 40.0) / 15.0 for b, c in zip(bert["f1"], chrf)]
    np.testing.assert_allclose(result["combined"], expected, rtol=1e-6, atol=1e-9)
    corpus = sacrebleu.metrics.CHRF().corpus_score(predictions, [references]).score
    assert result["system"] == pytest.approx(1.0 * np.mean(bert["f1"]) / 0.05 + 0.5 * corpus / 5.0)
    assert np.isfinite(result["combined"]).all() and np.isfinite(result["system"])
    assert result["components"]["chrF"] == pytest.approx(chrf)
    assert result["hashcode"] == f"combination:{fitted.digest[:16]}|{bert['hashcode']}"
    with pytest.raises(ValueError, match="one reference string per prediction"):
        combo.combined(predictions[:1], [["a", "b"]], fitted)


def test_lazy_emd_is_negated():
    from moverkit import functional

    predictions, references = [p for p, _ in PAIRS[:3]], [r for _, r in PAIRS[:3]]
    scores, hashcodes = combo.component_scores(predictions, references, ["lazy_emd"])
    distance = functional.lazy_emd(predictions, references)
    np.testing.assert_allclose(scores["lazy_emd"], -np.asarray(distance["lazy_emd"]))
    assert hashcodes["lazy_emd"] == distance["hashcode"]
    assert combo.orientation("lazy_emd") == -1 and combo.orientation("BLEU") == 1


def write_tsv(path, rows):
    lines = ["lp\tsystem\tsid\thypothesis\treference\thuman"]
    lines += [f"{lp}\tsys\t{i}\t{h}\t{r}\t{s}" for i, (lp, h, r, s) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_cli_combine_writes_a_loadable_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for lp in ("cs-en", "de-en"):
        for quality, (h, r) in zip([1.0, 0.5, -0.5, -1.0] * 2, PAIRS[:4] * 2):
            rows.append((lp, h, r, quality + 0.1 * float(rng.standard_normal())))
    rows += [("de-en", "the cat sat", "the cat sat on the mat", 1.0), ("cs-en", "mat", "the cat sat on the mat", -1.0)]
    data, out = tmp_path / "judgments.tsv", tmp_path / "combo.json"
    write_tsv(data, rows)
    code = main(["combine", "--data", str(data), "--component", "chrF", "--component", "BLEU", "--out", str(out)])
    assert code == 0
    loaded = combo.load(out)
    assert loaded.components == ("chrF", "BLEU") and loaded.system is None
    assert loaded.fitted_on["segment"] == {"file": "judgments.tsv", "groups": ["cs-en", "de-en"], "n": len(rows)}
    printed = capsys.readouterr().out
    assert "| combination |" in printed and loaded.digest in printed


def test_cli_combine_errors_exit_2(tmp_path, capsys):
    data, out = tmp_path / "judgments.tsv", tmp_path / "combo.json"
    base = ["combine", "--data", str(data), "--component", "chrF", "--out", str(out)]
    assert main(base) == 2
    assert "moverkit: error:" in capsys.readouterr().err
    write_tsv(data, [("cs-en", "a b", "a b", 1.0), ("cs-en", "c", "d", 0.0)])
    assert main([*base, "--component", "chrF"]) == 2
    assert "moverkit: error: --component: a component is given twice" in capsys.readouterr().err
    assert main([*base, "--arg", "twmd:temperature=0.1"]) == 2
    assert "moverkit: error: --arg" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "rows, message",
    [
        ([("de-en", "the cat", "the cat", 1.0)], "group 'de-en' has 1 segment"),
        (
            [("de-en", "the cat", "the cat", 0.5), ("de-en", "a dog", "the cat", 0.5)],
            "group 'de-en' has human scores that are all equal",
        ),
    ],
)
def test_cli_combine_names_a_group_it_cannot_hold_out(tmp_path, capsys, rows, message):
    data, out = tmp_path / "judgments.tsv", tmp_path / "combo.json"
    write_tsv(data, [("cs-en", h, r, q) for q, (h, r) in zip([1.0, 0.5, -0.5, -1.0], PAIRS)] + rows)
    assert main(["combine", "--data", str(data), "--component", "chrF", "--out", str(out)]) == 2
    assert f"moverkit: error: --data {data}: {message}" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_cli_combine_system_level_never_fits_on_the_unseen_pairs(tmp_path, capsys, monkeypatch):
    from moverkit import judgments

    shipped = judgments.read_extract(segments=4)
    monkeypatch.setattr(judgments, "read_extract", lambda: shipped)
    data, out = tmp_path / "judgments.tsv", tmp_path / "combo.json"
    write_tsv(data, [("cs-en", h, r, q) for q, (h, r) in zip([1.0, 0.5, -0.5, -1.0], PAIRS)])
    argv = ["combine", "--data", str(data), "--component", "twmd", "--component", "chrF", "--out", str(out)]
    assert main([*argv, "--system-level"]) == 0
    loaded = combo.load(out)
    assert loaded.fitted_on["system"]["groups"] == ["cs-en", "de-en", "ru-en", "tr-en", "zh-en"]
    assert loaded.system is not None and all(w >= 0 for w in loaded.system.weights)
    assert loaded.fitted_on["system"]["alpha"] in combo.ALPHAS
    assert sorted(map(float, loaded.fitted_on["system"]["held_out_pairs"])) == list(combo.ALPHAS)
    printed = capsys.readouterr().out
    assert "| combination |" in printed and "system level: a = " in printed


@pytest.fixture
def fitted_file(tmp_path):
    fitted = combo.Combination(
        ("twmd", "chrF"),
        segment=combo.SegmentLevel((0.6, 40.0), (0.2, 15.0), (0.4, 0.1)),
    )
    path = tmp_path / "combo.json"
    fitted.save(path)
    return fitted, path


def test_compare_and_the_cli_use_a_combination(fitted_file, tmp_path, capsys):
    import moverkit

    fitted, path = fitted_file
    references = [r for _, r in PAIRS[:4]]
    systems = {"A": [p for p, _ in PAIRS[:4]], "B": ["a dog", "the", "nothing at all", "he went home"]}
    result = moverkit.compare(references, systems, [], resamples=200, seed=0, combination=str(path))
    one_call = combo.combined([*systems["A"], *systems["B"]], references * 2, path)["combined"]
    assert result.segments["combined"] == {"A": one_call[:4], "B": one_call[4:]}
    assert result.hashcodes["combined"].startswith(f"combination:{fitted.digest[:16]}|twmd:")
    assert result.settings["combination"] == {"components": ["twmd", "chrF"], "digest": fitted.digest}
    assert "### combined (higher is better" in result.to_markdown()

    hyp, ref, out = tmp_path / "hyp.txt", tmp_path / "ref.txt", tmp_path / "scores.jsonl"
    hyp.write_text("\n".join(systems["A"]) + "\n")
    ref.write_text("\n".join(references) + "\n")
    assert (
        main(
            [
                "score",
                "--combination",
                str(path),
                "--predictions",
                str(hyp),
                "--references",
                str(ref),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["combined"] for row in rows] == pytest.approx(one_call[:4], abs=1e-6)
    assert f"combination:{fitted.digest[:16]}" in capsys.readouterr().out
    assert (
        main(
            [
                "compare",
                "--references",
                str(ref),
                "--system",
                f"A={hyp}",
                "--system",
                f"B={ref}",
                "--combination",
                str(path),
            ]
        )
        == 0
    )
    assert "### combined" in capsys.readouterr().out
    assert (
        main(
            [
                "score",
                "--combination",
                str(path),
                "--metric",
                "twmd",
                "--predictions",
                str(hyp),
                "--references",
                str(ref),
            ]
        )
        == 2
    )
    assert "leave out --metric" in capsys.readouterr().err
