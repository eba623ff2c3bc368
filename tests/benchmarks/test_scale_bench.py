"""The scale benchmark (``moverkit bench scale``): its texts, and its run in a fresh process. The
streaming it measures is tested in tests/core/test_streaming.py."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_bench_scale_texts_are_distinct():
    from benchmarks._shared import distinct_texts

    segments = ["a b c d", "e f g h", "i j k l", "m n"]
    texts = distinct_texts(segments, 12)
    assert len(set(texts)) == 12
    heads = {" ".join(s.split()[: len(s.split()) // 2]) for s in segments}
    assert all(any(t.startswith(h + " ") for h in heads) for t in texts)


@pytest.mark.integration
def test_bench_scale_measures_in_a_fresh_process(wmt17_full):
    from benchmarks.scale import format_table, run

    rows = run(
        Path(__file__).resolve().parents[2] / "data" / "wmt17_seg_da_to_en.tsv",
        sizes=(20,),
        runs=[("twmd", "corpus")],
        memory_budget="1MB",
        log=lambda line: None,
    )
    assert rows[0]["pairs"] == 20 and rows[0]["wall_s"] > 0 and rows[0]["peak_rss_mb"] > 100
    assert "| twmd | corpus | 20 |" in format_table(rows)
