"""moverkit bench encoders (issue 51): the encoder table, run on the embedded model and a handful of
pairs; what ran is read from the hashcode; a metric whose defaults raise gets a row that says so."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import encoders
from moverkit.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "data" / "wmt17_seg_da_to_en.tsv"
UNSEEN = ROOT / "data" / "wmt17_seg_da_unseen.tsv"
METRICS = ("centered_bertscore",)
"""One metric: a scoring process and two timed ones (native, AVX2) besides the import floor's."""


def test_a_subprocess_peak_is_its_own_not_its_parents():
    """``ru_maxrss`` on Linux carries a large parent's size into every child it starts (the CI run
    of stop 50 read 2,087,325,696 bytes both for an import and for a whole metric call)."""
    from benchmarks._shared import child_environment, peak_rss_bytes

    ballast = b"\x01" * (600 * 2**20)  # pages written, so resident
    parent = peak_rss_bytes()
    code = "from benchmarks._shared import peak_rss_bytes; print(peak_rss_bytes())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=child_environment()
    )
    child = int(done.stdout)
    assert len(ballast) and parent > 600 * 2**20 and 0 < child < 300 * 2**20


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("|")]


@pytest.mark.integration  # subprocesses: one per metric, one per throughput column (about 30-60 s)
def test_the_table_has_a_row_per_metric_and_encoder_with_finite_figures(tmp_path):
    out, record = tmp_path / "encoders.md", tmp_path / "encoders.json"
    argv = ["bench", "encoders", "--data", str(SHARED), "--unseen", str(UNSEEN), "--metrics", *METRICS]
    argv += ["--per-pair", "4", "--speed-pairs", "10", "--rounds", "1", "--jobs", "2"]
    argv += ["--out", str(out), "--json", str(record)]
    assert main(argv) == 0
    report = json.loads(record.read_text(encoding="utf-8"))
    assert report["groups"] == {"shared": ["cs-en", "de-en", "ru-en", "tr-en", "zh-en"], "unseen": ["fi-en", "lv-en"]}
    assert report["sizes"] == {"shared": 20, "unseen": 8} and report["speed_pairs"] == 10
    cells = {c["metric"]: c for c in report["cells"]}
    assert list(cells) == list(METRICS) and all(c["model"] == encoders.EMBEDDED for c in cells.values())
    for cell in cells.values():
        assert "error" not in cell and cell["fallback"] is None
        values = [v[k] for s in cell["correlations"].values() for v in s.values() for k in ("pearson", "kendall")]
        assert len(values) == 2 * (6 + 3) and all(math.isfinite(v) and -1 <= v <= 1 for v in values)
        assert set(cell["pairs_per_s"]) == {"cpu:float32", "avx2:float32"}
        assert all(math.isfinite(v) and v > 0 for v in cell["pairs_per_s"].values())
        assert cell["peak_rss"] > report["import_peak_rss"] > 0
        assert [encoders.ran(h) for h in cell["hashcodes"]] == cell["ran"]
    # What ran, from the hashcodes: the embedded model's last (6th) layer, its shipped statistic.
    assert {r["layer"] for r in cells["centered_bertscore"]["ran"]} == {6}
    assert {r["centering"].partition(":")[0] for r in cells["centered_bertscore"]["ran"]} == {"corpus"}
    assert "caps: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2" in report["isa"]["avx2"]
    assert "caps: none" in report["isa"]["cpu"]

    correlation, cost = [t for t in out.read_text(encoding="utf-8").split("\n\n") if t.startswith("|")]
    header, _, *rows = _rows(correlation)
    assert header == ["metric", "encoder", "layer", "centering"] + report["groups"]["shared"] + ["avg"] + [
        "fi-en",
        "lv-en",
        "avg unseen",
    ]
    assert [r[:3] for r in rows] == [["centered_bertscore", "all-MiniLM-L6-v2 (embedded)", "6 of 6"]]
    assert all(len(r) == len(header) and all(math.isfinite(float(v)) for v in r[4:]) for r in rows)
    header, _, *rows = _rows(cost)
    assert len(header) == 8 and [r[0] for r in rows] == list(METRICS)
    for row in rows:
        assert all(float(v.replace(",", "")) > 0 for v in row[2:6])
        gpu = row[6:] if report["cuda"] else [encoders.NO_DEVICE] * 2
        assert row[6:] == gpu


def test_the_hashcode_names_the_layer_and_centering_whatever_the_model_is_called():
    code = "twmd:all_mpnet_base_v2@3f2a_L10_no-idf_center=corpus:0a1b2c_max_length=384_version=0.1(x)"
    assert encoders.ran(code) == {
        "model": "all_mpnet_base_v2@3f2a",
        "layer": 10,
        "idf": "no-idf",
        "centering": "corpus:0a1b2c",
    }
    sentence = encoders.ran("sbertscore:m_L-1_no-idf_center=none_lang=en")
    assert sentence["layer"] == -1
    assert encoders.layer_cell({"ran": [sentence], "facts": {"layers": 6}}) == "sentence vector"
    assert encoders.layer_cell({"ran": [encoders.ran(code)], "facts": {"layers": 12}}) == "10 of 12"
    with pytest.raises(ValueError, match="not a moverkit hashcode"):
        encoders.ran("twmd 0.3")


def test_a_default_that_raises_is_a_row_that_says_so_or_a_marked_fallback(monkeypatch):
    """A centering error at the defaults: the job answers the error; with a fallback it runs the
    rest with that centering and records why."""
    calls = []

    def score(predictions, references, *, model_type=None, centering="corpus"):
        calls.append(centering)
        if centering == "corpus":
            raise ValueError("centering='corpus' needs statistics for this model")
        return {"f1": [0.5] * len(predictions), "hashcode": "x:m_L3_no-idf_center=none_v"}

    monkeypatch.setattr(encoders, "_score_function", lambda metric: score)
    sets = {"shared": {"cs-en": {"predictions": ["a"] * 3, "references": ["b"] * 3}}}
    failed = encoders._score_metric("x", "f1", "m", sets, None)
    assert failed == {"error": "ValueError: centering='corpus' needs statistics for this model"}
    kept = encoders._score_metric("x", "f1", "m", sets, "none")
    assert kept["kwargs"] == {"centering": "none"} and "needs statistics" in kept["fallback"]
    assert kept["scores"]["shared"]["cs-en"] == [0.5] * 3 and calls == ["corpus", "corpus", "none"]

    report = {
        "groups": {"shared": ["cs-en"]},
        "sizes": {"shared": 3},
        "cells": [{"model": "m", "metric": "x", "error": failed["error"], "pairs_per_s": {}}],
        "speed_pairs": 3,
        "rounds": 1,
        "cuda": None,
        "cpu": "a CPU",
        "isa": {},
        "versions": {"torch": "t", "transformers": "tf"},
        "import_peak_rss": 2**28,
        "models": ["m"],
        "fallback": None,
        "facts": {},
        "warnings": {"m": ["MoverkitWarning: a warning\nits second line"]},
    }
    text = encoders.format_report(report)
    assert "| x | m | fails: ValueError: centering='corpus' needs statistics for this model |" in text
    assert "| x | m | – | – | – | – | no device this session | no device this session |" in text
    assert text.endswith("\n  - warned: MoverkitWarning: a warning")
