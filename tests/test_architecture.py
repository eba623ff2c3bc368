"""The layers of the package hold (issue 33): read from the source by tests/import_graph.py, which
resolves ``moverkit`` and relative imports and counts imports inside functions."""

from __future__ import annotations

import pytest
from import_graph import ROOT, SOURCE, cycles, package_imports, room_edges

MAX_LINES = 600
ROOT_IMPORTERS = {"cli", "demo", "bench"}
"""The rooms that may import the package root: front ends over the whole package."""

EVALUATE_ROOMS = {"module", *(p.parent.name for p in SOURCE.glob("*/*.py") if p.stem == p.parent.name)}
"""The evaluate modules (``twmd/twmd.py``, ...) and what they share (``module.py``)."""


@pytest.fixture(scope="module")
def edges():
    return room_edges(package_imports())


def _where(found) -> str:
    return ", ".join(f"{imp.path.relative_to(SOURCE.parent)}:{imp.line}" for imp in found)


def test_the_graph_resolves_package_imports(edges):
    # The script sees what a folder-based tool misses: ``from moverkit.x import`` in the evaluate
    # modules and imports inside functions (the root's lazy attributes come in through TYPE_CHECKING).
    assert ("twmd", "functional") in edges
    assert ("moverkit", "_core") in edges
    assert any(imp.in_function for found in edges.values() for imp in found)


def test_no_cycle_between_rooms(edges):
    found = cycles(edges)
    detail = {
        " <-> ".join(group): {f"{a} -> {b}": _where(imps) for (a, b), imps in edges.items() if {a, b} <= set(group)}
        for group in found
    }
    assert not found, f"import cycles between rooms (imports inside functions included): {detail}"


def test_only_front_ends_import_the_package_root(edges):
    bad = {a: _where(found) for (a, b), found in edges.items() if b == ROOT and a not in ROOT_IMPORTERS}
    assert not bad, f"rooms other than {sorted(ROOT_IMPORTERS)} import the package root (metrics/__init__.py): {bad}"


def test_core_stands_on_the_ground(edges):
    above = {"functional", "bench", "cli", "demo", *EVALUATE_ROOMS}
    bad = {b: _where(found) for (a, b), found in edges.items() if a == "_core" and b in above}
    assert not bad, f"_core imports rooms built on it: {bad}"


def test_no_package_file_over_600_lines():
    sizes = {
        p.relative_to(SOURCE.parent): len(p.read_text(encoding="utf-8").splitlines()) for p in SOURCE.rglob("*.py")
    }
    long = {str(p): n for p, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines (a room that does several jobs): {long}"


def test_the_evaluate_modules_do_not_restate_their_functions():
    # They were 956 lines, 247 of them a _compute that restated each function's signature: each is
    # now its card's texts and one evaluate_module(...) call, _compute derived from the function.
    modules = [p for p in SOURCE.glob("*/*.py") if p.stem == p.parent.name]
    assert len(modules) == 5
    assert sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules) <= MAX_LINES
    for path in modules:
        assert "def _compute" not in path.read_text(encoding="utf-8"), path
