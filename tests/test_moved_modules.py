"""The modules that moved in 0.1.0 kept their old paths for one release (0.2.0, with a
``DeprecationWarning``) and are gone in 0.3.0 (CHANGELOG.md): importing one is the plain error of a
module that does not exist, and ``import moverkit`` installs no import hook."""

from __future__ import annotations

import importlib
import sys

import pytest

import moverkit

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


@pytest.mark.parametrize("old", GONE)
def test_an_old_path_is_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_import_moverkit_installs_no_import_hook():
    assert not [finder for finder in sys.meta_path if getattr(finder, "__module__", "").startswith("moverkit")]
    assert not hasattr(moverkit, "_MOVED")
