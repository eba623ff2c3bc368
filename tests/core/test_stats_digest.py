"""A fitted statistic's digest names its configuration (issue 60): the same model, layer and corpus
give the same digest on every CPU and at every batch size, although the fitted means differ in
their last bits; anything that changes the mean changes it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from moverkit import fit_centering
from moverkit._core.centering.stats_file import CenteringStats

DIGEST = """
import sys
from moverkit import fit_centering
texts = sys.stdin.read().split("\\n")
stats = fit_centering(texts, batch_size=int(sys.argv[1]))
print(stats.digest, stats.mean.tobytes().hex())
"""


@pytest.fixture(scope="module")
def texts(wmt_pairs):
    return list(dict.fromkeys(wmt_pairs[1]))[:60]


@pytest.mark.slow
def test_the_digest_does_not_follow_the_bits(texts):
    small, large = fit_centering(texts, batch_size=16), fit_centering(texts, batch_size=64)
    assert np.allclose(small.mean, large.mean, atol=1e-6)
    assert small.digest == large.digest and len(small.source) == 40
    assert fit_centering(list(reversed(texts)), batch_size=5).digest == small.digest  # a corpus is a multiset
    changed = [
        fit_centering(texts[:-1]),
        fit_centering([*texts, texts[0]]),  # a text counted twice weighs twice
        fit_centering(texts, num_layers=3),
        fit_centering(texts, max_length=64),
        fit_centering(texts, dtype="bfloat16"),
        fit_centering(texts, level="sentence"),
    ]
    assert len({small.digest, *(stats.digest for stats in changed)}) == 1 + len(changed)


def test_a_saved_statistic_keeps_its_digest_and_a_given_mean_is_hashed_by_its_bits(texts, tmp_path):
    fitted = fit_centering(texts)
    fitted.save(tmp_path / "stats.npz")
    loaded = CenteringStats.load(tmp_path / "stats.npz")
    assert loaded.digest == fitted.digest and loaded.source == fitted.source
    given = CenteringStats(fitted.mean, fitted.model, fitted.layer, fitted.n_texts, fitted.n_tokens)
    nudged = CenteringStats(fitted.mean + 1e-12, fitted.model, fitted.layer, fitted.n_texts, fitted.n_tokens)
    assert given.source == "" and given.digest != fitted.digest and nudged.digest != given.digest
    with pytest.raises(ValueError, match="source must be"):
        CenteringStats(fitted.mean, fitted.model, fitted.layer, 1, 1, source="not a digest")


@pytest.mark.slow
def test_the_digest_is_the_same_under_avx2_kernels(texts):
    native = fit_centering(texts, batch_size=16)
    capped = subprocess.run(
        [sys.executable, "-c", DIGEST, "64"],
        input="\n".join(texts),
        env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
        capture_output=True,
        text=True,
        check=True,
    )
    digest, mean = capped.stdout.split()
    assert np.allclose(np.frombuffer(bytes.fromhex(mean)), native.mean, atol=1e-6)
    assert digest == native.digest
