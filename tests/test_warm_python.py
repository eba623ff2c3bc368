"""The forked ``python -c`` of tests/warm_python.py answers as a fresh ``python -c`` does: the
README, docs and card blocks rely on it to run as they would alone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from warm_python import offline_environment

PROBE = """
import os, sys, threading
print(sys.argv, os.getcwd(), __name__, os.environ["HF_DATASETS_OFFLINE"], repr(sys.stdin.read()), sys.path[0] == "")
print("moverkit" in sys.modules, threading.active_count(), file=sys.stderr)
"""

CASES = {
    "the process as python -c sees it": (PROBE, ["x", "--y"]),
    "an exit code": ("import sys; print('out'); sys.exit(3)", []),
    "an exit message": ("raise SystemExit('stopped here')", []),
    "an exception": ("def f():\n    raise ValueError('boom')\nf()", []),
    "an atexit handler": ("import atexit; atexit.register(print, 'at exit')", []),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", CASES)
def test_a_forked_run_answers_as_a_fresh_interpreter(case, warm_python, tmp_path):
    code, args = CASES[case]
    env = offline_environment()  # the blocks' own, so the same warm interpreter answers
    fresh = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    forked = warm_python.run([sys.executable, "-c", code, *args], tmp_path, env, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


@pytest.mark.integration
def test_started_runs_run_at_once(warm_python, tmp_path):
    """Each of two children waits for the other's file: they end only if they ran side by side."""
    code = (
        "import pathlib, sys, time; mine, theirs = map(pathlib.Path, sys.argv[1:]); mine.touch()\n"
        "deadline = time.monotonic() + 60\n"
        "while not theirs.exists() and time.monotonic() < deadline: time.sleep(0.05)\n"
        "print(theirs.exists())"
    )
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    env = {**offline_environment(), "RANK": "0"}  # a child-only key: the same warm interpreter answers
    runs = [warm_python.start([sys.executable, "-c", code, *pair], tmp_path, env) for pair in ((a, b), (b, a))]
    assert [(run.returncode, run.stdout) for run in (r.wait(timeout=120) for r in runs)] == [(0, "True\n")] * 2
