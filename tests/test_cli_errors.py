"""Every subcommand's mistakes: ``moverkit: error: ...`` and exit status 2, no traceback, and no
output file left behind by a failed command; ``--help`` and ``--version`` without torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from moverkit.cli import main

TEXTS = "".join(f"sentence number {i} about a topic\n" for i in range(12))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.txt").write_text(TEXTS)
    return tmp_path


def _fails(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--pairs", "0"], "--pairs: 0 is below 1"),
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--pairs", "-3"], "--pairs: -3 is below 1"),
        (
            ["fit-baseline", "--texts", "{t}", "--out", "{o}", "--seed", "-1"],
            "--seed: -1 is below 0",
        ),  # was seed 1's file
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--layers"], "--layers: expected at least one argument"),
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--layers", "x"], "'x' is not an integer"),
        (
            ["score", "--metric", "twmd", "--predictions", "{t}", "--references", "{t}", "--batch-size", "0"],
            "0 is below 1",
        ),
        (["compare", "--references", "{t}", "--system", "a={t}", "--resamples", "0"], "--resamples: 0 is below 1"),
        (["bench", "shuffled", "--data", "{t}", "--pairs", "-1"], "--pairs: -1 is below 1"),
    ],
)
def test_bad_numbers_are_argparse_errors(files, capsys, argv, message):
    argv = [a.format(t=files / "t.txt", o=files / "out.csv") for a in argv]
    _fails(capsys, argv, message)
    assert not (files / "out.csv").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--references", "{t}", "--system", "nofile"], "--system takes NAME=FILE"),
        (["compare", "--references", "{t}", "--system", "a={t}", "--system", "a={t}"], "--system a is given twice"),
        (["compare", "--references", "{t}", "--system", "a={short}"], "has 1 lines but"),
        (["score", "--metric", "twmd", "--predictions", "{t}", "--references", "{short}"], "has 12 lines but"),
        (["fit-centering", "--texts", "{missing}", "--out", "{o}"], "No such file"),
        (["bench", "correlation"], "--data is required"),
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--layers", "3", "3"], "layers: 3 given more than once"),
        (
            ["fit-baseline", "--texts", "{t}", "--out", "{o}", "--pairs", "1000000000000"],
            "<= 1,000,000 (moverkit.baselines.MAX_PAIRS), got 1000000000000",
        ),  # ran unbounded, drawing 10^12 pairs
    ],
)
def test_mistakes_exit_2_with_a_message(files, capsys, argv, message):
    (files / "short.txt").write_text("one line\n")
    fmt = {"t": files / "t.txt", "short": files / "short.txt", "missing": files / "nope.txt", "o": files / "o.npz"}
    assert main([a.format(**fmt) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and message in err
    assert not (files / "o.npz").exists()


def test_a_failed_score_leaves_no_file_and_an_old_one_unchanged(files, capsys, monkeypatch):
    import moverkit.formats.lines

    out = files / "scores.jsonl"
    out.write_text("old\n")

    def fail_midway(path, data):
        with open(f"{path}.part-test", "w") as f:  # as if the writer had started
            f.write(data[:10])
        raise OSError("disk full")

    monkeypatch.setattr(moverkit.formats.lines, "write_atomic", fail_midway)
    argv = ["score", "--metric", "twmd", "--predictions", str(files / "t.txt"), "--references", str(files / "t.txt")]
    assert main([*argv, "--out", str(out)]) == 2
    assert "disk full" in capsys.readouterr().err
    assert out.read_text() == "old\n"


def test_write_atomic_leaves_nothing_on_failure(tmp_path):
    from moverkit.formats.lines import write_atomic

    target = tmp_path / "x.txt"
    write_atomic(target, "whole\n")
    with pytest.raises(TypeError):
        write_atomic(target, 12345)  # neither str nor bytes: refused, target unchanged
    assert target.read_text() == "whole\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


@pytest.mark.integration
def test_help_and_version_import_no_torch():
    code = (
        "import sys, moverkit.cli as cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules and 'evaluate' not in sys.modules, sorted(sys.modules)[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
    version = subprocess.run([sys.executable, "-m", "moverkit.cli", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("moverkit ")


def test_a_line_that_is_not_utf8_is_named(files, capsys):
    bad = files / "bad.txt"
    bad.write_bytes(b"first line\nsecond line\nthird \xff line\nfourth\n")
    argv = ["score", "--metric", "twmd", "--predictions", str(bad), "--references", str(files / "t.txt")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and f"{bad}, line 3: not UTF-8 text" in err


def test_compare_writes_all_its_outputs_or_none(files, capsys, monkeypatch):
    """A report that fails to render (here the plot) leaves none of the others behind: every
    output is rendered before any is written."""
    import moverkit.comparison.report as report

    def broken_plot(comparison):
        raise OSError("no room for the plot")

    monkeypatch.setattr(report, "png_bytes", broken_plot)
    (files / "b.txt").write_text(TEXTS.replace("topic", "subject"))
    out = {k: files / f"out.{k}" for k in ("json", "png", "html")}
    argv = ["compare", "--references", str(files / "t.txt"), "--system", f"a={files / 't.txt'}"]
    argv += ["--system", f"b={files / 'b.txt'}", "--metric", "twmd", "--resamples", "50"]
    argv += ["--json", str(out["json"]), "--png", str(out["png"]), "--html", str(out["html"])]
    assert main(argv) == 2
    assert "no room for the plot" in capsys.readouterr().err
    assert sorted(p.name for p in files.iterdir()) == ["b.txt", "t.txt"]


def test_compare_without_matplotlib_says_so_before_scoring(files, capsys, monkeypatch):
    import builtins

    import moverkit.comparison

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    def never(*args, **kwargs):
        raise AssertionError("scored before refusing")

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.setattr(moverkit.comparison, "compare", never)
    argv = ["compare", "--references", str(files / "t.txt"), "--system", f"a={files / 't.txt'}"]
    assert main([*argv, "--png", str(files / "plot.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and "needs matplotlib" in err and "moverkit[demo]" in err


def test_fit_centering_writes_whole_and_leaves_a_users_part_file_alone(files, capsys):
    """The statistic is written through write_atomic: a file of the user's that happens to carry
    the name of the old fixed temporary path ('.NAME.part') is not touched."""
    mine = files / ".stats.npz.part"
    mine.write_text("the user's own file\n")
    out = files / "stats.npz"
    argv = ["fit-centering", "--texts", str(files / "t.txt"), "--out", str(out), "--model", "{tiny}"]
    assert main([a.replace("{tiny}", str(files / "missing-model")) for a in argv]) == 2  # fails before writing
    assert not out.exists() and mine.read_text() == "the user's own file\n"
    assert main(argv[:-2]) == 0
    assert out.stat().st_size > 0 and mine.read_text() == "the user's own file\n"
    assert sorted(p.name for p in files.iterdir()) == [".stats.npz.part", "stats.npz", "t.txt"]


def test_the_parsers_spelled_out_choices_are_the_librarys():
    """The parser spells its choices out (building it must not import torch or read folders);
    they stay the library's own."""
    import moverkit
    from moverkit._core.base.hardware import DTYPES
    from moverkit.formats import options

    assert options.METRICS == moverkit.METRICS
    assert options.DTYPES == DTYPES


def test_compare_refuses_two_outputs_on_one_file_and_names_the_flag(files, capsys):
    argv = ["compare", "--references", str(files / "t.txt"), "--system", f"a={files / 't.txt'}"]
    assert main([*argv, "--json", str(files / "x"), "--html", str(files / "x")]) == 2
    assert "--json and --html name the same file" in capsys.readouterr().err
    assert main([*argv, "--html", str(files)]) == 2
    assert f"--html {files} is a folder" in capsys.readouterr().err
    _fails(capsys, [*argv, "--seed", "-1"], "--seed: -1 is below 0")
    assert sorted(p.name for p in files.iterdir()) == ["t.txt"]


@pytest.mark.parametrize(
    "arg, message",
    [
        ("=5", "--arg takes KEY=VALUE, got '=5'"),
        (" =5", "--arg takes KEY=VALUE, got ' =5'"),
        ("centering_stats=null", "centering_stats takes the path of a statistic saved by 'moverkit fit-centering'"),
        ("centering_stats=3", "centering_stats takes the path"),
    ],
)
def test_score_arg_mistakes_name_the_argument(files, capsys, arg, message):
    """An empty KEY was reported as 'takes no argument ;', centering_stats=null as a bare
    TypeError (Path(None)); both are refused before anything is loaded."""
    argv = ["score", "--metric", "twmd", "--predictions", str(files / "t.txt"), "--references", str(files / "t.txt")]
    assert main([*argv, "--arg", arg]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and message in err


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--arg", "temperature=0.1", "--arg", "temperature=0.2"],
            "--arg 'temperature=0.1' and --arg 'temperature=0.2'",
        ),
        (["--centering", "batch", "--arg", "centering=none"], "--centering 'batch' and --arg 'centering=none'"),
        (["--num-layers", "3", "--arg", "num_layers=4"], "--num-layers 3 and --arg 'num_layers=4'"),
        (["--idf", "--arg", "idf=false"], "--idf True and --arg 'idf=false'"),
    ],
)
def test_score_refuses_an_argument_given_twice_with_two_values(files, capsys, options, message):
    """One value silently won over the other before (the last --arg, or --arg over the option)."""
    argv = ["score", "--metric", "twmd", "--predictions", str(files / "t.txt"), "--references", str(files / "t.txt")]
    assert main([*argv, *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and message in err and "given twice" in err
    # The same value twice says one thing: it is taken.
    assert main([*argv, "--arg", "temperature=0.1", "--arg", "temperature=0.1", "--out", str(files / "o.jsonl")]) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["score", "--metric", "twmd", "--predictions", "{t}", "--references", "{t}", "--centering", "batch",
             "--centering", "none"],
            "--centering 'batch' and --centering 'none'",
        ),
        (["score", "--metric", "twmd", "--metric", "lazy_emd", "--predictions", "{t}", "--references", "{t}"],
         "--metric 'twmd' and --metric 'lazy_emd'"),
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--out", "{t}"], "--out"),
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--pairs", "3", "--pairs", "5"], "--pairs 3 and --pairs 5"),
        (["fit-baseline", "--texts", "{t}", "--out", "{o}", "--layers", "1", "--layers", "2"], "--layers [1] and --layers [2]"),
        (["bench", "overhead", "--data", "{t}", "--rounds", "2", "--rounds", "3"], "--rounds 2 and --rounds 3"),
    ],
)  # fmt: skip
def test_an_option_given_twice_with_two_values_is_refused_naming_both(files, capsys, argv, message):
    """argparse kept the last value silently (score --centering batch --centering none ran uncentered)."""
    err = _fails(capsys, [a.format(t=files / "t.txt", o=files / "out.csv") for a in argv], message)
    assert "given twice with two values" in err
    assert not (files / "out.csv").exists()


def test_an_option_given_twice_with_one_value_is_taken(files, capsys):
    argv = ["score", "--metric", "twmd", "--metric", "twmd", "--predictions", str(files / "t.txt")]
    assert main([*argv, "--references", str(files / "t.txt"), "--out", str(files / "o.jsonl")]) == 0


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), float("-inf")])
def test_score_never_writes_a_score_that_is_not_finite(files, capsys, monkeypatch, bad):
    """A NaN or infinite score (a broken model or baseline) is refused with the line named:
    --out is neither written (JSON has no Infinity or NaN) nor touched."""
    import dataclasses

    from moverkit.integrations.registry import REGISTRY

    def broken(predictions, references, **kwargs):
        return {"twmd": [0.5, bad] + [0.5] * (len(predictions) - 2), "hashcode": "twmd:x"}

    monkeypatch.setitem(REGISTRY, "twmd", dataclasses.replace(REGISTRY["twmd"], function=broken))
    out = files / "scores.jsonl"
    out.write_text("old\n")
    argv = ["score", "--metric", "twmd", "--predictions", str(files / "t.txt"), "--references", str(files / "t.txt")]
    assert main([*argv, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("moverkit: error: ")
    assert f"{files / 't.txt'}, line 2: the twmd score is {bad}, not a finite number" in captured.err
    assert out.read_text() == "old\n" and "hashcode" not in captured.out


def test_fit_centering_names_a_file_of_blank_lines(files, capsys):
    blank = files / "blank.txt"
    blank.write_text("\n   \n\t\n")
    argv = ["fit-centering", "--texts", str(blank), "--out", str(files / "o.npz")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("moverkit: error: ") and f"{blank} holds only blank lines" in err
    assert not (files / "o.npz").exists()


@pytest.mark.parametrize("bad", [None, 3, ["a.npz"]])
def test_centering_stats_load_names_its_argument(bad):
    from moverkit._core import CenteringStats

    with pytest.raises(TypeError, match=r"centering_stats must be the path \(a str or os.PathLike\).*got "):
        CenteringStats.load(bad)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "scale", "--data", "{missing}", "--sizes", "2"], "--data {missing}: no such file"),
        (
            ["bench", "scale", "--data", "{t}", "--sizes", "2", "--memory-budget", "abc"],
            "--memory-budget must look like",
        ),
        (["bench", "compare-cost", "--threads", "999999"], "--threads 999999: this machine has"),
    ],
)
def test_bench_mistakes_are_named_before_any_child_or_thread_starts(files, capsys, argv, message):
    fmt = {"t": files / "t.txt", "missing": files / "nope.tsv"}
    assert main([a.format(**fmt) for a in argv]) == 2
    assert message.format(**fmt) in capsys.readouterr().err


def test_bench_precision_and_quantized_take_one_cap(files, capsys):
    for command in ("precision", "quantized"):
        _fails(
            capsys, ["bench", command, "--data", str(files / "t.txt"), "--avx2", "--strict-avx2"], "not allowed with"
        )


def _read_fifo(fifo):
    """Read ``fifo`` to its end in a thread (a writer blocks until a reader opens it)."""
    import threading

    got = []

    def read():
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, got


def test_outputs_write_through_links_and_nodes_and_never_replace_them(files, capsys):
    """``score --out link`` replaced the symbolic link with a regular file and left the file it
    names as it was; ``compare --json node``, where node was a device node, replaced the node with
    a regular file (a FIFO stands for the node here: the same class, and a test may make one)."""
    import json
    import stat

    t = str(files / "t.txt")
    target = files / "target.jsonl"
    target.write_text("old\n")
    link = files / "link.jsonl"
    link.symlink_to(target)
    assert main(["score", "--metric", "twmd", "--predictions", t, "--references", t, "--out", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().count('"twmd"') == 12
    fifo = files / "node"
    os.mkfifo(fifo)
    reader, got = _read_fifo(fifo)
    argv = ["compare", "--references", t, "--system", f"a={t}", "--metric", "twmd", "--resamples", "20"]
    assert main([*argv, "--json", str(fifo)]) == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert "twmd" in json.loads(got[0])["hashcodes"]
    assert sorted(p.name for p in files.iterdir()) == ["link.jsonl", "node", "t.txt", "target.jsonl"]


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "overhead", "--data", "x.tsv", "--rounds", "1000000000000"],
        ["bench", "precision", "--data", "x.tsv", "--rounds", "1001"],
        ["bench", "speed", "--data", "x.tsv", "--repeats", "1000000"],
    ],
)
def test_bench_rounds_are_bounded(capsys, argv):
    """--rounds 10^12 ran a benchmark unbounded (each round is a whole pass)."""
    _fails(capsys, argv, "more than the 1,000 rounds a benchmark takes")


def test_the_registry_names_a_name_that_is_not_a_string():
    from moverkit.integrations.registry import get

    for bad in (["twmd"], None, 3):
        with pytest.raises(ValueError, match="unknown metric .*choose one of centered_bertscore"):
            get(bad)
