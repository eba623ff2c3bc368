"""Every code block of README.md and of the pages in docs/ runs as written: python blocks each in a
fresh interpreter, bash blocks line by line (each line a `moverkit` command in a fresh interpreter),
in a folder that holds the files they name. A fresh interpreter is forked from one that has the
heavy libraries imported (tests/warm_python.py).

The fresh-machine install lines (a new venv, pip install) are what CI itself runs, so they are
exempt; every other line must run. The Layout block (no language tag) is a picture, not code.
"""

from __future__ import annotations

import inspect
import re
import shlex
import sys
from pathlib import Path

import pytest
from warm_python import offline_environment

import moverkit
from moverkit import functional

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [
    block
    for page in PAGES
    for block in re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)
]
INSTALL = "python3 -m venv"  # the fresh-machine lines
SLOW_WORDS = ("bench", "publish")  # blocks that run many metrics over 200 pairs

TEXTS = {  # the input files the shell examples name
    "hyp.txt": "the cat sat on the mat\nstocks fell sharply on monday\n",
    "ref.txt": "a cat was sitting on the mat\nshares dropped a lot on monday\n",
    "ref1.txt": "a cat was sitting on the mat\nshares dropped a lot on monday\n",
    "ref2.txt": "there is a cat on the mat\nthe market fell on monday\n",
    "corpus.txt": (  # a corpus for fit-centering: enough distinct texts for a mean that says something
        "a cat was sitting on the mat\nshares dropped a lot on monday\nhe went home early\n"
        "the weather stayed cold all week\nthe committee approved the new budget\n"
        "she plays the violin in an orchestra\ntraffic was heavy on the bridge this morning\n"
        "the museum opens a new exhibition in may\nprices of fresh vegetables rose again\n"
        "the team won its third match in a row\nscientists found water on a distant moon\n"
        "the old library will close for repairs\n"
    ),
}


def _blocks(language):
    return [code for lang, code in BLOCKS if lang == language]


def _param(code):
    slow = any(word in code for word in SLOW_WORDS)
    marks = [pytest.mark.integration] + ([pytest.mark.slow] if slow else [])
    return pytest.param(code, marks=marks, id=code.strip().splitlines()[0][:40])


@pytest.fixture
def workdir(tmp_path):
    """A user's folder: the checkout's metrics/, tests/, spaces/ and data/ beside the input files."""
    for name in ("metrics", "tests", "spaces", "data"):
        (tmp_path / name).symlink_to(ROOT / name)
    for name, text in TEXTS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _run(python, args, cwd):
    """``python -c`` in a fresh process (forked from a warm interpreter: tests/warm_python.py)."""
    done = python.run(args, cwd, offline_environment(), timeout=900)
    assert done.returncode == 0, f"{args}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    return done


def test_readme_has_the_blocks_this_test_runs():
    assert len(_blocks("python")) >= 4 and len(_blocks("bash")) >= 3
    assert {lang for lang, _ in BLOCKS} <= {"python", "bash", ""}


# Each block runs with moverkit's warnings as errors: a README example that warns fails.
WARNINGS_ARE_ERRORS = 'import warnings, moverkit; warnings.simplefilter("error", moverkit.MoverkitWarning)\n'


@pytest.mark.parametrize("code", [_param(c) for c in _blocks("python")])
def test_python_block_runs_alone(code, workdir, warm_python):
    _run(warm_python, [sys.executable, "-c", WARNINGS_ARE_ERRORS + code], workdir)


def _commands(code):
    """The lines of a bash block, comments dropped; install lines left out."""
    lines = [line.split("  #")[0].strip() for line in code.splitlines()]
    return [line for line in lines if line and not line.startswith(INSTALL)]


@pytest.mark.parametrize("code", [_param(c) for c in _blocks("bash")])
def test_bash_block_runs(code, workdir, warm_python):
    for line in _commands(code):
        words = shlex.split(line)
        assert words[0] == "moverkit", f"a README shell line that is neither install nor moverkit: {line}"
        cli = WARNINGS_ARE_ERRORS + "import runpy; runpy.run_module('moverkit.cli', run_name='__main__')"
        moverkit_cli = [sys.executable, "-c", cli, *words[1:]]
        _run(warm_python, moverkit_cli, workdir)


def test_default_centering_table_states_each_metrics_default():
    centering = (ROOT / "docs" / "centering.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `(\w+)` \| `(\w+)` \|", centering, flags=re.M))
    assert set(table) == set(moverkit.METRICS)
    for name, default in table.items():
        assert inspect.signature(getattr(functional, name)).parameters["centering"].default == default, name
