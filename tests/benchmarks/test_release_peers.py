"""The authors' releases as speed peers (``moverkit bench speed``): loaded at run time from a snapshot
the user points to. Without it the loaders refuse with the environment variable's name; with it
(``LAZY_EMD_PATH``, ``MOVERSCORE_V2_PATH`` set) the release's own scores are pinned to this
package's on a few WMT17 pairs."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks import lazy_emd as lazy_emd_bench
from benchmarks import moverscore as moverscore_bench
from benchmarks.speed import PeerUnavailable

PAIRS = 6  # the second WMT17 pair has plan mass on costs >= 0.999, where the Lazy-EMD release masks the plan


def _wmt17_pairs(n: int) -> tuple[list[str], list[str]]:
    path = Path(__file__).parents[1] / "data" / "wmt17_sample.tsv"
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:n]
    return [row["hypothesis"] for row in rows], [row["reference"] for row in rows]


@pytest.mark.parametrize(
    "bench, env",
    [(lazy_emd_bench, "LAZY_EMD_PATH"), (moverscore_bench, "MOVERSCORE_V2_PATH")],
)
def test_loader_without_snapshot_names_the_variable(bench, env, monkeypatch, tmp_path):
    assert env == bench.RELEASE_ENV
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(PeerUnavailable, match=env):
        bench.load_release()
    monkeypatch.setenv(env, str(tmp_path / "absent"))
    with pytest.raises(PeerUnavailable, match=env):
        bench.load_release()


def test_loaders_refuse_other_code(tmp_path):
    """A file the text shims do not fit is not run."""
    (tmp_path / "score.py").write_text("class Scorer:\n    pass\n")
    (tmp_path / "unbalanced.py").write_text("")
    with pytest.raises(PeerUnavailable, match="not the expected score.py"):
        lazy_emd_bench.load_release(str(tmp_path))
    (tmp_path / "moverscore_v2.py").write_text("device = 'cpu'\n")
    with pytest.raises(PeerUnavailable, match="not the expected moverscore_v2.py"):
        moverscore_bench.load_release(str(tmp_path / "moverscore_v2.py"))


def test_speed_suites_skip_the_absent_release(monkeypatch):
    """The release's contender is skipped with the variable's name (its factory fails before any work)."""
    monkeypatch.delenv("LAZY_EMD_PATH", raising=False)
    monkeypatch.delenv("MOVERSCORE_V2_PATH", raising=False)
    for factory, env in (
        (lazy_emd_bench.release_itself, "LAZY_EMD_PATH"),
        (moverscore_bench.release_itself, "MOVERSCORE_V2_PATH"),
    ):
        with pytest.raises(PeerUnavailable, match=env):
            factory(["a cat"], ["a dog"])


@pytest.mark.skipif(
    not os.environ.get("LAZY_EMD_PATH"), reason="LAZY_EMD_PATH (the release's Lazy-EMD folder) is not set"
)
def test_lazy_emd_release_parity():
    """The release (per pair: bert_score's sent_encode, one forward pass per text, its own NumPy
    unbalanced Sinkhorn) against ``lazy_emd(centering="none")`` on the embedded model. Same tokens,
    uniform masses without [CLS]/[SEP], cost 1 - cos, epsilon 0.009, the "en" penalties; the one
    difference is the release's: its solver returns the plan times (C < 0.999), so that transport
    between near-orthogonal tokens is left out of <C, P*>. With that mask applied to this package's
    plan, the two agree."""
    from moverkit.functional.lazy_emd import lazy_emd

    predictions, references = _wmt17_pairs(PAIRS)
    release = np.array(lazy_emd_bench.release_scores(lazy_emd_bench.load_release(), predictions, references))
    ours = lazy_emd(predictions, references, centering="none", return_alignment=True)
    masked = []
    for alignment in ours["alignment"]:
        cost, plan = np.array(alignment["cost"]), np.array(alignment["plan"])
        masked.append(float(np.sum(plan * cost * (cost < 0.999))))
    assert np.max(np.abs(release - np.array(masked))) <= 1e-5
    assert np.max(np.array(ours["lazy_emd"]) - np.array(masked)) > 1e-3  # these pairs exercise the mask


@pytest.mark.skipif(
    not os.environ.get("MOVERSCORE_V2_PATH"), reason="MOVERSCORE_V2_PATH (the release's moverscore_v2.py) is not set"
)
def test_moverscore_release_parity():
    """The release's ``word_mover_score`` as the bench runs it (its own IDF dicts, ``n_gram=1``,
    subwords and punctuation removed) against ``moverscore(version="v2")`` on the embedded model."""
    pytest.importorskip("pyemd")
    from moverkit.functional.moverscore import moverscore

    predictions, references = _wmt17_pairs(PAIRS)
    release = moverscore_bench.release_scores(moverscore_bench.load_release(), predictions, references)
    ours = moverscore(predictions, references, version="v2")["moverscore"]
    assert np.max(np.abs(np.array(release) - np.array(ours))) <= 1e-5
