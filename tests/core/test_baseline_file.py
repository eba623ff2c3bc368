"""baseline_path files (bert-score's LAYER,P,R,F): every defect refused with the file, the line and
the field named, before a score is rescaled with it."""

from __future__ import annotations

import pytest

from moverkit._core.call.baseline import baseline_csv, read_baseline

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
        ("LAYER,P,R,F\n-2,0.1,0.1,0.1\n", r"line 2, field LAYER: -2 is below -1"),
        ("LAYER,P,R,F\n6,0.1,x,0.1\n", r"line 2, field R: 'x' is not a number"),
        ("LAYER,P,R,F\n6,0.1,0.1,1.0\n", r"line 2, field F: 1.0 is not a finite number in \(-1, 0.99\]"),
        ("LAYER,P,R,F\n6,nan,0.1,0.1\n", r"line 2, field P: nan is not a finite number in \(-1, 0.99\]"),
        ("LAYER,P,R,F\n6,0.1,0.1,inf\n", r"line 2, field F: inf is not a finite number in \(-1, 0.99\]"),
        ("LAYER,P,R,F\n6,0.1,0.1,0.1\n6,0.2,0.2,0.2\n", r"line 3, field LAYER: layer 6 is given twice"),
        ("P,R,F\n6,0.1,0.1\n", r"line 1: the header must be LAYER,P,R,F"),
        ("LAYER,TWMD\n6,0.1\n", r"line 1: the header must be LAYER,P,R,F.*found LAYER,TWMD"),
        ("LAYER,P,R,F,SETTINGS\n6,0.1,0.1,0.1\n", r"line 2: 4 field\(s\).*expected 5"),
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


def test_sentence_vectors_read_as_layer_minus_one(tmp_path):
    path = _file(tmp_path, "LAYER,P,R,F,SETTINGS\n-1,0.04,0.038,0.039,sbertscore:x\n")
    assert read_baseline(path, -1).tolist() == [0.04, 0.038, 0.039]


@pytest.mark.parametrize(
    "text, message",
    [
        ("LAYER,LAZY_EMD\n6,0\n", r"line 2, field LAZY_EMD: 0 is not a finite number >= 0.001"),
        ("LAYER,LAZY_EMD\n6,-0.2\n", r"line 2, field LAZY_EMD: -0.2 is not a finite number >= 0.001"),
        ("LAYER,LAZY_EMD\n6,inf\n", r"line 2, field LAZY_EMD: inf is not a finite number >= 0.001"),
        ("LAYER,LAZY_EMD\n6,5e-324\n", r"line 2, field LAZY_EMD: 5e-324 is not a finite number >= 0.001"),
        ("LAYER,LAZY_EMD\n6,9e-4\n", r"line 2, field LAZY_EMD: 9e-4 is not a finite number >= 0.001"),
        ("LAYER,TWMD\n6,1.5\n", r"line 2, field TWMD: 1.5 is not a finite number in \(-1, 0.99\]"),
        ("LAYER,TWMD\n6,0.9999999\n", r"line 2, field TWMD: 0.9999999 is not a finite number in \(-1, 0.99\]"),
        ("LAYER,TWMD\n6,-1e308\n", r"line 2, field TWMD: -1e308 is not a finite number in \(-1, 0.99\]"),
        ("LAYER,TWMD\n6,-1\n", r"line 2, field TWMD: -1 is not a finite number in \(-1, 0.99\]"),
        ("LAYER,TWMD\n6,-inf\n", r"line 2, field TWMD: -inf is not a finite number in \(-1, 0.99\]"),
    ],
)
def test_a_distance_baseline_is_at_least_1e_3_and_a_similarity_within_minus_1_and_0_99(tmp_path, text, message):
    # d / b needs b > 0, and a b near 0 sent every score to inf (5e-324); (s - b) / (1 - b) needs
    # b < 1, and a b of 0.9999999 rescaled F1 down to -1.6e12, one of -1e308 every pair to exactly 1.
    # A distance's baseline may pass 1. At the bounds a rescaled score stays within 1,000 times the
    # raw distance, and at least -199 for a similarity.
    columns = (text.splitlines()[0].split(",")[1],)
    with pytest.raises(ValueError, match=rf"^baseline_path=.*{message}"):
        read_baseline(_file(tmp_path, text), 6, columns)
    assert read_baseline(_file(tmp_path, "LAYER,LAZY_EMD\n6,1.7\n"), 6, ("LAZY_EMD",)).tolist() == [1.7]
    assert read_baseline(_file(tmp_path, "LAYER,LAZY_EMD\n6,1e-3\n"), 6, ("LAZY_EMD",)).tolist() == [1e-3]
    assert read_baseline(_file(tmp_path, "LAYER,TWMD\n6,-0.99\n"), 6, ("TWMD",)).tolist() == [-0.99]
    assert read_baseline(_file(tmp_path, "LAYER,TWMD\n6,0.99\n"), 6, ("TWMD",)).tolist() == [0.99]


def test_a_tiny_lazy_emd_baseline_is_refused_before_scoring(tmp_path):
    from moverkit import functional

    path = _file(tmp_path, "LAYER,LAZY_EMD\n6,5e-324\n")
    with pytest.raises(ValueError, match=r"baseline_path=.*line 2, field LAZY_EMD: 5e-324"):
        functional.lazy_emd(["a b"], ["a c"], rescale_with_baseline=True, baseline_path=str(path))


@pytest.mark.parametrize(
    "text, line",
    [
        ("LAYER,P,R,F\n6," + "1" * 200_000 + ",0.1,0.1\n", 2),  # a field over csv's limit
        ('LAYER,P,R,F\n6,0.1,0.1,0.1\n0,"' + "x" * 200_000 + "\n", 3),  # an unterminated quote
    ],
)
def test_a_row_csv_cannot_read_is_named(tmp_path, text, line):
    """csv's own error (a field larger than its limit of 131,072 characters) was a traceback: it is
    a ValueError naming baseline_path and the line."""
    path = _file(tmp_path, text)
    with pytest.raises(ValueError, match=rf"^baseline_path='{path}', line {line}: .*field larger than field limit"):
        read_baseline(path, 6)


def test_a_file_of_another_metric_or_variant_is_refused(tmp_path):
    path = _file(tmp_path, baseline_csv([(6, 0.03, "twmd:m_L6_x")], ("TWMD",)))
    assert read_baseline(path, 6, ("TWMD",)).tolist() == [0.03]
    for columns in [("TRWMD",), ("LAZY_EMD",), ("P", "R", "F")]:
        with pytest.raises(ValueError, match=rf"header must be LAYER,{','.join(columns)}.*found LAYER,TWMD,SETTINGS"):
            read_baseline(path, 6, columns)


def test_settings_round_trip_and_a_row_fitted_under_other_settings_is_refused(tmp_path):
    key = "twmd:m_L6_no-idf_center=corpus:05ca879b9d_max_length=512_variant=twmd_temperature=0.1"
    rows = [(5, 0.05, key.replace("_L6_", "_L5_")), (6, 0.03, key)]
    path = _file(tmp_path, baseline_csv(rows, ("TWMD",)))
    assert path.read_text().splitlines()[0] == "LAYER,TWMD,SETTINGS"
    assert read_baseline(path, 6, ("TWMD",), settings=key).tolist() == [0.03]
    other = key.replace("temperature=0.1", "temperature=0.2")
    with pytest.raises(
        ValueError, match=r"fitted under other settings.*temperature=0\.1.*temperature=0\.2.*fit-baseline"
    ):
        read_baseline(path, 6, ("TWMD",), settings=other)
    # A file without SETTINGS (bert-score's, or made by hand) records none: it is the caller's.
    plain = _file(tmp_path, baseline_csv([(6, 0.03)], ("TWMD",)))
    assert read_baseline(plain, 6, ("TWMD",), settings=other).tolist() == [0.03]


def test_settings_key_leaves_out_versions_precision_and_long_text_mode():
    from moverkit._core.call.baseline import settings_key

    code = (
        "lazy_emd:m_L6_no-idf_center=none_max_length=512_long_texts=window_dtype=bfloat16_reg_c=0.23"
        "_version=0.1.0(hug_trans=5.24.0,torch=2.13.0)"
    )
    assert settings_key(code) == "lazy_emd:m_L6_no-idf_center=none_max_length=512_reg_c=0.23"
