"""baseline_path files (bert-score's LAYER,P,R,F): every defect refused with the file, the line and
the field named, before a score is rescaled with it."""

from __future__ import annotations

import pytest

from moverkit._core.baseline import baseline_csv, read_baseline

GOOD = "LAYER,P,R,F\n0,0.3,0.31,0.29\n6,0.14,0.141,0.138\n"


def _file(tmp_path, text: str | bytes):
    path = tmp_path / "baseline.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_a_good_file_reads_and_round_trips(tmp_path):
    path = _file(tmp_path, GOOD)
    assert read_baseline(path, 6).tolist() == [0.14, 0.141, 0.138]
    rows = [(0, 0.3, 0.31, 0.29), (6, 0.14, 0.141, 0.138)]
    assert read_baseline(_file(tmp_path, baseline_csv(rows)), 0).tolist() == [0.3, 0.31, 0.29]


@pytest.mark.parametrize(
    "text, message",
    [
        ("LAYER,P,R,F\n0,0.3,0.31,0.29\n6,0.8\n", r"line 3: 2 field\(s\) \['6', '0.8'\], expected 4"),
        ("LAYER,P,R,F\nsix,0.1,0.1,0.1\n", r"line 2, field LAYER: 'six' is not an integer"),
        ("LAYER,P,R,F\n-1,0.1,0.1,0.1\n", r"line 2, field LAYER: -1 is negative"),
        ("LAYER,P,R,F\n6,0.1,x,0.1\n", r"line 2, field R: 'x' is not a number"),
        ("LAYER,P,R,F\n6,0.1,0.1,1.0\n", r"line 2, field F: 1.0 is not a finite number below 1"),
        ("LAYER,P,R,F\n6,nan,0.1,0.1\n", r"line 2, field P: nan is not a finite number below 1"),
        ("LAYER,P,R,F\n6,0.1,0.1,inf\n", r"line 2, field F: inf is not a finite number below 1"),
        ("LAYER,P,R,F\n6,0.1,0.1,0.1\n6,0.2,0.2,0.2\n", r"line 3, field LAYER: layer 6 is given twice"),
        ("P,R,F\n6,0.1,0.1\n", r"line 1: the header must be LAYER,P,R,F"),
        ("LAYER,P,R,F\n", r"has a header but no row"),
        (b"LAYER,P,R,F\n6,0.1,0.1,\xff\n", r"is not UTF-8 text"),
    ],
)
def test_a_defect_is_named_with_file_line_and_field(tmp_path, text, message):
    path = _file(tmp_path, text)
    with pytest.raises(ValueError, match=rf"^baseline_path='{path}'.*{message}"):
        read_baseline(path, 6)


def test_a_missing_layer_lists_the_layers_the_file_has(tmp_path):
    with pytest.raises(ValueError, match=r"has no row for layer 3 \(it has layers 0, 6\)"):
        read_baseline(_file(tmp_path, GOOD), 3)


def test_the_metric_refuses_a_short_row_before_scoring(tmp_path):
    from moverkit import functional

    path = _file(tmp_path, "LAYER,P,R,F\n6,0.8\n")
    with pytest.raises(ValueError, match="baseline_path=.*line 2: 2 field"):
        functional.centered_bertscore(["a b"], ["a c"], rescale_with_baseline=True, baseline_path=str(path))
