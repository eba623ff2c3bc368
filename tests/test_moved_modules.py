"""The modules that moved keep their old paths for one release (issue 52): ``moverkit.leaves`` and
its modules (now ``moverkit.facts`` and ``moverkit.formats``), the modules that issue 46 moved
into rooms (``moverkit.specs``, ``moverkit.settings``, ...), and the two public modules renamed for
their job. Importing an old path warns once, naming the new one, from the user's own import line,
and gives the very module of the new path: every object is the same one, not a copy."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import moverkit

MOVED = {
    "moverkit.leaves.version": ("moverkit.facts.version", ["__version__"]),
    "moverkit.leaves.specs": ("moverkit.facts.specs", ["SPECS", "MetricSpec", "spec"]),
    "moverkit.leaves.lines": ("moverkit.formats.lines", ["read_texts", "write_atomic", "check_out"]),
    "moverkit.leaves.jsonfile": ("moverkit.formats.jsonfile", ["loads"]),
    "moverkit.leaves.settings": ("moverkit.formats.settings", ["Settings", "load_settings", "score_with_settings"]),
    "moverkit.leaves.options": ("moverkit.formats.options", ["METRICS", "DTYPES", "positive_int"]),
    "moverkit._version": ("moverkit.facts.version", ["__version__"]),
    "moverkit.specs": ("moverkit.facts.specs", ["SPECS", "MetricSpec", "spec"]),
    "moverkit.lines": ("moverkit.formats.lines", ["read_texts", "write_atomic"]),
    "moverkit.jsonfile": ("moverkit.formats.jsonfile", ["loads"]),
    "moverkit.settings": ("moverkit.formats.settings", ["Settings", "load_settings"]),
    "moverkit.options": ("moverkit.formats.options", ["METRICS", "positive_int"]),
    "moverkit.rescaling": ("moverkit.baselines", ["fit_baseline"]),
    "moverkit.correlation": ("moverkit.judgments.correlation", ["pearson", "kendall"]),
    "moverkit.module": ("moverkit.evaluate_modules", ["evaluate_module", "ARGUMENT_DOCS"]),
    "moverkit.mapping": ("moverkit.dataset_map", ["MapScores", "map_scores"]),
}
"""Each old path: the module it is now, and names users import from it."""


def _forget(monkeypatch, name: str) -> None:
    """As in a fresh process: ``name`` (and ``moverkit.leaves`` for its modules) not imported yet."""
    for old in {name, name.rpartition(".")[0]} & {*MOVED, "moverkit.leaves"}:
        monkeypatch.delitem(sys.modules, old, raising=False)
        parent, _, child = old.rpartition(".")
        if parent in sys.modules:
            monkeypatch.delattr(sys.modules[parent], child, raising=False)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_same_objects(old, monkeypatch):
    new, names = MOVED[old]
    current = importlib.import_module(new)
    _forget(monkeypatch, old)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: import {new} instead"):
        module = importlib.import_module(old)
    assert module is current
    for name in names:
        assert getattr(module, name) is getattr(current, name), (old, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is current  # once: the second import is silent


def test_the_warning_points_at_the_users_import(monkeypatch):
    _forget(monkeypatch, "moverkit.specs")
    _forget(monkeypatch, "moverkit.leaves.settings")
    with pytest.warns(DeprecationWarning) as caught:
        from moverkit.leaves.settings import load_settings
        from moverkit.specs import SPECS
    assert [w.filename for w in caught] == [__file__] * len(caught)
    assert len(caught) == 3, [str(w.message) for w in caught]  # moverkit.leaves, its settings, moverkit.specs
    assert SPECS is moverkit.facts.specs.SPECS
    assert load_settings is moverkit.formats.settings.load_settings


def test_the_old_leaves_package_holds_its_modules(monkeypatch):
    _forget(monkeypatch, "moverkit.leaves.specs")
    with pytest.warns(DeprecationWarning, match="moverkit.leaves is deprecated"):
        import moverkit.leaves.specs as specs
    assert specs is moverkit.facts.specs
    assert sys.modules["moverkit.leaves"].specs is specs


def test_an_unknown_module_is_still_missing():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("moverkit.no_such_module")
