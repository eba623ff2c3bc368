"""moverkit.map_scores under datasets.map: num_proc after torch ran in the parent, the cache, rows, ranks."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import moverkit

datasets = pytest.importorskip("datasets")

# Runs in a fresh interpreter, so a hang (workers waiting on a thread pool that did not survive
# fork) is a subprocess timeout, not a stuck test session.
SCENARIO = textwrap.dedent(
    """
    import json, sys
    import datasets, moverkit
    from moverkit.bench._data import read_judgments
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


@pytest.mark.parametrize("before", ["fit_centering", "compute"])
def test_num_proc_after_torch_ran_in_the_parent(tmp_path, before):
    out = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(Path(__file__).parent / "data" / "wmt17_sample.tsv"), str(tmp_path / "ds"), before],
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "HF_DATASETS_CACHE": str(tmp_path / "cache")},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(result["mapped"], result["direct"], atol=1e-6)
    assert result["hashcode"] == result["direct_hashcode"]
    # The second identical map is a cache hit: same fingerprint, the same cache files read back.
    assert result["fingerprints"][0] == result["fingerprints"][1]
    assert result["files"][0] == result["files"][1] and len(result["files"][0]) == 2


def test_fingerprint_is_stable_and_the_function_pickles():
    from datasets.fingerprint import Hasher

    stats = moverkit.fit_centering(["a cat sat on the mat", "the dog barked"])
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
    import torch

    from moverkit._core.mapping import rank_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert rank_device(3) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [rank_device(k) for k in range(3)] == ["cuda:0", "cuda:1", "cuda:0"]


def test_unknown_metric():
    with pytest.raises(ValueError, match="map_scores takes a moverkit metric"):
        moverkit.map_scores("bleu")
