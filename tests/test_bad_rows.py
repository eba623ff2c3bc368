"""Property test (issue 21): a bad row anywhere in a batch is refused, naming its column and row,
through every surface that takes rows: ``map_scores`` (datasets batches and single rows) and Ray
(numpy, pandas and pyarrow batches). Hypothesis draws the batch, the bad value and where it sits;
the check runs before any model is loaded, so no case scores anything."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import moverkit  # noqa: E402

GOOD = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
BAD = st.sampled_from([None, math.nan, np.nan, 12345, 1.5, True, b"bytes", ["a list"]])
CASE = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(GOOD, min_size=n, max_size=n),
        st.lists(GOOD, min_size=n, max_size=n),
        st.integers(0, n - 1),
        st.sampled_from(["hyp", "ref"]),
        BAD,
    )
)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _refused(call, column: str, row: int | None):
    """``call()`` raises a TypeError or ValueError that names ``column`` (and ``row``, if given)."""
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    message = str(caught.value)
    assert repr(column) in message, message
    if row is not None:
        assert re.search(rf"\brow {row}\b", message), message


def _with_bad(hyps, refs, row, column, bad):
    columns = {"hyp": list(hyps), "ref": list(refs)}
    columns[column][row] = bad
    return columns


@SETTINGS
@given(CASE)
def test_map_scores_refuses_a_bad_row_naming_it(case):
    hyps, refs, row, column, bad = case
    if column == "ref" and isinstance(bad, list):
        return  # a list is a valid reference cell (several references)
    score = moverkit.map_scores("twmd", "hyp", "ref", centering="none")
    batch = _with_bad(hyps, refs, row, column, bad)
    _refused(lambda: score.texts(batch), column, row)  # batched=True
    if not isinstance(bad, list):  # a plain dict holding a list reads as a batch (datasets' rows say which)
        one = {"hyp": batch["hyp"][row], "ref": batch["ref"][row]}
        _refused(lambda: score.texts(one), column, None)  # batched=False: the row is the call


@SETTINGS
@given(CASE, st.sampled_from(["numpy", "pandas", "pyarrow"]))
def test_ray_refuses_a_bad_row_naming_it(case, layout):
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from moverkit.ray import RayScorer

    hyps, refs, row, column, bad = case
    if isinstance(bad, (list, bytes)) or (bad is True and layout != "numpy"):
        return  # not a value a table column of texts holds
    scorer = RayScorer.__new__(RayScorer)  # the checks run before the encoder is needed
    scorer.score = moverkit.map_scores("twmd", "hyp", "ref", centering="none")
    columns = _with_bad(hyps, refs, row, column, bad)
    if layout == "numpy":
        batch = {name: np.array(values, dtype=object) for name, values in columns.items()}
    elif layout == "pandas":
        import pandas as pd

        batch = pd.DataFrame(columns)
    else:
        import pyarrow as pa

        try:
            batch = pa.table(columns)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return  # pyarrow itself refuses a column mixing strings and numbers
    _refused(lambda: scorer(batch), column, row)
