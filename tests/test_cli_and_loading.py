"""The ways users reach a metric: moverkit.load, evaluate.load from a checkout, datasets.map, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import evaluate
import numpy as np
import pytest

import moverkit
from moverkit.cli import main
from moverkit.formats.lines import read_lines

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


@pytest.mark.slow
def test_add_batch_then_compute_equals_one_compute(load_metric, wmt_pairs):
    metric = load_metric("centered_bertscore")
    predictions, references = wmt_pairs
    for start in range(0, 30, 10):
        metric.add_batch(predictions=predictions[start : start + 10], references=references[start : start + 10])
    streamed = metric.compute(centering="none")
    direct = metric.compute(predictions=predictions[:30], references=references[:30], centering="none")
    np.testing.assert_allclose(streamed["f1"], direct["f1"], atol=1e-6)


@pytest.mark.slow
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


@pytest.mark.slow  # several threads scoring with the real model at once
def test_a_failed_compute_leaves_no_cache_file_and_no_held_lock():
    """evaluate removes a call's Arrow cache file and releases its lock only after a _compute that
    returns: each failed call (a bad argument, caught in a training loop) left its file in the
    cache, its lock held, and the object's next call waited a second on that lock."""
    from filelock import FileLock

    metric = moverkit.load("twmd", experiment_id="failed-compute")
    before = set(Path(metric.data_dir).iterdir())
    with pytest.raises(ValueError, match="batch_size"):
        metric.compute(predictions=["a cat"], references=["a cat"], batch_size=0)
    left = {p for p in set(Path(metric.data_dir).iterdir()) - before if p.suffix == ".arrow"}
    assert not left
    for lock in set(Path(metric.data_dir).glob("failed-compute*.lock")) - before:
        FileLock(lock).acquire(timeout=0)  # a held lock raises filelock.Timeout at once
    assert metric.compute(predictions=["a cat"], references=["a cat"])["twmd"] == [1.0]
    assert not {p for p in set(Path(metric.data_dir).iterdir()) - before if p.suffix == ".arrow"}


def test_a_failed_compute_leaves_another_objects_batches_alone(tmp_path):
    """A failed call removed the paths of this object's earlier successful call, which by then
    were another object's live cache file (the default file name is the same for both)."""
    first = moverkit.load("lazy_emd", cache_dir=str(tmp_path))
    second = moverkit.load("lazy_emd", cache_dir=str(tmp_path))
    first.compute(predictions=["a cat"], references=["a cat"])
    second.add_batch(predictions=["the dog runs"], references=["a dog ran"])
    with pytest.raises(ValueError):
        first.compute(predictions=[None], references=["x"])
    assert second.compute()["lazy_emd"] == moverkit.functional.lazy_emd(["the dog runs"], ["a dog ran"])["lazy_emd"]


@pytest.mark.slow
def test_threads_sharing_one_metric_object_each_get_their_own_result():
    """evaluate's cache file cannot be shared: four threads computing on one object gave
    ArrowInvalid/FileNotFoundError, then None. Calls now take turns."""
    metric = moverkit.load("centered_bertscore")
    calls = [([f"a cat number {i} sat", "x y"], [f"the cat {i} sat", f"x {k}"]) for i in range(4) for k in range(3)]
    expected = [metric.compute(predictions=p, references=r, centering="none")["f1"] for p, r in calls]
    results, start = [None] * len(calls), threading.Barrier(4)

    def work(i):
        start.wait()
        for n in range(3 * i, 3 * i + 3):
            results[n] = metric.compute(predictions=calls[n][0], references=calls[n][1], centering="none")["f1"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == expected


def test_batches_added_by_one_thread_are_not_taken_by_another():
    metric = moverkit.load("centered_bertscore")
    added, done = threading.Event(), threading.Event()
    streamed = {}

    def stream():
        metric.add_batch(predictions=["a cat sat"], references=["the cat sat"])
        added.set()
        done.wait(60)
        streamed["f1"] = metric.compute(centering="none")["f1"]

    thread = threading.Thread(target=stream)
    thread.start()
    assert added.wait(60)
    try:
        with pytest.raises(RuntimeError, match="another thread has added batches to this object"):
            metric.compute(predictions=["hello"], references=["hi"], centering="none")
    finally:
        done.set()
        thread.join()
    direct = moverkit.load("centered_bertscore").compute(
        predictions=["a cat sat"], references=["the cat sat"], centering="none"
    )
    assert streamed["f1"] == direct["f1"]
    assert metric.compute(predictions=["hello"], references=["hi"], centering="none")["f1"][0] > 0  # usable again


@pytest.mark.slow
def test_cli_scores_the_example_files(tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    code = main(
        [
            "score",
            "--metric",
            "centered_bertscore",
            "--predictions",
            str(EXAMPLES / "predictions.txt"),
            "--references",
            str(EXAMPLES / "references.txt"),
            "--centering",
            "none",
            "--out",
            str(out),
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
    # The file holds every score to 6 decimals (one precision for all outputs).
    np.testing.assert_allclose([r["f1"] for r in lines], direct["f1"], atol=5e-7 + 1e-12)
    assert all(round(r[k], 6) == r[k] for r in lines for k in ("precision", "recall", "f1"))


def test_cli_several_reference_files_and_metric_arguments(tmp_path, capsys):
    (tmp_path / "p.txt").write_text("the cat sat\nhello\n")
    (tmp_path / "r1.txt").write_text("stocks fell\nhello\n")
    (tmp_path / "r2.txt").write_text("the cat sat\nbye\n")
    args = ["score", "--metric", "centered_bertscore", "--predictions", str(tmp_path / "p.txt")]
    args += ["--references", str(tmp_path / "r1.txt"), "--references", str(tmp_path / "r2.txt")]
    assert main(args + ["--arg", "max_length=64"]) == 0
    printed = dict(line.split("\t") for line in capsys.readouterr().out.strip().splitlines())
    assert float(printed["f1"]) == pytest.approx(1.0, abs=1e-5)  # each prediction has an identical reference


def test_cli_dtype_and_long_texts_reach_the_metric(tmp_path, capsys):
    (tmp_path / "p.txt").write_text("the cat sat on the mat\nstocks fell sharply\n")
    (tmp_path / "r.txt").write_text("a cat was on the mat\nshares dropped\n")
    args = ["score", "--metric", "twmd", "--predictions", str(tmp_path / "p.txt"), "--references"]
    args += [str(tmp_path / "r.txt"), "--centering", "none", "--out", str(tmp_path / "s.jsonl")]
    assert main(args + ["--dtype", "bfloat16", "--long-texts", "window"]) == 0
    scores = [json.loads(line)["twmd"] for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    direct = moverkit.load("twmd").compute(
        predictions=["the cat sat on the mat", "stocks fell sharply"],
        references=["a cat was on the mat", "shares dropped"],
        centering="none", dtype="bfloat16", long_texts="window",
    )  # fmt: skip
    np.testing.assert_allclose(scores, direct["twmd"], atol=5e-7 + 1e-12)  # the file's 6 decimals
    assert "dtype=bfloat16" in direct["hashcode"]
    with pytest.raises(SystemExit):
        main(args + ["--dtype", "float64"])  # argparse's choices


@pytest.mark.parametrize("inside", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"])
def test_a_line_ends_at_newline_only(tmp_path, inside):
    """As `wc -l` counts: str.splitlines (and Python's universal newlines, for a lone "\r") would
    break inside these lines."""
    path = tmp_path / "texts.txt"
    path.write_bytes(f"a{inside}b\nc\n".encode())
    assert read_lines(path) == [f"a{inside}b", "c"]


@pytest.mark.parametrize(
    ("content", "texts"),
    [
        (b"a\r\nb\r\n", ["a", "b"]),  # Windows line ends: the "\r" is not part of the text
        (b"a\nb", ["a", "b"]),  # a last line without its newline is a text
        (b"a\n\n", ["a", ""]),  # an empty line is an empty text
        (b"\n", [""]),
        (b"", []),
        (b"\xef\xbb\xbfa\n", ["a"]),  # a byte order mark is not text
    ],
)
def test_line_ends_and_file_ends(tmp_path, content, texts):
    path = tmp_path / "texts.txt"
    path.write_bytes(content)
    assert read_lines(path) == texts


def test_cli_a_form_feed_does_not_shift_the_pairs(tmp_path, capsys):
    # splitlines made three pairs of these two lines each (a form feed and a U+2028 inside), rc 0.
    (tmp_path / "p.txt").write_text("the cat\x0csat on the mat\nhello there\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("a cat sat on the mat\nhello\u2028there\n", encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    argv = ["score", "--metric", "centered_bertscore", "--predictions", str(tmp_path / "p.txt")]
    assert main([*argv, "--references", str(tmp_path / "r.txt"), "--centering", "none", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    direct = moverkit.load("centered_bertscore").compute(
        predictions=["the cat\x0csat on the mat", "hello there"],
        references=["a cat sat on the mat", "hello\u2028there"],
        centering="none",
    )
    assert [line["f1"] for line in lines] == [round(f, 6) for f in direct["f1"]]


class _NoScoring:
    """A metric whose compute fails the test: the error must come before any scoring."""

    def __init__(self, metric):
        self._compute = metric._compute

    def compute(self, **kwargs):
        raise AssertionError("scored before refusing the command")


@pytest.fixture
def cli_files(tmp_path, monkeypatch):
    """Two files of two lines and an empty one; moverkit.load's metrics cannot compute."""
    load = moverkit.load
    monkeypatch.setattr(moverkit, "load", lambda name: _NoScoring(load(name)))
    (tmp_path / "p.txt").write_text("a cat\nhello\n")
    (tmp_path / "r.txt").write_text("the cat\nhi\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    return tmp_path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--out", "{tmp}"], "--out {tmp} is a folder; give the path of a file"),
        (["--out", "{tmp}/missing/s.jsonl"], "--out {tmp}/missing/s.jsonl: there is no folder {tmp}/missing"),
        (["--out", "{tmp}/p.txt"], "--out {tmp}/p.txt is the input file {tmp}/p.txt; writing would overwrite it"),
        (["--out", "{tmp}/r.txt"], "--out {tmp}/r.txt is the input file {tmp}/r.txt; writing would overwrite it"),
        # centered_bertscore's default centering is corpus: a statistic alone is taken, if it exists
        (["--centering-stats", "{tmp}/s.npz"], "--centering-stats {tmp}/s.npz: there is no such file"),
        (["--centering", "batch", "--centering-stats", "{tmp}/s.npz"], "--centering-stats is used only with"),
        (["--predictions", "{tmp}/empty.txt"], "{tmp}/empty.txt is empty; it needs one text per line"),
        (["--references", "{tmp}/empty.txt"], "{tmp}/empty.txt is empty; it needs one text per line"),
        (["--predictions", "{tmp}/absent.txt"], "No such file or directory: '{tmp}/absent.txt'"),
        (["--predictions", "{tmp}/latin1.txt"], "{tmp}/latin1.txt, line 1: not UTF-8 text"),
    ],
)
def test_cli_user_mistakes_are_refused_before_scoring(cli_files, capsys, options, message):
    argv = ["score", "--metric", "centered_bertscore", "--predictions", "{tmp}/p.txt", "--references", "{tmp}/r.txt"]
    replace = {"--predictions": 4, "--references": 6}
    for flag, value in zip(options[::2], options[1::2]):
        if flag in replace:
            argv[replace[flag]] = value
        else:
            argv += [flag, value]
    before = {p.name: p.read_bytes() for p in cli_files.iterdir() if p.is_file()}
    assert main([arg.format(tmp=cli_files) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and message.format(tmp=cli_files) in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in cli_files.iterdir() if p.is_file()} == before  # nothing written


def test_cli_fit_centering_refuses_mistakes_before_fitting(cli_files, capsys, monkeypatch):
    def fit(*args, **kwargs):
        raise AssertionError("fitted before refusing the command")

    monkeypatch.setattr(moverkit, "fit_centering", fit)
    for texts, out, message in (
        ("p.txt", ".", "is a folder"),
        ("empty.txt", "s.npz", "empty.txt is empty"),
        ("p.txt", "p.txt", "is the input file"),
    ):
        assert main(["fit-centering", "--texts", str(cli_files / texts), "--out", str(cli_files / out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("moverkit: error: ") and message in err
    argv = ["fit-centering", "--texts", str(cli_files / "p.txt"), "--out", str(cli_files / "s.npz"), "--lang", "de"]
    assert main(argv) == 2
    assert "--lang is used only with --level sentence" in capsys.readouterr().err


def test_cli_errors_name_the_problem(tmp_path, capsys):
    (tmp_path / "p.txt").write_text("a\nb\n")
    (tmp_path / "r.txt").write_text("a\n")
    code = main(
        [
            "score",
            "--metric",
            "centered_bertscore",
            "--predictions",
            str(tmp_path / "p.txt"),
            "--references",
            str(tmp_path / "r.txt"),
        ]
    )
    assert code == 2
    assert "has 2 lines but" in capsys.readouterr().err
    code = main(
        [
            "score",
            "--metric",
            "centered_bertscore",
            "--predictions",
            str(tmp_path / "p.txt"),
            "--references",
            str(tmp_path / "p.txt"),
            "--arg",
            "temperature=0.1",
        ]
    )
    assert code == 2
    assert "takes no argument temperature" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_fit_centering_then_score_with_it(tmp_path, capsys):
    stats = tmp_path / "stats.npz"
    assert main(["fit-centering", "--texts", str(EXAMPLES / "references.txt"), "--out", str(stats)]) == 0
    assert (
        main(
            [
                "score",
                "--metric",
                "centered_bertscore",
                "--predictions",
                str(EXAMPLES / "predictions.txt"),
                "--references",
                str(EXAMPLES / "references.txt"),
                "--centering",
                "corpus",
                "--centering-stats",
                str(stats),
            ]
        )
        == 0
    )
    assert "center=corpus:" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_sentence_statistic_for_sbertscore(tmp_path, capsys):
    stats = tmp_path / "sentences.npz"
    fit = ["fit-centering", "--level", "sentence", "--texts", str(EXAMPLES / "references.txt"), "--out", str(stats)]
    assert main(fit) == 0
    assert "sentences of 20 texts" in capsys.readouterr().out
    score = ["score", "--metric", "sbertscore", "--predictions", str(EXAMPLES / "predictions.txt")]
    score += ["--references", str(EXAMPLES / "references.txt"), "--model", "sentence-transformers/all-MiniLM-L6-v2"]
    assert main([*score, "--centering", "corpus", "--centering-stats", str(stats)]) == 0
    assert "center=corpus:" in capsys.readouterr().out


@pytest.mark.integration  # runs the installed console script in a subprocess
def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "moverkit.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and moverkit.__version__ in result.stdout
