"""The reference points of every metric's spec (what unrelated texts and a machine translation
score) are recomputed from the WMT17 file they were measured on, and the shipped centering
statistic from its references.

Each runs with moverkit's cache of token clouds on, as a user scoring one corpus with several
metrics would: each distinct text is encoded once per encoder and layer (each sentence once per
sentence model), instead of once per call and metric. The four metrics that share the token
encoder and layer (moverscore's last layer is the embedded model's default, layer 6: one encoder)
run in one test, one after another, so that the fit of the shipped statistic, twmd, lazy_emd and
moverscore find centered_bertscore's clouds (pytest-xdist's ``loadgroup`` does not keep a group on
one worker under pytest 9: measured, its tests went to both); sbertscore (sentence vectors)
shares nothing and runs on its own.
The cache can move a score's last digits (the texts a vector was batched with), far inside the
points' tolerance of 5e-4; an identical pair is the same vectors on both sides either way."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from moverkit import fit_centering, functional
from moverkit._core import DEFAULT_MODEL, MODEL_LAYERS, CenteringStats
from moverkit._core.centering.fit import default_corpus
from moverkit._core.centering.stats_file import shipped_stats_path
from moverkit._core.encoding.cache import cache_enabled
from moverkit.baselines import random_pairs
from moverkit.facts.specs import SPECS

SHARED_CLOUDS = ["centered_bertscore", "twmd", "lazy_emd", "moverscore"]
"""The metrics that share the token encoder and layer, in the order they run."""
CACHE_BYTES = 4 * 2**30


@pytest.mark.slow
def test_reference_points_of_the_metrics_that_share_token_clouds(wmt17_full, subtests):
    with cache_enabled(CACHE_BYTES):
        for name in SHARED_CLOUDS:
            with subtests.test(metric=name):
                _check_reference_points(name, wmt17_full)
            if name == "centered_bertscore":  # its references' clouds are in the cache from here on
                with subtests.test("the shipped corpus is the one the shipped statistic was fitted on"):
                    _check_shipped_statistic(wmt17_full)


def _check_shipped_statistic(wmt17_full):
    """Fitted on the shipped corpus (the distinct WMT17 references), the embedded model's mean is
    its shipped statistic: an independent check that the fallback of other encoders (which fits
    on that corpus) uses the same corpus."""
    corpus = default_corpus()
    assert len(corpus) == len(set(corpus)) == 2191 and set(corpus) == set(wmt17_full.references)
    shipped = CenteringStats.load(shipped_stats_path(DEFAULT_MODEL, MODEL_LAYERS[DEFAULT_MODEL]))
    fitted = fit_centering(corpus)
    assert (fitted.n_texts, fitted.n_tokens) == (shipped.n_texts, shipped.n_tokens)
    np.testing.assert_allclose(fitted.mean, shipped.mean, atol=1e-6)


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
