"""The release as a user meets it: the built sdist and wheel pass `twine check`, and in a fresh venv
that holds only the wheel (the dependencies come from this environment's site-packages through a
path file, which does not run this environment's editable-install hook, so the checkout is not
importable) every dry-run-published Space loads with `evaluate.load(folder)` and gives
`moverkit.load`'s numbers; without the wheel, loading one names the exact install command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import moverkit
from moverkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAIRS = (["the cat sat on the mat", "stocks fell on monday"], ["a cat was sitting on the mat", "shares dropped"])

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
]  # builds the distributions (setuptools from PyPI) and loads all five modules


def _run(args, **kwargs):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env, **kwargs)
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    done = _run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)])
    if done.returncode != 0 and "Could not find a version that satisfies" in done.stdout + done.stderr:
        pytest.skip("building needs setuptools from PyPI, which this machine cannot reach")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    """A venv without moverkit whose dependencies are this environment's installed packages."""
    folder = tmp_path_factory.mktemp("venv")
    done = _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(folder)])
    assert done.returncode == 0, done.stderr
    python = folder / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    out = tmp_path_factory.mktemp("hub") / "spaces"
    assert main(["publish", "--dry-run", str(out), "--source", str(ROOT)]) == 0
    return sorted(p for p in out.iterdir() if p.is_dir())


def test_twine_check_passes_on_sdist_and_wheel(dist):
    pytest.importorskip("twine")
    files = sorted(str(p) for p in dist.iterdir())
    assert any(f.endswith(".whl") for f in files) and any(f.endswith(".tar.gz") for f in files)
    done = _run([sys.executable, "-m", "twine", "check", "--strict", *files])
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_requirement_pins_this_release(published):
    pin = f"moverkit=={moverkit.__version__}"
    for name in moverkit.METRICS:
        assert pin in (moverkit.module_path(name) / "requirements.txt").read_text().splitlines()
        assert f"pip install {pin}" in (moverkit.module_path(name) / f"{name}.py").read_text()
    for folder in published:
        assert f"moverkit[demo]=={moverkit.__version__}" in (folder / "requirements.txt").read_text()


def test_wheel_alone_loads_every_published_module_and_equals_moverkit_load(dist, fresh_venv, published):
    # Without moverkit, evaluate.load names the exact release to install.
    script = "import evaluate, sys\ntry:\n    evaluate.load(sys.argv[1])\nexcept ImportError as err:\n    print(err)\n"
    done = _run([str(fresh_venv), "-c", script, str(published[0])], cwd=published[0].parent)
    assert f"pip install moverkit=={moverkit.__version__}" in done.stdout, done.stdout + done.stderr

    (wheel,) = dist.glob("*.whl")
    done = _run([str(fresh_venv), "-m", "pip", "install", "--no-deps", "--ignore-installed", "--no-index", str(wheel)])
    assert done.returncode == 0, done.stdout + done.stderr
    compare = f"""
import json, sys, evaluate, moverkit
predictions, references = {PAIRS!r}
out = {{"file": moverkit.__file__, "baselines": len(list((moverkit.module_path("twmd").parent / "baselines").glob("*.csv")))}}
for folder in sys.argv[1:]:
    name = folder.rstrip("/").rsplit("/", 1)[-1]
    hub = evaluate.load(folder).compute(predictions=predictions, references=references)
    local = moverkit.load(name).compute(predictions=predictions, references=references)
    out[name] = hub == local and bool(hub["hashcode"])
print(json.dumps(out))
"""
    done = _run([str(fresh_venv), "-c", compare, *map(str, published)], cwd=published[0].parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert re.search(r"/venv\d*/lib/python[\d.]+/site-packages/moverkit/__init__\.py$", result.pop("file"))
    assert result.pop("baselines") >= 2  # the shipped rescaling baselines are package data
    assert result == {name: True for name in moverkit.METRICS}


def test_the_wheel_holds_no_benchmark_and_its_bench_says_where_they_are(dist, fresh_venv):
    """The benchmarks stay in the repository: their data (issue 61; the wheel has no data file past
    its scoring's own: statistics, baselines, the examples) and their code (issue 68: the
    ``benchmarks`` package at the repository's root). From a plain install, ``moverkit --help``
    lists ``bench``, and ``moverkit bench`` with anything after it says in one line where the
    benchmarks are, with status 2."""
    import zipfile

    from moverkit.cli.bench import NOT_HERE

    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "wmt17_system_level" in n or n.endswith(".tsv") or ".tsv." in n]
    assert not [n for n in names if n.startswith(("benchmarks/", "moverkit/bench/"))]
    done = _run([str(fresh_venv), "-m", "pip", "install", "--no-deps", "--ignore-installed", "--no-index", str(wheel)])
    assert done.returncode == 0, done.stdout + done.stderr
    done = _run([str(fresh_venv), "-m", "moverkit.cli", "--help"], cwd=dist)
    assert done.returncode == 0 and "    bench " in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    for argv in (["bench", "system-level", "--segments", "2"], ["bench", "--help"]):
        done = _run([str(fresh_venv), "-m", "moverkit.cli", *argv], cwd=dist)
        assert done.returncode == 2 and not done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
        assert done.stderr == NOT_HERE + "\n", done.stderr[-2000:]
