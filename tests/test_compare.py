"""moverkit.compare: the resampling statistics against scipy's, the decisions they must make, and
a comparison through the real metrics with its reports."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats

import moverkit
from moverkit.comparison import bootstrap_interval, compare, paired_test, summarize
from moverkit.comparison.resampling import clusters, holm
from moverkit.integrations.registry import REGISTRY

RNG = np.random.default_rng(7)
A = RNG.normal(0.6, 0.15, 300)
B = A - 0.03 + RNG.normal(0, 0.05, 300)  # B worse by 0.03 on average, paired


def test_bootstrap_interval_agrees_with_scipy_percentile_bootstrap():
    mean, low, high = bootstrap_interval(A, resamples=20000, seed=0)
    theirs = stats.bootstrap((A,), np.mean, method="percentile", n_resamples=20000, random_state=1).confidence_interval
    assert mean == pytest.approx(A.mean())
    # Two independent Monte Carlo estimates of one percentile differ by about 0.027 standard errors
    # of the mean at 20,000 resamples (sd); 0.1 standard errors is 3.7 sd.
    se = A.std() / np.sqrt(len(A))
    assert low == pytest.approx(theirs.low, abs=0.1 * se) and high == pytest.approx(theirs.high, abs=0.1 * se)


def test_permutation_p_agrees_with_scipys_paired_permutation_test():
    a, b = A[:60], (A[:60] - 0.01 + RNG.normal(0, 0.05, 60))
    ours = paired_test(a, b, resamples=20000, seed=0).p_permutation
    theirs = stats.permutation_test(
        (a, b), lambda x, y: np.mean(x - y), permutation_type="samples", n_resamples=20000, random_state=1
    ).pvalue
    assert ours == pytest.approx(theirs, abs=0.015)  # both Monte Carlo estimates of one p-value


def test_identical_systems_are_not_apart():
    test = paired_test(A, A, resamples=2000, seed=0)
    assert test.delta == 0 and test.ci_low <= 0 <= test.ci_high
    assert test.p_value >= 0.05 and test.p_permutation >= 0.05 and test.win_rate == 0


def test_a_clearly_better_system_is_significant_and_its_delta_positive():
    test = paired_test(A, B, resamples=2000, seed=0)
    assert test.delta == pytest.approx(float((A - B).mean())) and test.delta > 0
    assert test.p_value < 0.01 and test.p_permutation < 0.01 and test.ci_low > 0 and test.win_rate > 0.5


def test_a_distance_is_better_lower():
    test = paired_test(B, A, higher_is_better=False, resamples=2000, seed=0)  # B is lower: better as a distance
    assert test.delta > 0 and test.p_value < 0.01


def test_results_are_seeded():
    assert paired_test(A, B, seed=3) == paired_test(A, B, seed=3)
    assert bootstrap_interval(A, seed=1) != bootstrap_interval(A, seed=2)


def test_holm_and_clusters():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    better = {("x", "z"), ("y", "z")}
    assert clusters(["x", "y", "z"], lambda a, b: (a, b) in better) == [["x", "y"], ["z"]]


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(ValueError, match="same segments"):
        paired_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="not finite"):
        paired_test([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_interval([1.0], resamples=0)
    with pytest.raises(ValueError, match="has 1 outputs for 2 segments"):
        compare(["a", "b"], {"s": ["a"]})
    with pytest.raises(ValueError, match="unknown metric"):
        compare(["a"], {"s": ["a"]}, metrics=["bleu"])


def test_summary_orders_clusters_by_the_metrics_direction():
    segments = {"lazy_emd": {"low": list(0.1 + 0.01 * RNG.random(50)), "high": list(0.3 + 0.01 * RNG.random(50))}}
    result = summarize(segments, resamples=500, seed=0)
    assert result.ranking["lazy_emd"] == [["low"], ["high"]]
    (pair,) = result.pairs
    assert (pair["a"], pair["b"]) == ("low", "high") and pair["delta"] > 0


REFS = [
    "the cat sat on the mat",
    "stocks fell sharply on monday",
    "he went home early",
    "rain is expected tomorrow",
    "the committee approved the budget",
    "she plays the violin",
    "traffic was heavy this morning",
    "the museum opens in may",
    "prices rose again",
    "the team won its third match",
    "water was found on a moon",
    "the library will close for repairs",
]


@pytest.mark.slow
def test_compare_scores_every_system_once_and_reports(tmp_path):
    systems = {
        "copy": list(REFS),
        "close": [r.replace("the ", "a ", 1) for r in REFS],
        "unrelated": list(reversed(REFS)),
    }
    result = compare(REFS, systems, metrics=["centered_bertscore", "lazy_emd"], resamples=300, seed=0)
    assert {(s["name"], s["metric"]) for s in result.systems} == {
        (n, m) for n in systems for m in ("centered_bertscore", "lazy_emd")
    }
    assert all(
        set(p) >= {"a", "b", "metric", "delta", "ci_low", "ci_high", "p_bootstrap", "p_permutation", "win_rate"}
        for p in result.pairs
    )
    for metric in ("centered_bertscore", "lazy_emd"):
        order = [n for group in result.ranking[metric] for n in group]
        assert order[0] == "copy" and order[-1] == "unrelated"
    # one call per metric over all systems: the same scores as scoring a system alone (corpus/none centering)
    alone = moverkit.functional.centered_bertscore(systems["close"], REFS)["f1"]
    assert result.segments["centered_bertscore"]["close"] == pytest.approx(alone, abs=1e-6)
    assert result.settings["resamples"] == 300 and result.settings["seed"] == 0
    assert set(result.hashcodes) == {"centered_bertscore", "lazy_emd"}
    result.to_json(tmp_path / "c.json")
    saved = json.loads((tmp_path / "c.json").read_text())
    assert set(saved) == {"systems", "pairs", "ranking", "settings", "hashcodes"}
    assert set(saved["systems"][0]) == {"name", "metric", "score", "ci_low", "ci_high"}
    result.plot(tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result.to_html(tmp_path / "c.html")
    page = (tmp_path / "c.html").read_text()
    assert "data:image/png;base64," in page and "http" not in page.split("<body>")[1].split("hashcodes")[0]
    assert "| rank | system |" in result.to_markdown()


def test_moverkit_compare_stays_the_function_after_its_package_is_imported():
    """The function ``moverkit.compare`` and its package once shared a name: importing the package
    replaced the attribute with the module, so the second call failed ('module is not callable')."""
    import importlib

    first = moverkit.compare
    importlib.import_module("moverkit.comparison.resampling")
    assert callable(moverkit.compare) and moverkit.compare is first is compare


def test_one_segment_or_one_resample_is_never_significant():
    """A Monte Carlo p-value is never 0, and with n segments no paired test can be surer than
    2^(1-n): one segment (or one resample) gave p = 0 and split the ranking."""
    one = paired_test([0.9], [0.1], resamples=1000, seed=0)
    assert one.p_value == 1.0 and one.p_permutation == 1.0
    assert paired_test(A, B, resamples=1, seed=0).p_value == 1.0
    assert paired_test(A[:3], A[:3] - 0.5, resamples=1000, seed=0).p_value >= 0.25
    result = summarize({"twmd": {"A": [0.9], "B": [0.1]}}, resamples=500, seed=0)
    assert result.ranking["twmd"] == [["A", "B"]]


def test_resampling_in_blocks_draws_the_same_numbers(monkeypatch):
    import moverkit.comparison.resampling as resampling

    whole = resampling.resampled_means(A, 300, 5)
    whole_test = paired_test(A, B, resamples=300, seed=5)
    monkeypatch.setattr(resampling, "_BLOCK_ENTRIES", 7 * len(A))  # 7 resamples a block
    assert np.array_equal(resampling.resampled_means(A, 300, 5), whole)
    assert paired_test(A, B, resamples=300, seed=5) == whole_test


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resamples": 10**13}, "resamples must be an int from 1 to 1,000,000"),
        ({"resamples": 0}, "resamples must be an int from 1"),
        ({"seed": -1}, "seed must be an int >= 0"),
        ({"metrics": []}, "metrics must be a non-empty list"),
        ({"metrics": "twmd"}, "metrics must be a non-empty list"),
        ({"systems": [["a b", "c d"]]}, "systems must be a dict"),
        ({"systems": {"A": "a b"}}, "system 'A': outputs must be a list of strings"),
        ({"systems": {"A": ["a", "b"], "B": ["b", None]}}, "system 'B', segment 1: an output must be a string"),
        ({"systems": {"A|B": ["a", "b"]}}, "may hold no '|'"),
        ({"systems": {"A\nB": ["a", "b"]}}, "no control character"),
        ({"references": "ab"}, "references must be a non-empty list"),
        ({"references": ["a", None]}, "references[1] must be a string or a non-empty list"),
        ({"metric_kwargs": {"twmd": "s.json"}}, "metric_kwargs must be a mapping of metric name -> mapping"),
        ({"metric_kwargs": [("twmd", {})]}, "metric_kwargs must be a mapping of metric name -> mapping"),
    ],
)
def test_compare_refuses_bad_input_before_scoring(kwargs, message, monkeypatch):

    monkeypatch.setitem(
        REGISTRY, "twmd", dataclasses.replace(REGISTRY["twmd"], function=lambda *a, **k: pytest.fail("scored first"))
    )
    call = {"references": ["a", "b"], "systems": {"A": ["a", "b"]}, "metrics": ["twmd"], **kwargs}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("|", r"\|")):
        compare(call.pop("references"), call.pop("systems"), **call)


LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character where ``str.splitlines`` breaks a line."""


def test_line_breaks_are_every_one_splitlines_honours():
    assert {c for c in map(chr, range(0x110000)) if len(f"a{c}b".splitlines()) == 2} == set(LINE_BREAKS)


@pytest.mark.parametrize("brk", LINE_BREAKS)
def test_a_system_name_with_a_line_break_is_refused_before_scoring(brk, monkeypatch):
    """U+2028 or NEL in a name gave the HTML report 3 rows where 2 belonged, of 1 to 8 cells."""

    monkeypatch.setitem(
        REGISTRY, "twmd", dataclasses.replace(REGISTRY["twmd"], function=lambda *a, **k: pytest.fail("scored first"))
    )
    with pytest.raises(ValueError, match="no line separator"):
        compare(["a", "b"], {f"A{brk}B": ["a", "b"], "C": ["a", "b"]}, metrics=["twmd"])


@pytest.mark.parametrize("brk", LINE_BREAKS)
def test_a_comparison_built_from_scores_refuses_a_line_break_too(brk):
    """summarize() makes the Comparison whose to_html() split its table rows at a line break."""
    with pytest.raises(ValueError, match="no line separator"):
        summarize({"twmd": {f"A{brk}B": list(A[:20]), "C": list(B[:20])}}, resamples=20, seed=0)


def test_a_system_name_with_a_dollar_is_drawn_as_text():
    pytest.importorskip("matplotlib")
    from moverkit.comparison.report import png_bytes

    result = summarize({"twmd": {"$\\foo$": list(A[:20]), "B": list(B[:20])}}, resamples=50, seed=0)
    assert png_bytes(result).startswith(b"\x89PNG")


def test_the_reference_points_read_as_the_scores_do():
    """Scores rescaled with the shipped baseline are headed by the rescaled reference points
    (unrelated texts about 0), and a comparison under other settings says the points are the
    defaults'."""
    result = summarize({"twmd": {"A": list(A[:20]), "B": list(B[:20])}}, resamples=50, seed=0)
    assert "unrelated texts about 0.034)" in result.to_markdown()
    result.settings["metric_kwargs"] = {"twmd": {"rescale_with_baseline": True}}
    assert "unrelated texts about 0, rescaled)" in result.to_markdown()
    result.settings["metric_kwargs"] = {"twmd": {"temperature": 0.5}}
    assert "at the default settings, not those of this comparison" in result.to_markdown()
