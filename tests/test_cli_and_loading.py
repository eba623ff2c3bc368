"""The ways users reach a metric: moverkit.load, evaluate.load from a checkout, datasets.map, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import evaluate
import numpy as np
import pytest

import moverkit
from moverkit.cli import main

ROOT = moverkit.module_path("centered_bertscore").parents[1]
EXAMPLES = moverkit.module_path("centered_bertscore").parent / "examples"


def test_evaluate_load_from_a_checkout_path_and_moverkit_load_agree():
    from_checkout = evaluate.load(str(ROOT / "metrics" / "centered_bertscore"))
    bundled = moverkit.load("centered_bertscore")
    a = from_checkout.compute(predictions=["a cat sat"], references=["the cat sat"])
    b = bundled.compute(predictions=["a cat sat"], references=["the cat sat"])
    assert a == b


def test_references_may_mix_strings_and_lists(load_metric):
    metric = load_metric("centered_bertscore")
    mixed = metric.compute(predictions=["a cat sat", "hello"], references=["the cat sat", ["hi", "hello"]])
    grouped = metric.compute(predictions=["a cat sat", "hello"], references=[["the cat sat"], ["hi", "hello"]])
    assert mixed == grouped and mixed["f1"][1] == pytest.approx(1.0, abs=1e-5)


def test_unknown_metric_name_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown metric"):
        moverkit.load("bleu")


def test_add_batch_then_compute_equals_one_compute(load_metric, wmt_pairs):
    metric = load_metric("centered_bertscore")
    predictions, references = wmt_pairs
    for start in range(0, 30, 10):
        metric.add_batch(predictions=predictions[start : start + 10], references=references[start : start + 10])
    streamed = metric.compute(centering="none")
    direct = metric.compute(predictions=predictions[:30], references=references[:30], centering="none")
    np.testing.assert_allclose(streamed["f1"], direct["f1"], atol=1e-6)


def test_datasets_map_batched_with_a_corpus_statistic(load_metric, wmt_pairs):
    datasets = pytest.importorskip("datasets")
    metric = load_metric("centered_bertscore")
    predictions, references = wmt_pairs
    stats = moverkit.fit_centering(references[:40])
    ds = datasets.Dataset.from_dict({"pred": predictions[:20], "ref": references[:20]})
    score = moverkit.map_scores(metric, "pred", "ref", centering="corpus", centering_stats=stats)
    scored = ds.map(score, batched=True, batch_size=8)
    direct = metric.compute(
        predictions=predictions[:20], references=references[:20], centering="corpus", centering_stats=stats
    )
    # A corpus statistic makes the map batches of 8 give the same numbers as one call of 20.
    np.testing.assert_allclose(scored["f1"], direct["f1"], atol=1e-6)
    assert scored["pred"] == predictions[:20] and score.hashcode == direct["hashcode"]


def test_cli_scores_the_example_files(tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    code = main(
        [
            "score", "--metric", "centered_bertscore",
            "--predictions", str(EXAMPLES / "predictions.txt"),
            "--references", str(EXAMPLES / "references.txt"),
            "--centering", "none", "--out", str(out),
        ]
    )
    assert code == 0
    printed = dict(line.split("\t") for line in capsys.readouterr().out.strip().splitlines())
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 20 and lines[0]["line"] == 1
    assert float(printed["f1"]) == pytest.approx(np.mean([r["f1"] for r in lines]), abs=1e-6)
    direct = moverkit.load("centered_bertscore").compute(
        predictions=(EXAMPLES / "predictions.txt").read_text().splitlines(),
        references=(EXAMPLES / "references.txt").read_text().splitlines(),
        centering="none",
    )
    np.testing.assert_allclose([r["f1"] for r in lines], direct["f1"], atol=1e-7)


def test_cli_several_reference_files_and_metric_arguments(tmp_path, capsys):
    (tmp_path / "p.txt").write_text("the cat sat\nhello\n")
    (tmp_path / "r1.txt").write_text("stocks fell\nhello\n")
    (tmp_path / "r2.txt").write_text("the cat sat\nbye\n")
    args = ["score", "--metric", "centered_bertscore", "--predictions", str(tmp_path / "p.txt")]
    args += ["--references", str(tmp_path / "r1.txt"), "--references", str(tmp_path / "r2.txt")]
    assert main(args + ["--arg", "max_length=64"]) == 0
    printed = dict(line.split("\t") for line in capsys.readouterr().out.strip().splitlines())
    assert float(printed["f1"]) == pytest.approx(1.0, abs=1e-5)  # each prediction has an identical reference


def test_cli_errors_name_the_problem(tmp_path, capsys):
    (tmp_path / "p.txt").write_text("a\nb\n")
    (tmp_path / "r.txt").write_text("a\n")
    code = main(["score", "--metric", "centered_bertscore", "--predictions", str(tmp_path / "p.txt"),
                 "--references", str(tmp_path / "r.txt")])
    assert code == 2
    assert "has 2 lines but" in capsys.readouterr().err
    code = main(["score", "--metric", "centered_bertscore", "--predictions", str(tmp_path / "p.txt"),
                 "--references", str(tmp_path / "p.txt"), "--arg", "temperature=0.1"])
    assert code == 2
    assert "takes no argument temperature" in capsys.readouterr().err


def test_cli_fit_centering_then_score_with_it(tmp_path, capsys):
    stats = tmp_path / "stats.npz"
    assert main(["fit-centering", "--texts", str(EXAMPLES / "references.txt"), "--out", str(stats)]) == 0
    assert main(["score", "--metric", "centered_bertscore", "--predictions", str(EXAMPLES / "predictions.txt"),
                 "--references", str(EXAMPLES / "references.txt"), "--centering", "corpus",
                 "--centering-stats", str(stats)]) == 0
    assert "center=corpus:" in capsys.readouterr().out


def test_cli_bench_correlation_on_the_sample(capsys):
    sample = ROOT / "tests" / "data" / "wmt17_sample.tsv"
    assert main(["bench", "correlation", "--data", str(sample), "--rows", "BERTScore-F1"]) == 0
    out = capsys.readouterr().out
    assert "| BERTScore-F1 |" in out and "avg" in out and "cs-en" in out


def test_cli_bench_lists_rows_and_suites_without_data(capsys):
    assert main(["bench", "correlation", "--list"]) == 0
    assert "TWMD-b\ttwmd.twmd" in capsys.readouterr().out
    assert main(["bench", "speed", "--list", "--suite", "sbertscore"]) == 0
    listed = capsys.readouterr().out.strip().splitlines()
    assert len(listed) == 1 and "sentence encoder alone" in listed[0]
    with pytest.raises(SystemExit, match="--data is required"):
        main(["bench", "speed", "--suite", "twmd"])


def test_speed_suite_times_its_own_inputs():
    from moverkit.bench import SpeedSuite
    from moverkit.bench._speed import format_report, run_suite

    seen = []

    def contender(predictions, references):
        return lambda: seen.append((predictions, references))

    suite = SpeedSuite("joined", {"a": contender, "b": contender}, [("a", "b", "<= 1e9")],
                       inputs=lambda p, r: (["".join(p)], ["".join(r)]))
    report = run_suite(suite, ["x", "y"], ["z", "w"], repeats=2)
    assert seen == [(["xy"], ["zw"])] * 4
    assert report["n_pairs"] == 1 and "(1 pairs; median seconds)" in format_report(report)
    assert "target <= 1e9: met" in format_report(report)


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "moverkit.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and moverkit.__version__ in result.stdout
