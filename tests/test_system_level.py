"""The system-level benchmark's reading and arithmetic, on a small WMT17-shaped folder made here."""

from __future__ import annotations

import pytest

from moverkit.bench.system_level import pairwise, read_wmt17, system_level


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
    table = system_level(scores, sets, resamples=200, seed=0)
    assert table["twmd"]["accuracy"] == (4, 4) and table["twmd"]["unseen_accuracy"] == (1, 1)
    assert table["chrF"]["accuracy"] == (4, 4) and table["chrF"]["significant"] is None
    assert table["twmd"]["pearson"]["cs-en"] == pytest.approx(0.9934, abs=1e-3)
