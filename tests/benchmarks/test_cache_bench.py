"""``moverkit bench cache``: an evaluation loop with the cache of token clouds on."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "wmt17_sample.tsv"


@pytest.mark.slow  # runs a benchmark end to end
def test_bench_cache_loop_scores_as_uncached(tmp_path):
    from benchmarks.cache import loop_inputs, run
    from moverkit.judgments import read_judgments

    data = read_judgments(SAMPLE)
    references, predictions = loop_inputs(data, 12, 3)
    seen = set(references)
    for batch in predictions:  # every evaluation's predictions are new
        assert len(batch) == 12 and not seen & set(batch)
        seen |= set(batch)
    report = run(data, "centered_bertscore", n=12, evaluations=3, rounds=2)
    assert len(report["seconds"]) == 3 and report["speedups"][0] == 1.0 and report["rounds"] == 2
    assert report["max_abs_delta_vs_uncached"] < 1e-5  # float32 batching noise at most
    from moverkit._core.encoding.cache import cache_info

    assert cache_info()["max_bytes"] == 0  # the bench leaves the cache off
