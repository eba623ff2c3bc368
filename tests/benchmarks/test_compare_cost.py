"""The compare-cost harness's pure parts: the workload it picks, the interleaved timing, the ratio
and the table, on tiny inputs (no model runs)."""

from __future__ import annotations

import itertools

import pytest

from benchmarks import compare_cost
from moverkit.judgments import TestSet as Set


def sets():
    refs = [f"ref {i}" for i in range(6)]
    return [
        Set("zh-en", refs, {f"z{k}": [f"z{k} {i}" for i in range(6)] for k in range(4)}, {}),
        Set("de-en", refs[:4], {f"d{k}": [f"d{k} {i}" for i in range(4)] for k in range(3)}, {}),
        Set("cs-en", refs, {"c0": refs, "c1": refs}, {}),
    ]


def test_the_workload_is_the_first_pair_with_enough_systems_and_segments():
    workload = compare_cost.pick_workload(sets(), systems=3, segments=4)
    assert workload.lp == "de-en" and list(workload.systems) == ["d0", "d1", "d2"]
    assert len(workload.references) == 4 and all(len(out) == 4 for out in workload.systems.values())
    # de-en has 4 segments only: 5 asked for moves to zh-en, its first 3 systems by name.
    workload = compare_cost.pick_workload(sets(), systems=3, segments=5)
    assert workload.lp == "zh-en" and list(workload.systems) == ["z0", "z1", "z2"]
    assert workload.systems["z1"] == [f"z1 {i}" for i in range(5)]
    assert workload.distinct_texts == 5 + 3 * 5
    with pytest.raises(ValueError, match="no language pair has 5 systems of 5 segments"):
        compare_cost.pick_workload(sets(), systems=5, segments=5)


def test_distinct_texts_count_a_shared_text_once():
    workload = compare_cost.pick_workload(sets(), systems=2, segments=6)
    assert workload.lp == "cs-en" and workload.distinct_texts == 6  # both systems output the references


def test_rounds_interleave_the_contenders_and_the_ratio_is_of_medians():
    order = []
    ticks = itertools.count()
    contenders = {"encode": lambda: order.append("encode"), "compare": lambda: order.append("compare")}
    times = compare_cost.interleaved(contenders, rounds=3, clock=lambda: next(ticks))
    assert order == ["encode", "compare"] * 3
    assert times == {"encode": [1, 1, 1], "compare": [1, 1, 1]}

    row = compare_cost.summary("twmd", {"encode": [10.0, 12.0, 50.0], "compare": [11.0, 13.0, 12.5]}, 0.4)
    assert row["encode"] == 12.0 and row["compare"] == 12.5 and row["ratio"] == pytest.approx(12.5 / 12.0)
    assert row["rounds"] == 3


def test_the_table_says_whether_each_ratio_meets_the_bar():
    rows = [
        compare_cost.summary("twmd", {"encode": [10.0], "compare": [11.0]}, 0.5),
        compare_cost.summary("moverscore", {"encode": [10.0], "compare": [13.0]}),
    ]
    workload = compare_cost.pick_workload(sets(), systems=2, segments=6)
    table = compare_cost.format_table(rows, workload)
    assert "2 systems of 6 segments (cs-en, 6 distinct texts); compare with resamples=1000; median of 1" in table
    assert "| twmd | 10.00 | 11.00 | 0.50 | 1.10 | yes |" in table
    assert "| moverscore | 10.00 | 13.00 | – | 1.30 | no |" in table


def test_each_metric_is_timed_against_its_own_encoder(monkeypatch):
    seen = []

    def encoder_floor(predictions, references, model_type=None, num_layers=None):
        seen.append(num_layers)

    monkeypatch.setattr(compare_cost, "encoder_floor", encoder_floor)
    monkeypatch.setattr(compare_cost, "sentence_encoder_floor", lambda p, r: seen.append("sentences"))
    workload = compare_cost.pick_workload(sets(), systems=2, segments=6)
    for metric in compare_cost.METRICS:
        compare_cost.encode_floor(metric, workload)
    # moverscore: the last layer; sbertscore: sentences; the others: the default layer.
    expected = {"moverscore": -1, "sbertscore": "sentences"}
    assert seen == [expected.get(metric) for metric in compare_cost.METRICS]
