"""Moved module paths. 0.4.0 moved five modules into ``moverkit.integrations`` (issue 68): their old
paths import for one release, each warning (``DeprecationWarning`` naming the new path, at the
user's import line) and giving the very module of the new path, from ``metrics/_moved/``, a folder
on the package's path (no import hook). The paths 0.1.0 moved are gone since 0.3.0 (CHANGELOG.md):
importing one is the plain error of a module that does not exist."""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from pathlib import Path

import pytest

import moverkit

MOVED = {
    "moverkit.registry": ("moverkit.integrations.registry", ["REGISTRY", "Metric", "get"]),
    "moverkit.evaluate_modules": ("moverkit.integrations.evaluate_modules", ["evaluate_module", "ARGUMENT_DOCS"]),
    "moverkit.dataset_map": ("moverkit.integrations.dataset_map", ["MapScores", "map_scores"]),
    "moverkit.rewards": ("moverkit.integrations.rewards", ["MetricReward", "reward_function"]),
    "moverkit.mbr": ("moverkit.integrations.mbr", ["mbr_select"]),
}
"""Each path 0.4.0 moved: the module it is now, and names users import from it."""

GONE = [
    "moverkit.leaves",
    "moverkit.leaves.specs",
    "moverkit._version",
    "moverkit.specs",
    "moverkit.lines",
    "moverkit.jsonfile",
    "moverkit.settings",
    "moverkit.options",
    "moverkit.rescaling",
    "moverkit.correlation",
    "moverkit.module",
    "moverkit.mapping",
    "moverkit.functional.entry",
]


def _forget(monkeypatch, name: str) -> None:
    """As in a fresh process: ``name`` not imported yet."""
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delattr(moverkit, name.rpartition(".")[2], raising=False)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_path_warns_and_gives_the_same_objects(old, monkeypatch):
    new, names = MOVED[old]
    current = importlib.import_module(new)
    _forget(monkeypatch, old)
    message = f"{old} moved to {new} in 0.4.0; the old path goes in 0.5.0"
    with pytest.warns(DeprecationWarning, match=f"^{message}$"):
        module = importlib.import_module(old)
    assert module is current
    assert getattr(moverkit, old.rpartition(".")[2]) is current
    for name in names:
        assert getattr(module, name) is getattr(current, name), (old, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is current  # once: the second import is silent


def test_the_warning_points_at_the_users_import(monkeypatch):
    _forget(monkeypatch, "moverkit.registry")
    _forget(monkeypatch, "moverkit.mbr")
    with pytest.warns(DeprecationWarning) as caught:
        from moverkit.mbr import mbr_select
        from moverkit.registry import REGISTRY
    assert [w.filename for w in caught] == [__file__] * 2, [str(w.message) for w in caught]
    assert REGISTRY is moverkit.integrations.registry.REGISTRY
    assert mbr_select is moverkit.mbr_select


def test_the_moved_folder_holds_the_moved_paths_only():
    folder = Path(moverkit.__file__).parent / "_moved"
    assert str(folder) in moverkit.__path__
    assert {f"moverkit.{p.stem}" for p in folder.glob("*.py")} == set(MOVED)


def test_the_package_imports_no_moved_path():
    """moverkit's own code (and the Spaces') imports the new paths, at the top of a file or in a
    function: ``import moverkit.registry``, ``from moverkit.registry import ...`` and ``from
    moverkit import registry`` are the user's, who gets the warning."""
    root = Path(moverkit.__file__).parent
    found = []
    for path in [*root.rglob("*.py"), *root.parent.glob("spaces/*/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            found += [f"{path.relative_to(root.parent)}:{node.lineno}" for name in named if name in MOVED]
    assert not found, found


@pytest.mark.parametrize("old", GONE)
def test_an_old_path_is_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_import_moverkit_installs_no_import_hook():
    assert not [finder for finder in sys.meta_path if getattr(finder, "__module__", "").startswith("moverkit")]
    assert not hasattr(moverkit, "_MOVED")
