"""The layout of :mod:`moverkit.bench` (issue 46): benchmarks are found one way, by the names in
``bench/__init__.py``, and no benchmark module imports another; what several share is in the
``_``-prefixed modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import moverkit.bench as bench
from moverkit.cli import main

BENCH = Path(bench.__file__).parent
MODULES = sorted(p.stem for p in BENCH.glob("*.py"))
BENCHMARKS = [name for name in MODULES if not name.startswith("_")]


def _bench_imports(name: str, source: str | None = None) -> set[str]:
    """The modules of ``moverkit.bench`` that module ``name`` (its ``source``, else its file)
    imports, at its top or in a function: ``from .x import ...``, ``from . import x``, ``from
    moverkit.bench(.x) import ...``, ``import moverkit.bench.x``; names of the package itself
    (``from . import CorrelationRow``) are not modules."""
    tree = ast.parse(source if source is not None else (BENCH / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("moverkit.bench.")}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                package = not module
                found |= {module.split(".")[0]} if module else set()
            elif module == "moverkit.bench" or module.startswith("moverkit.bench."):
                package = module == "moverkit.bench"
                found |= {module.split(".")[2]} if not package else set()
            else:
                continue
            if package:
                found |= {a.name for a in node.names if a.name in MODULES}
    return found - {name}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_no_benchmark_module_imports_another(name):
    others = sorted(m for m in _bench_imports(name) if not m.startswith("_"))
    assert not others, f"bench/{name}.py imports {others}: move what they share to bench/_shared.py"


def test_the_shared_modules_import_no_benchmark():
    for name in [m for m in MODULES if m.startswith("_")]:
        assert not [m for m in _bench_imports(name) if not m.startswith("_")], name


@pytest.mark.parametrize(
    "line",
    [
        "from .overhead import floor",
        "from . import overhead",
        "from moverkit.bench.overhead import floor",
        "from moverkit.bench import overhead",
        "import moverkit.bench.overhead",
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
