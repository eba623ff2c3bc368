"""``moverkit bench combination``: the segment features it fits on."""

from __future__ import annotations

import numpy as np

from moverkit import combination as combo

PAIRS = [
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("a cat was sitting on the mat", "the cat sat on the mat"),
    ("stocks fell sharply today", "shares dropped steeply on tuesday"),
]


def test_bench_segment_features_are_oriented_once(tmp_path):
    """lazy_emd is a distance: its oriented scores are negated once (they were negated twice, back
    to distances, so the combinations' NNLS gave it weight 0)."""
    from benchmarks import combination as bench
    from moverkit.judgments import Judgments

    data = Judgments(["cs-en"] * 3, [p for p, _ in PAIRS[:3]], [r for _, r in PAIRS[:3]], [1.0, 0.0, -1.0])
    features = bench.segment_features(data, ["lazy_emd"], tmp_path / "cache.json")
    oriented = combo.component_scores(data.predictions, data.references, ["lazy_emd"])[0]["lazy_emd"]
    np.testing.assert_array_equal(features["lazy_emd"], oriented)
    assert (features["lazy_emd"] <= 0).all()
