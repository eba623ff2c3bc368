"""The system-level benchmark's reading and arithmetic, on a small WMT17-shaped folder made here,
and the extract in data/ (checked against the full WMT17 folder when ``MOVERKIT_WMT17`` names it)."""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import pytest

from benchmarks import system_level as bench
from benchmarks.system_level import (
    centering_effect,
    format_centering_effect,
    format_table,
    per_system_batch,
    system_level,
)
from moverkit.judgments import EXTRACT, EXTRACT_HUMAN, TestSet, read_extract, read_wmt17
from moverkit.judgments.correlation import pairwise

EXTRACTION = Path(__file__).resolve().parents[2] / "data" / "extract_wmt17_system_level.py"


def extraction_script():
    """data/extract_wmt17_system_level.py, imported by path (it is a script, not a module of moverkit)."""
    loaded = importlib.util.spec_from_file_location("extract_wmt17_system_level", EXTRACTION)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


@pytest.fixture
def wmt17(tmp_path):
    """Two to-English test sets (one of them an unseen pair) and one en-de row that is skipped."""
    folder = tmp_path / "WMT17"
    (folder / "references").mkdir(parents=True)
    rows = [
        "LP HUMAN SYSTEM",
        "en-de 0.5 sys-x.1",
        "cs-en 0.3 good.1",
        "cs-en -0.2 bad.2",
        "cs-en 0.1 mid.3",
        "fi-en 0.2 good.1",
        "fi-en -0.1 bad.2",
    ]
    (folder / "DA-syslevel.csv").write_text("\n".join(rows) + "\n")
    refs = ["the cat sat on the mat", "stocks fell sharply today", "he went home early", "rain is expected"]
    outputs = {
        "good.1": refs,
        "mid.3": ["the cat sat on a mat", "stocks fell today", "he went home", "rain expected"],
        "bad.2": ["a dog ran", "markets", "she stayed", "sun"],
    }
    for lp in ("cs-en", "fi-en"):
        (folder / "references" / f"newstest2017-{lp[:2]}en-ref.en").write_text("\n".join(refs) + "\n")
        (folder / "system-outputs" / lp).mkdir(parents=True)
        for system, lines in outputs.items():
            if lp == "fi-en" and system == "mid.3":
                continue
            (folder / "system-outputs" / lp / f"newstest2017.{system}.{lp}").write_text("\n".join(lines) + "\n")
    (folder / "system-outputs" / "fi-en" / "newstest2017.unrated.9.fi-en").write_text("\n".join(refs) + "\n")
    return folder


def test_reads_to_english_sets_with_their_rated_systems(wmt17):
    sets = read_wmt17(wmt17, segments=3)
    assert [t.lp for t in sets] == ["cs-en", "fi-en"]
    assert sorted(sets[0].outputs) == ["bad.2", "good.1", "mid.3"] and sorted(sets[1].outputs) == ["bad.2", "good.1"]
    assert all(len(out) == 3 for t in sets for out in t.outputs.values()) and len(sets[0].references) == 3
    assert sets[0].human == {"good.1": 0.3, "bad.2": -0.2, "mid.3": 0.1}


def test_an_output_of_another_length_is_refused(wmt17):
    (wmt17 / "system-outputs" / "cs-en" / "newstest2017.bad.2.cs-en").write_text("one line\n")
    with pytest.raises(ValueError, match=r"bad\.2\.cs-en has 1 lines, the references 4"):
        read_wmt17(wmt17)


def test_pairwise_accuracy_counts_pairs_ordered_as_humans_in_the_metrics_direction():
    human = {"a": 3.0, "b": 2.0, "c": 1.0}
    assert pairwise({"a": 0.9, "b": 0.5, "c": 0.1}, human, True) == (3, 3)
    assert pairwise({"a": 0.1, "b": 0.5, "c": 0.9}, human, False) == (3, 3)  # a distance
    assert pairwise({"a": 0.5, "b": 0.5, "c": 0.9}, human, True) == (0, 3)  # a tie is not an agreement


def test_the_table_orders_these_systems_as_humans_do(wmt17):
    sets = read_wmt17(wmt17)
    scores = {
        "twmd": {
            t.lp: {s: [1.0 if s == "good.1" else 0.5 if s == "mid.3" else 0.0] * 4 for s in t.outputs} for t in sets
        },
        "chrF": {t.lp: {s: {"good.1": 90.0, "mid.3": 60.0, "bad.2": 10.0}[s] for s in t.outputs} for t in sets},
    }
    pytest.importorskip("sacrebleu")
    table = system_level(scores, sets, resamples=200, seed=0)
    assert table["twmd"]["accuracy"] == (4, 4) and table["twmd"]["unseen_accuracy"] == (1, 1)
    assert table["chrF"]["accuracy"] == (4, 4)
    agree, significant = table["chrF"]["significant"]  # sacrebleu's paired bootstrap, 4 segments
    assert 0 <= agree <= significant <= 4
    assert table["twmd"]["pearson"]["cs-en"] == pytest.approx(0.9934, abs=1e-3)
    assert table["twmd"]["acc_eq"].accuracy == 1.0 and table["twmd"]["acc_eq"].epsilon == 0.0
    assert "| chrF |" in format_table(table) and "acc_eq (eps)" in format_table(table)


# --- BLEU and chrF: sacrebleu's own paired bootstrap ----------------------------------------------


def test_sacrebleu_paired_bootstrap_finds_a_clearly_better_system_and_agrees_with_humans():
    pytest.importorskip("sacrebleu")
    references = [f"the committee approved budget number {i} for the new school year" for i in range(40)]
    outputs = {
        "good.1": references,
        "bad.2": [f"a dog ran {i}" for i in range(40)],
        "same.3": references,
    }
    test_set = TestSet("cs-en", references, outputs, {"good.1": 0.5, "bad.2": -0.5, "same.3": 0.4})
    for anchor in bench.ANCHORS:
        # good vs bad and same vs bad are significant and ordered as humans do; good vs same is a tie
        # (sacrebleu's p-value of identical outputs is 1/201, but a tie orders nothing).
        assert bench.anchor_significant_agreement(test_set, anchor, resamples=200) == (2, 2)
        # Humans reversed: the same two decisions, both against them.
        reversed_human = TestSet("cs-en", references, outputs, {k: -v for k, v in test_set.human.items()})
        assert bench.anchor_significant_agreement(reversed_human, anchor, resamples=200) == (0, 2)


# --- the extract in data/ -----------------------------------------------------------------------


def test_the_extraction_round_trips_through_the_extracts_reader(wmt17, tmp_path):
    script = extraction_script()
    texts, human = script.write(tmp_path / "out", *script.extract(wmt17, segments=3))
    assert read_extract(texts, human) == read_wmt17(wmt17, segments=3)
    assert read_extract(texts, human, segments=2) == read_wmt17(wmt17, segments=2)
    with gzip.open(texts, "rt", encoding="utf-8") as f:
        assert f.readline() == "lp\tsystem\tsid\ttext\n"
    with pytest.raises(ValueError, match="holds the first 3 segments of cs-en, fewer than the 4"):
        read_extract(texts, human, segments=4)
    # The same input gives the same bytes (no time or name in the gzip header).
    again, _ = script.write(tmp_path / "again", *script.extract(wmt17, segments=3))
    assert again.read_bytes() == texts.read_bytes()


def test_the_extraction_refuses_more_segments_than_the_references_hold(wmt17):
    with pytest.raises(ValueError, match="4 references, fewer than --segments 5"):
        extraction_script().extract(wmt17, segments=5)


def test_the_extract_holds_the_65_rated_systems_of_7_pairs():
    sets = read_extract()
    assert [t.lp for t in sets] == ["cs-en", "de-en", "fi-en", "lv-en", "ru-en", "tr-en", "zh-en"]
    assert [len(t.outputs) for t in sets] == [4, 11, 6, 9, 9, 10, 16]
    assert sum(len(t.outputs) for t in sets) == 65
    assert all(len(t.references) == 500 and all(len(o) == 500 for o in t.outputs.values()) for t in sets)
    assert sets[-1].human["SogouKnowing-nmt.5171"] == 0.209  # DA-syslevel.csv: zh-en 0.209 SogouKnowing-nmt.5171
    assert EXTRACT.stat().st_size + EXTRACT_HUMAN.stat().st_size < 2_000_000


def test_without_the_extract_the_error_says_where_it_is(tmp_path):
    """A wheel install has no data/ folder: the reader names the file and the way to get it."""
    with pytest.raises(FileNotFoundError, match="in moverkit's repository \\(data/\\), not in the wheel"):
        read_extract(tmp_path / "wmt17_system_level_to_en.tsv.gz", EXTRACT_HUMAN)


@pytest.mark.skipif(not os.environ.get("MOVERKIT_WMT17"), reason="set MOVERKIT_WMT17 to the full WMT17/ folder")
def test_the_extract_is_the_full_folder_cut_to_500_segments():
    assert read_extract() == read_wmt17(os.environ["MOVERKIT_WMT17"], segments=500)


def test_the_bench_reads_the_extract_by_default(monkeypatch, capsys):
    from moverkit.cli import main

    seen = {}

    def fake_scores(test_sets, metrics, **kwargs):
        seen["sets"] = test_sets
        return {"twmd": {t.lp: {s: [float(len(x)) for x in out] for s, out in t.outputs.items()} for t in test_sets}}

    monkeypatch.setattr(bench, "score_test_sets", fake_scores)
    assert main(["bench", "system-level", "--metrics", "twmd", "--segments", "2", "--resamples", "20"]) == 0
    assert sum(len(t.outputs) for t in seen["sets"]) == 65 and len(seen["sets"][0].references) == 2
    out = capsys.readouterr().out
    assert "(the extract in data/), 65 systems, the first 2 segments" in out and "| twmd |" in out


# --- per-system batch centering ------------------------------------------------------------------


@pytest.mark.slow
def test_per_system_batch_scores_each_system_alone_and_all_together(wmt17, monkeypatch):
    import dataclasses

    from moverkit.integrations.registry import REGISTRY

    calls = []

    def fake(predictions, references, **kwargs):
        calls.append((len(predictions), kwargs["centering"]))
        return {"twmd": [float(len(predictions))] * len(predictions), "hashcode": "x"}

    monkeypatch.setitem(REGISTRY, "twmd", dataclasses.replace(REGISTRY["twmd"], function=fake))
    sets = read_wmt17(wmt17, segments=3)
    runs = per_system_batch(sets, ["twmd"])
    # cs-en: one call over 3 systems, then 3 calls; fi-en: one over 2, then 2.
    assert calls == [(9, "batch"), (3, "batch"), (3, "batch"), (3, "batch"), (6, "batch"), (3, "batch"), (3, "batch")]
    assert runs["pooled"]["twmd"]["cs-en"]["good.1"] == [9.0] * 3
    assert runs["per_system"]["twmd"]["fi-en"]["bad.2"] == [3.0] * 3


def test_centering_effect_reports_shifts_reorderings_and_both_tables():
    human = {"a": 3.0, "b": 2.0, "c": 1.0}
    sets = [TestSet("cs-en", ["r"], {s: ["x"] for s in human}, human)]
    runs = {
        "pooled": {"twmd": {"cs-en": {"a": [0.9], "b": [0.5], "c": [0.1]}}},
        "per_system": {"twmd": {"cs-en": {"a": [0.8], "b": [0.5], "c": [0.6]}}},
    }
    effect = centering_effect(runs, sets)["twmd"]
    assert effect["pooled"]["accuracy"] == (3, 3) and effect["per_system"]["accuracy"] == (2, 3)
    assert effect["mean_shift"] == pytest.approx(0.2) and effect["max_shift"] == pytest.approx(0.5)
    assert effect["mean_gap"] == pytest.approx((0.4 + 0.8 + 0.4) / 3)
    assert effect["reordered"] == (1, 3)  # b and c swap
    text = format_centering_effect({"twmd": effect})
    assert "| twmd, one call per system |" in text and "| twmd | 0.2000 | 0.5000 | 0.5333 | 1/3 |" in text
