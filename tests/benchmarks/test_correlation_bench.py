"""``moverkit bench correlation`` (and the rows and suites every metric adds, listed by ``bench
correlation --list`` and ``bench speed --list``): its table, and a run on the sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from moverkit.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "wmt17_sample.tsv"


@pytest.mark.slow  # runs a benchmark end to end
def test_cli_bench_correlation_on_the_sample(capsys):
    assert main(["bench", "correlation", "--data", str(SAMPLE), "--rows", "BERTScore-F1"]) == 0
    out = capsys.readouterr().out
    assert "| BERTScore-F1 |" in out and "avg" in out and "cs-en" in out


def test_cli_bench_lists_rows_and_suites_without_data(capsys):
    assert main(["bench", "correlation", "--list"]) == 0
    assert "TWMD-b\ttwmd.twmd" in capsys.readouterr().out
    assert main(["bench", "speed", "--list", "--suite", "sbertscore"]) == 0
    listed = capsys.readouterr().out.strip().splitlines()
    assert len(listed) == 1 and listed[0].startswith("sbertscore\t")  # exactly the suite named, by key
    assert "sentence encoder alone" in listed[0]
    assert main(["bench", "speed", "--list", "--suite", "bertscore"]) == 2  # not a substring match
    assert "the suites are bert-score, " in capsys.readouterr().err
    assert main(["bench", "speed", "--suite", "twmd"]) == 2
    assert "moverkit: error: bench speed: --data is required" in capsys.readouterr().err


def test_correlation_table_lines_up_rows_with_different_groups():
    """A long-document row may lack a language pair that the segment rows have: its cell is "–",
    and every other cell stays under its own column."""
    from benchmarks import CorrelationRow
    from benchmarks.correlation import format_table

    rows = [CorrelationRow("seg", "twmd", "twmd"), CorrelationRow("doc", "twmd", "twmd")]
    table = {
        "seg": {"cs-en": (0.5, 0.4), "de-en": (0.3, 0.2), "avg": (0.4, 0.3)},
        "doc": {"de-en": (0.1, 0.05), "avg": (0.1, 0.05)},
    }
    lines = format_table(table, rows).splitlines()
    assert lines[0] == "| metric | cs-en | de-en | avg |"
    assert lines[2] == "| seg | 40.0 / 50.0 | 20.0 / 30.0 | 30.0 / 40.0 |"
    assert lines[3] == "| doc | – | 5.0 / 10.0 | 5.0 / 10.0 |"
