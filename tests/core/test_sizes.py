"""Sizes in bytes: one parser for every byte budget, as numbers or as ``"512MB"``."""

from __future__ import annotations

import pytest

import moverkit
from moverkit._core.base.sizes import parse_size


@pytest.mark.parametrize(
    ("size", "expected"), [("512MB", 512 * 2**20), ("2 GB", 2 * 2**30), ("1.5g", int(1.5 * 2**30)), (4096, 4096)]
)
def test_parse_size(size, expected):
    assert parse_size(size) == expected


@pytest.mark.parametrize(
    ("size", "error"), [("lots", ValueError), (0, ValueError), (True, TypeError), (1.5, TypeError)]
)
def test_parse_size_rejects(size, error):
    with pytest.raises(error, match="memory budget"):
        moverkit.set_memory_budget(size)
