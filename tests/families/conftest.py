"""Fixtures of the family matrix: each family's model folder, built once per session."""

from __future__ import annotations

import os

import pytest

from families import models


@pytest.fixture(scope="session")
def family_model(tmp_path_factory):
    """``family_model(name)``: the folder of family ``name`` (one of ``models.FAMILIES``) to pass
    as ``model_type``, built the first time a test asks for it; pytest-xdist's workers share the
    session's folders (the base temporary folder's parent is the run's)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "families"
    return lambda name: models.family_model(name, root)
