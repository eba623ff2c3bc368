"""The reference points of every metric's spec (what unrelated texts and a machine translation
score) are recomputed from the WMT17 file they were measured on.

Each runs with moverkit's cache of token clouds on, as a user scoring one corpus with several
metrics would: each distinct text is encoded once per encoder and layer, instead of once per call
and metric. The three metrics that share the token encoder and layer run in one test, one after
another, so that twmd and lazy_emd find centered_bertscore's clouds (pytest-xdist's ``loadgroup``
does not keep a group on one worker under pytest 9: measured, its tests went to both); moverscore
(its own cut of the model) and sbertscore (sentence vectors) share nothing and run on their own.
The cache can move a score's last digits (the texts a vector was batched with), far inside the
points' tolerance of 5e-4; an identical pair is the same vectors on both sides either way."""

from __future__ import annotations

import statistics

import pytest

from moverkit import functional
from moverkit._core.encoding.cache import cache_enabled
from moverkit.baselines import random_pairs
from moverkit.facts.specs import SPECS

SHARED_CLOUDS = ["centered_bertscore", "twmd", "lazy_emd"]
"""The metrics that share the token encoder and layer, in the order they run."""
CACHE_BYTES = 4 * 2**30


@pytest.mark.slow
def test_reference_points_of_the_metrics_that_share_token_clouds(wmt17_full, subtests):
    with cache_enabled(CACHE_BYTES):
        for name in SHARED_CLOUDS:
            with subtests.test(metric=name):
                _check_reference_points(name, wmt17_full)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(SPECS) - set(SHARED_CLOUDS)))
def test_reference_points_are_what_the_metric_scores(name, wmt17_full):
    with cache_enabled(CACHE_BYTES):
        _check_reference_points(name, wmt17_full)


def _check_reference_points(name, wmt17_full):
    spec = SPECS[name]
    score = getattr(functional, name)
    predictions, references = random_pairs(list(wmt17_full.references) + list(wmt17_full.predictions), 1000, 0)
    unrelated = statistics.fmean(score(predictions, references)[spec.main])
    translation = statistics.fmean(score(list(wmt17_full.predictions), list(wmt17_full.references))[spec.main])
    assert unrelated == pytest.approx(spec.unrelated, abs=5e-4)
    assert translation == pytest.approx(spec.translation, abs=5e-4)
    # Identical texts: the distinct references scored against themselves; exactly the best value
    # where the definition gives it (every metric but lazy_emd), else its mean.
    distinct = sorted(set(wmt17_full.references))
    assert len(distinct) == 2191
    if spec.identical == spec.best:  # exact: 300 of them suffice
        assert score(distinct[:300], distinct[:300])[spec.main] == [spec.best] * 300
    else:
        assert statistics.fmean(score(distinct, distinct)[spec.main]) == pytest.approx(spec.identical, abs=5e-7)
    # The points are ordered as the metric's direction says.
    assert spec.better(spec.identical, spec.translation) and spec.better(spec.translation, spec.unrelated)
