"""The layout of :mod:`benchmarks` (issue 46): benchmarks are found one way, by the names in
``benchmarks/__init__.py``, and no benchmark module imports another; what several share is in the
``_``-prefixed modules. The package is the repository's, not moverkit's (issue 68): nothing in
``metrics/`` imports it, ``moverkit bench`` finds it in the checkout, and from a plain install says
where it is."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks as bench
from moverkit.cli import bench as cli_bench
from moverkit.cli import main

BENCH = Path(bench.__file__).parent
PACKAGE = BENCH.parent / "metrics"
MODULES = sorted(p.stem for p in BENCH.glob("*.py"))
BENCHMARKS = [name for name in MODULES if not name.startswith("_")]


def _bench_imports(name: str, source: str | None = None) -> set[str]:
    """The modules of ``benchmarks`` that module ``name`` (its ``source``, else its file)
    imports, at its top or in a function: ``from .x import ...``, ``from . import x``, ``from
    benchmarks(.x) import ...``, ``import benchmarks.x``; names of the package itself
    (``from . import CorrelationRow``) are not modules."""
    tree = ast.parse(source if source is not None else (BENCH / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("benchmarks.")}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                package = not module
                found |= {module.split(".")[0]} if module else set()
            elif module == "benchmarks" or module.startswith("benchmarks."):
                package = module == "benchmarks"
                found |= {module.split(".")[1]} if not package else set()
            else:
                continue
            if package:
                found |= {a.name for a in node.names if a.name in MODULES}
    return found - {name}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_no_benchmark_module_imports_another(name):
    others = sorted(m for m in _bench_imports(name) if not m.startswith("_"))
    assert not others, f"benchmarks/{name}.py imports {others}: move what they share to benchmarks/_shared.py"


def test_the_shared_modules_import_no_benchmark():
    for name in [m for m in MODULES if m.startswith("_")]:
        assert not [m for m in _bench_imports(name) if not m.startswith("_")], name


@pytest.mark.parametrize(
    "line",
    [
        "from .overhead import floor",
        "from . import overhead",
        "from benchmarks.overhead import floor",
        "from benchmarks import overhead",
        "import benchmarks.overhead",
        "def f():\n    from .overhead import floor",
    ],
)
def test_the_check_sees_every_form_of_import(line):
    assert _bench_imports("gpu", f"from . import CorrelationRow\nfrom ._shared import floor\n{line}\n") == {
        "_shared",
        "overhead",
    }


def _defined(name: str) -> set[str]:
    tree = ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return names | {
        t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if hasattr(t, "id")
    }


def test_every_benchmark_module_is_named_once_and_has_what_its_list_says():
    assert sorted([*bench.COMMANDS, *bench.ROW_MODULES]) == BENCHMARKS
    for name in bench.COMMANDS:
        assert {"HELP", "register", "command"} <= _defined(name), name
    for name in bench.ROW_MODULES:
        assert {"CORRELATION_ROWS", "SPEED_SUITES"} <= _defined(name), name


def test_the_discovered_commands_are_those_of_moverkit_bench_help(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    listed = re.search(r"\{([\w,-]+)\}", capsys.readouterr().out).group(1).split(",")
    assert listed == [name.replace("_", "-") for name in bench.COMMANDS]


def test_nothing_in_the_package_imports_the_benchmarks():
    """The wheel holds ``metrics/`` alone: a module of it that imported ``benchmarks`` would fail
    there (``moverkit.cli.bench`` finds the package by its folder, without an import statement)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for n in names if n.split(".")[0] == "benchmarks"]
    assert not found, f"modules of metrics/ import the benchmarks, which are not in the wheel: {found}"


def test_the_command_finds_the_benchmarks_in_the_checkout():
    assert cli_bench.benchmarks_root() == BENCH.parent


@pytest.mark.parametrize("argv", [["bench", "--help"], ["bench", "speed", "--help"]])
def test_the_help_of_moverkit_bench_and_of_a_benchmark(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: moverkit {' '.join(argv[:-1])} [-h]")


@pytest.mark.integration  # the command in a fresh process, outside the checkout
def test_moverkit_bench_runs_from_anywhere_in_an_editable_install(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = [sys.executable, "-m", "moverkit.cli", "bench", "speed", "--list", "--suite", "twmd"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0 and done.stdout.startswith("twmd\t"), done.stderr[-2000:]


@pytest.mark.parametrize(
    "argv",
    [["bench"], ["bench", "--help"], ["bench", "-h"], ["bench", "speed", "--help"], ["bench", "gpu", "--x", "1"]],
)
def test_from_a_plain_install_moverkit_bench_says_where_the_benchmarks_are(argv, monkeypatch, capsys):
    monkeypatch.setattr(cli_bench, "benchmarks_root", lambda: None)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert not out and err == cli_bench.NOT_HERE + "\n"
    assert "clone" in err and "pip install -e ." in err
    with pytest.raises(SystemExit):
        main(["--help"])
    assert re.search(r"^    bench +benchmarks: ", capsys.readouterr().out, re.M)  # still listed
