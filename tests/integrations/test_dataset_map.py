"""moverkit.map_scores under datasets.map: num_proc after torch ran in the parent, the cache, rows, ranks."""

from __future__ import annotations

import json
import pickle
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from warm_python import offline_environment

import moverkit

datasets = pytest.importorskip("datasets")

# Runs in a fresh interpreter (forked from a warm one: tests/warm_python.py), so that torch has run
# in no process before this one, and a hang (workers waiting on a thread pool that did not survive
# fork) is a timeout, not a stuck test session.
SCENARIO = textwrap.dedent(
    """
    import json, sys
    import datasets, moverkit
    from moverkit.judgments import read_judgments
    from moverkit.functional import centered_bertscore

    sample, folder, before = sys.argv[1:4]
    data = read_judgments(sample, limit=24)
    metric = moverkit.load("centered_bertscore")
    stats = moverkit.fit_centering(data.references)  # torch has run in the parent from here on
    if before == "compute":
        metric.compute(predictions=data.predictions[:3], references=data.references[:3])
    datasets.Dataset.from_dict({"pred": data.predictions, "ref": data.references}).save_to_disk(folder)
    ds = datasets.load_from_disk(folder)
    kwargs = {"centering": "corpus", "centering_stats": stats}
    score = moverkit.map_scores(metric, "pred", "ref", **kwargs)
    first = ds.map(score, batched=True, batch_size=5, num_proc=2)
    again = ds.map(moverkit.map_scores(metric, "pred", "ref", **kwargs), batched=True, batch_size=5, num_proc=2)
    direct = centered_bertscore(data.predictions, data.references, **kwargs)
    print(json.dumps({
        "mapped": list(first["f1"]), "direct": direct["f1"],
        "hashcode": score.hashcode, "direct_hashcode": direct["hashcode"],
        "fingerprints": [first._fingerprint, again._fingerprint],
        "files": [[f["filename"] for f in d.cache_files] for d in (first, again)],
    }))
    """
)


@pytest.mark.integration
@pytest.mark.parametrize("before", ["fit_centering", "compute"])
def test_num_proc_after_torch_ran_in_the_parent(tmp_path, before, warm_python):
    sample = str(Path(__file__).parents[1] / "data" / "wmt17_sample.tsv")
    args = [sys.executable, "-c", SCENARIO, sample, str(tmp_path / "ds"), before]
    out = warm_python.run(args, tmp_path, offline_environment(), timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(result["mapped"], result["direct"], atol=1e-6)
    assert result["hashcode"] == result["direct_hashcode"]
    # The second identical map is a cache hit: same fingerprint, the same cache files read back.
    assert result["fingerprints"][0] == result["fingerprints"][1]
    assert result["files"][0] == result["files"][1] and len(result["files"][0]) == 2


def test_fingerprint_is_stable_and_the_function_pickles():
    from datasets.fingerprint import Hasher

    stats = moverkit.fit_centering(["a cat sat on the mat", "the dog barked"] + [f"text number {i}" for i in range(8)])
    metric = moverkit.load("centered_bertscore")
    metric.compute(predictions=["a"], references=["b"])  # the evaluate object now holds unpicklable state
    one = moverkit.map_scores(metric, "p", "r", centering="corpus", centering_stats=stats)
    two = moverkit.map_scores("centered_bertscore", "p", "r", centering="corpus", centering_stats=stats)
    before = Hasher.hash(one)
    assert one.hashcode.startswith("centered_bertscore:")  # read in the parent: must not move the fingerprint
    assert Hasher.hash(one) == before == Hasher.hash(two)
    assert Hasher.hash(moverkit.map_scores(metric, "p", "r", centering="none")) != before
    copy = pickle.loads(pickle.dumps(one))
    assert (
        copy({"p": ["a cat sat"], "r": ["the cat sat"]})["f1"] == one({"p": ["a cat sat"], "r": ["the cat sat"]})["f1"]
    )


@pytest.mark.slow
def test_rows_and_ranks(wmt_pairs):
    """batched=False gives one value per row; with_rank=True runs (on the CPU here) and agrees."""
    predictions, references = wmt_pairs
    ds = datasets.Dataset.from_dict({"p": predictions[:6], "r": references[:6]})
    score = moverkit.map_scores("twmd", "p", "r", centering="none")
    rows = ds.map(score, batched=False)
    ranked = ds.map(score, batched=True, batch_size=4, with_rank=True)
    direct = moverkit.functional.twmd(predictions[:6], references[:6], centering="none")
    np.testing.assert_allclose(list(rows["twmd"]), direct["twmd"], atol=1e-6)
    np.testing.assert_allclose(list(ranked["twmd"]), direct["twmd"], atol=1e-6)
    assert score.hashcode == direct["hashcode"]


def test_rank_device(monkeypatch):
    """Worker ``k`` of ``map(with_rank=True)`` runs on GPU ``k mod n_gpus``, else on the CPU (in
    batches of 16 texts), unless ``device`` was given."""
    import torch

    from moverkit.integrations.adapter import call_arguments

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert call_arguments({}, 3) == {"device": "cpu", "batch_size": 16}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [call_arguments({}, k)["device"] for k in range(3)] == ["cuda:0", "cuda:1", "cuda:0"]
    assert call_arguments({"device": "cpu", "batch_size": 8}, 1) == {"device": "cpu", "batch_size": 8}


def test_unknown_metric():
    with pytest.raises(ValueError, match="map_scores takes a moverkit metric"):
        moverkit.map_scores("bleu")


@pytest.mark.parametrize("batched", [True, False])
def test_a_missing_column_is_named_with_the_dataset_columns(batched):
    ds = datasets.Dataset.from_dict({"hyp": ["a cat sat"], "ref": ["the cat sat"]})
    score = moverkit.map_scores("twmd", "prediction", "ref", centering="none")
    with pytest.raises(KeyError, match=r"no column 'prediction' for the predictions; its columns are 'hyp', 'ref'"):
        ds.map(score, batched=batched)


# Each bad row sits in a column of its own Arrow type: a string column with a null, a number
# column, a float column with a NaN; none of them may be scored as the text str() makes of it.
BAD_ROWS = {
    "None prediction": ({"p": ["a cat sat", None], "r": ["the cat sat", "a dog"]}, "p", 1, ValueError, "is None"),
    "None reference": ({"p": ["a cat sat", "None"], "r": ["the cat sat", None]}, "r", 1, ValueError, "is None"),
    "number prediction": ({"p": [12345, 7], "r": ["12345", "7"]}, "p", 0, TypeError, "got int: 12345"),
    "number reference": ({"p": ["12345", "a cat"], "r": [12345, 7]}, "r", 0, TypeError, "got int: 12345"),
    "NaN reference": ({"p": ["a cat", "nan"], "r": [1.5, float("nan")]}, "r", 0, TypeError, "got float: 1.5"),
    "None in a list of references": (
        {"p": ["a cat", "a dog"], "r": [["the cat"], ["a dog", None]]},
        "r",
        1,
        ValueError,
        "is None",
    ),
    "empty list of references": ({"p": ["a cat", "a dog"], "r": [["the cat"], []]}, "r", 1, ValueError, "empty list"),
}


@pytest.mark.parametrize("case", list(BAD_ROWS))
@pytest.mark.parametrize("batched", [True, False])
def test_a_bad_row_is_refused_with_its_column_and_row(case, batched):
    columns, column, row, error, what = BAD_ROWS[case]
    ds = datasets.Dataset.from_dict(columns)
    score = moverkit.map_scores("twmd", "p", "r", centering="none")
    where = rf"column '{column}' at row {row} of this batch" if batched else rf"column '{column}' of this row"
    with pytest.raises(error, match=rf"{where}.*{what}"):
        ds.map(score, batched=batched)


def test_missing_values_as_tables_hold_them_are_refused():
    """NaN (a float column, pandas' default string dtype) and pandas' NA, called directly."""
    import pandas as pd

    score = moverkit.map_scores("twmd", "p", "r", centering="none")
    for missing, name in ((float("nan"), "NaN"), (np.float32("nan"), "NaN"), (pd.NA, "NA")):
        with pytest.raises(ValueError, match=rf"column 'r' at row 1 of this batch is {name} \(a missing value\)"):
            score({"p": ["a cat", "a dog"], "r": ["the cat", missing]})
        with pytest.raises(ValueError, match=rf"column 'p' of this row is {name}"):
            score({"p": missing, "r": "the cat"})
    with pytest.raises(ValueError, match=r"column 'r' at row 1 of this batch is NaN"):
        score({"p": pd.Series(["a cat", "a dog"]), "r": pd.Series(["the cat", None])})  # pandas' str dtype: NaN
    with pytest.raises(TypeError, match=r"column 'p' at row 0 of this batch must be a string, got bytes"):
        score({"p": [b"a cat"], "r": ["the cat"]})


def test_an_empty_dataset_gets_the_same_score_columns():
    features = datasets.Features({"p": datasets.Value("string"), "r": datasets.Value("string")})
    empty = datasets.Dataset.from_dict({"p": [], "r": []}, features=features)
    two = datasets.Dataset.from_dict({"p": ["a cat sat", "a dog"], "r": ["the cat sat", "the dog"]}, features=features)
    score = moverkit.map_scores("twmd", "p", "r", centering="none")
    mapped = score.map(two, batched=True)
    assert mapped.column_names == ["p", "r", "twmd"]
    for batched in (True, False):
        scored = score.map(empty, batched=batched)
        assert scored.column_names == mapped.column_names and len(scored) == 0
        assert scored.features == mapped.features
    assert score.map(empty, remove_columns=["p"]).column_names == two.map(score, remove_columns=["p"]).column_names
    # An empty batch (called directly) gives the same columns too, empty.
    assert score({"p": [], "r": []}) == {"twmd": []}
    with pytest.raises(KeyError, match="no column 'p'"):
        score.map(empty.rename_column("p", "hyp"))
