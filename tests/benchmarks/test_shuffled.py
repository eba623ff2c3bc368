"""``moverkit bench shuffled``: the derangement, the draw of pairs, the direction of each metric's
output and the report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import MAIN_OUTPUTS
from benchmarks.shuffled import derangement, run, sample_pairs
from moverkit.cli import main
from moverkit.judgments import Judgments, read_judgments

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "wmt17_sample.tsv"


@pytest.mark.parametrize("n", [2, 3, 7, 400])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_derangement_is_a_permutation_without_fixed_point(n, seed):
    order = derangement(n, seed)
    assert sorted(order) == list(range(n))
    assert all(i != j for i, j in enumerate(order))
    assert derangement(n, seed) == order


def test_derangement_depends_on_the_seed_and_needs_two_items():
    assert len({tuple(derangement(10, seed)) for seed in range(5)}) > 1
    with pytest.raises(ValueError, match="at least 2"):
        derangement(1)


def test_sample_pairs_draws_rows_with_distinct_references():
    data = read_judgments(SAMPLE)
    predictions, references = sample_pairs(data, 50, seed=3)
    assert len(set(references)) == 50
    rows = set(zip(data.predictions, data.references))
    assert all(pair in rows for pair in zip(predictions, references))
    assert sample_pairs(data, 50, seed=3) == (predictions, references)
    with pytest.raises(ValueError, match="distinct references"):
        sample_pairs(data, len(set(data.references)) + 1)


@pytest.mark.slow
def test_identical_predictions_always_beat_the_shuffled_reference():
    """A prediction equal to its reference scores best against it for a similarity and a distance
    alike, so every share is 1.0: a sign error in a direction would give 0.0."""
    data = read_judgments(SAMPLE, limit=12)
    same = Judgments(data.groups, list(data.references), list(data.references), data.human)
    rows = run(same, pairs=len(set(data.references)), seed=1)
    assert [r["metric"] for r in rows] == list(MAIN_OUTPUTS)
    assert {r["metric"]: r["higher_is_better"] for r in rows if not r["higher_is_better"]} == {"lazy_emd": False}
    assert [r["share"] for r in rows] == [1.0] * len(MAIN_OUTPUTS)


@pytest.mark.slow
def test_cli_bench_shuffled_on_the_sample(tmp_path, capsys):
    out = tmp_path / "shuffled.md"
    assert main(["bench", "shuffled", "--data", str(SAMPLE), "--pairs", "20", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.read_text(encoding="utf-8") == printed
    assert "on 20 pairs of wmt17_sample.tsv" in printed
    lines = re.findall(
        r"^\| (\w+) \| (\w+) \| (higher|lower \(a distance\)) \| ([\d.]+)% \((\d+)/20\) \|$", printed, re.M
    )
    assert [(metric, output) for metric, output, *_ in lines] == list(MAIN_OUTPUTS.items())
    for *_, percent, wins in lines:
        assert 0 <= int(wins) <= 20 and float(percent) == pytest.approx(100 * int(wins) / 20, abs=0.05)


def test_cli_bench_shuffled_needs_data(capsys):
    assert main(["bench", "shuffled"]) == 2
    assert "moverkit: error: bench shuffled: --data is required" in capsys.readouterr().err
