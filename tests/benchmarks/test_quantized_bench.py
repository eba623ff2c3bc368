"""The pure helpers of benchmarks.quantized (no model is loaded)."""

import numpy as np
import pytest

from benchmarks import quantized as q


def _rows():
    return [
        {"lp": lp, "hypothesis": f"h{i % 3}", "reference": f"r{i}", "human": str(i)}
        for lp in ("a-en", "b-en")
        for i in range(4)
    ]


def test_read_pairs(tmp_path):
    path = tmp_path / "j.tsv"
    path.write_text('lp\tsystem\tsid\thypothesis\treference\thuman\nde-en\ts\t1\ta "b\tc\t0.5\n', encoding="utf-8")
    assert q.read_pairs(str(path)) == [
        {"lp": "de-en", "system": "s", "sid": "1", "hypothesis": 'a "b', "reference": "c", "human": "0.5"}
    ]


def test_timing_texts_are_distinct_references_then_hypotheses():
    assert q.timing_texts(_rows(), 6) == ["r0", "r1", "r2", "h0", "h1", "h2"]


def test_balanced_pairs_takes_the_same_number_per_language_pair():
    pairs = q.balanced_pairs(_rows(), 4)
    assert [(p["lp"], p["reference"]) for p in pairs] == [
        ("a-en", "r0"),
        ("a-en", "r1"),
        ("b-en", "r0"),
        ("b-en", "r1"),
    ]


def test_mean_pearson_averages_over_language_pairs():
    pairs = _rows()
    human = np.array([float(p["human"]) for p in pairs])
    assert abs(q.mean_pearson(human, pairs) - 1) < 1e-12
    flipped = np.concatenate([human[:4], -human[4:]])
    assert abs(q.mean_pearson(flipped, pairs)) < 1e-12


def _row(path, speedup, mean, worst, pearson):
    return {
        "path": path, "isa": "native", "seconds": 1.0, "speedup": speedup, "mean_abs_delta": mean,
        "max_abs_delta": worst, "pearson": pearson, "pearson_float32": 0.640, "kept_float32": [],
    }  # fmt: skip


def test_passes_applies_the_bars_of_issue_24():
    assert q.passes(_row("int8 per-channel", 2.1, 1e-3, 1e-2, 0.638)) == "yes"
    assert q.passes(_row("int8 per-channel", 1.9, 1e-3, 1e-2, 0.638)) == "no"
    assert q.passes(_row("onnx int8 per-tensor", 3.0, 3e-3, 1e-2, 0.640)) == "no"
    assert q.passes(_row("int8 per-tensor", 3.0, 1e-3, 1e-2, 0.636)) == "no"
    assert q.passes(_row("onnx float32", 1.3, 1e-8, 1e-6, 0.640)) == "yes"
    assert q.passes(_row("onnx float32", 1.3, 1e-8, 2e-5, 0.640)) == "no"
    assert q.passes(_row("bfloat16", 2.0, 1e-4, 1e-3, 0.640)) == ""


def test_format_table_has_one_line_per_row():
    rows = [
        _row("float32", 1.0, 0.0, 0.0, 0.640),
        {**_row("int8 per-channel, keep", 2.0, 1e-2, 5e-2, 0.63), "kept_float32": ["x"]},
    ]
    table = q.format_table(rows)
    assert table.count("\n| native |") == 2
    assert "| 64.00 / 63.00 | no |" in table
    assert table.endswith("Kept in float32 by `keep`: x.")


def test_options_default_to_the_issue_sizes_and_take_one_cap():
    args = q.parse_args(["d.tsv"])
    assert (args.data, args.n_texts, args.n_pairs, args.rounds, args.avx2, args.strict_avx2) == (
        "d.tsv", 1200, 1400, 2, False, False,
    )  # fmt: skip
    args = q.parse_args(["d.tsv", "--n-texts", "600", "--n-pairs", "700", "--rounds", "1", "--strict-avx2"])
    assert (args.n_texts, args.n_pairs, args.rounds, args.strict_avx2) == (600, 700, 1, True)
    for bad in (["d.tsv", "--avx2", "--strict-avx2"], ["d.tsv", "--strict"], ["d.tsv", "--n-texts", "0"], []):
        with pytest.raises(SystemExit):
            q.parse_args(bad)
