"""moverkit.ray: Ray Data actors, each scoring its batches as one process would."""

from __future__ import annotations

import logging
import shutil
import tempfile

import numpy as np
import pytest

import moverkit
from moverkit.functional import centered_bertscore, twmd


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = wmt_pairs
    return list(predictions[:24]), list(references[:24])


@pytest.mark.integration
def test_ray_data_equals_one_process(pairs):
    """The one test that starts Ray: the scores of an actor pool, and no deprecation logged on
    the way. (A None row's refusal on Ray's own batch conversion is held below without starting
    Ray: ``ray_batch`` hands the scorer the batch ``map_batches`` would.)"""
    ray = pytest.importorskip("ray")
    from moverkit.integrations.ray import RayScorer, score_dataset

    predictions, references = pairs
    stats = moverkit.fit_centering(references)
    kwargs = {"centering": "corpus", "centering_stats": stats}
    direct = centered_bertscore(predictions, references, **kwargs)
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    logged = _Records()
    logging.getLogger("ray.data").addHandler(logged)
    logging.getLogger("ray.data._internal.util").addHandler(logged)  # where map_batches' deprecations are logged
    try:
        rows = [{"id": i, "hyp": p, "ref": r} for i, (p, r) in enumerate(zip(predictions, references))]
        dataset = ray.data.from_items(rows, override_num_blocks=4)
        scored = score_dataset(dataset, "centered_bertscore", "hyp", "ref", concurrency=2, batch_size=5, **kwargs)
        out = sorted(scored.take_all(), key=lambda row: row["id"])
    finally:
        logging.getLogger("ray.data").removeHandler(logged)
        logging.getLogger("ray.data._internal.util").removeHandler(logged)
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    assert [row["hyp"] for row in out] == predictions
    np.testing.assert_allclose([row["f1"] for row in out], direct["f1"], atol=1e-6)
    assert not [m for m in logged.messages if "deprecated" in m], logged.messages
    with pytest.raises(ValueError, match="centering='batch'"):
        RayScorer("twmd", "hyp", "ref", centering="batch")
    RayScorer("twmd", "hyp", "ref")  # the default, corpus with the shipped statistic, depends on no batch


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def scorer():
    """One RayScorer, called directly (as a Ray actor calls it), without starting Ray."""
    from moverkit.integrations.ray import RayScorer

    return RayScorer("twmd", "hyp", "ref", centering="none")


def ray_batch(columns: dict, batch_format: str):
    """``columns`` as the batch ``map_batches`` hands its function in ``batch_format``: Ray's own
    conversion of an Arrow block (a null stays a null: None, NaN or pandas' NA, as Ray makes it)."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("ray")
    from ray.data.block import BlockAccessor

    return BlockAccessor.for_block(pa.table(columns)).to_batch_format(batch_format)


FORMATS = ["numpy", "pandas", "pyarrow"]
MISSING = r"(None|NaN|NA)( \(a missing value\))?;"
HOSTILE = {
    # str() made these "None" (a twmd of 1.0 against the reference "None"), "12345.0", "nan".
    "None prediction": (
        {"hyp": ["a cat", None], "ref": ["the cat", "None"]},
        ValueError,
        "'hyp' at row 1 of this batch is " + MISSING,
    ),
    "None reference": (
        {"hyp": ["a cat", "None"], "ref": ["the cat", None]},
        ValueError,
        "'ref' at row 1 of this batch is " + MISSING,
    ),
    "number prediction": (
        {"hyp": [12345, 7], "ref": ["12345", "7"]},
        TypeError,
        "'hyp' at row 0 of this batch must be a string, got int",
    ),
    "null in a number column": (
        {"hyp": [12345.0, None], "ref": ["12345", "7"]},
        (TypeError, ValueError),
        "'hyp' at row 0 of this batch must be a string, got float",
    ),
    "NaN reference": (
        {"hyp": ["nan", "a"], "ref": [float("nan"), 1.5]},
        ValueError,
        "'ref' at row 0 of this batch is NaN",
    ),
    "None in a list of references": (
        {"hyp": ["a", "b"], "ref": [["x", None], ["y"]]},
        ValueError,
        "reference 1 in column 'ref' at row 0 of this batch is None",
    ),
    "None list of references": (
        {"hyp": ["a", "b"], "ref": [["x"], None]},
        ValueError,
        "'ref' at row 1 of this batch is " + MISSING,
    ),
    "empty list of references": (
        {"hyp": ["a", "b"], "ref": [["x"], []]},
        ValueError,
        "'ref' at row 1 of this batch is an empty list",
    ),
    "missing column": (
        {"prediction": ["a"], "ref": ["b"]},
        KeyError,
        "no column 'hyp' for the predictions; its columns are 'prediction', 'ref'",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("batch_format", FORMATS)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_ray_batches_are_checked_not_stringified(scorer, case, batch_format):
    columns, error, message = HOSTILE[case]
    with pytest.raises(error, match=message):
        scorer(ray_batch(columns, batch_format))


@pytest.mark.parametrize("batch_format", FORMATS)
def test_ray_batches_score_as_one_call(scorer, batch_format):
    """Good batches of each format: the scores of one call, the batch's type and columns kept;
    an empty batch gets the score column too."""
    columns = {
        "id": [3, 4, 5],
        "hyp": ["a cat sat", "12345", "None"],
        "ref": [["the cat sat", "a cat"], ["12345"], ["None"]],
    }
    out = scorer(ray_batch(columns, batch_format))
    assert type(out) is type(ray_batch(columns, batch_format))
    direct = twmd(columns["hyp"], columns["ref"], centering="none")["twmd"]
    values = (lambda key: out[key].to_pylist()) if batch_format == "pyarrow" else (lambda key: list(out[key]))
    np.testing.assert_allclose(values("twmd"), direct, atol=1e-6)
    assert values("id") == [3, 4, 5] and values("hyp") == columns["hyp"]
    empty = scorer(ray_batch({"hyp": pa_empty(), "ref": pa_empty()}, batch_format))
    assert len(empty["twmd"]) == 0 and str(getattr(empty["twmd"], "dtype", None) or empty["twmd"].type) in (
        "float64",
        "double",
    )


def pa_empty():
    import pyarrow as pa

    return pa.array([], type=pa.string())


def test_score_dataset_asks_for_an_actor_pool_in_the_current_api():
    """Ray 2.51 deprecated ``concurrency=`` for ``compute=ActorPoolStrategy(...)``."""
    ray = pytest.importorskip("ray")
    from moverkit.integrations.ray import RayScorer, score_dataset

    class Recorder:
        def map_batches(self, fn, **kwargs):
            self.fn, self.kwargs = fn, kwargs
            return self

    for concurrency, sizes in ((3, (3, 3)), ((1, 4), (1, 4))):
        recorded = score_dataset(Recorder(), "twmd", "hyp", "ref", concurrency=concurrency, centering="none")
        assert recorded.fn is RayScorer and recorded.kwargs["fn_constructor_args"] == ("twmd", "hyp", "ref")
        if tuple(int(part) for part in ray.__version__.split(".")[:2]) >= (2, 51):
            assert "concurrency" not in recorded.kwargs
            pool = recorded.kwargs["compute"]
            assert isinstance(pool, ray.data.ActorPoolStrategy) and (pool.min_size, pool.max_size) == sizes
        else:
            assert recorded.kwargs["concurrency"] == concurrency


@pytest.mark.parametrize("concurrency", [0, -2, 1.5, True, (0, 4), (1, 2, 3, 4), "2"])
def test_an_actor_pool_size_that_is_no_positive_int_is_named(concurrency):
    pytest.importorskip("ray")
    from moverkit.integrations.ray import actor_pool

    with pytest.raises(ValueError, match="concurrency must be a number of actors >= 1"):
        actor_pool(concurrency)
