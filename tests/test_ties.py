"""Choices by the definition, not by a float's last bit (issue 60): the one tie tolerance
(``moverkit.facts.ties``), held against the rounding noise of real scores and the smallest real
difference between them, and each place a choice is made (MBR, the best reference, the order and
win rates of a comparison, tuning's best setting, a tie-calibrated accuracy's threshold).

``tests/test_second_cpu.py`` runs this file again under AVX2-capped kernels."""

from __future__ import annotations

import csv
import gzip
import itertools
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from moverkit.facts.ties import TIE_TOLERANCE, first_best, tie_order, tie_width, tied

SYSTEM_OUTPUTS = Path(__file__).resolve().parents[1] / "data" / "wmt17_system_level_to_en.tsv.gz"
NOISE = 2e-7  # a few float32 units in the last place of a score near 1: what float rounding may move


def test_the_rule():
    assert tied(0.5, 0.5 + 0.5 * TIE_TOLERANCE) and not tied(0.5, 0.5 + 2 * TIE_TOLERANCE)
    assert tied(1000.0, 1000.0 + 500 * TIE_TOLERANCE)  # relative past 1
    assert tie_width(0.01) == TIE_TOLERANCE and tie_width(-3.0) == 3 * TIE_TOLERANCE
    values = [0.7, 0.8 - NOISE, 0.8, 0.8 + NOISE, 0.5]
    assert first_best(values) == 1 and first_best(values[::-1]) == 1
    assert first_best(values, higher_is_better=False) == 4
    assert first_best([math.nan, 0.2, 0.2 + NOISE]) == 1  # NaN never chosen while a number is there
    assert first_best([-math.inf, -math.inf]) == 0 and first_best([1.0, math.inf, 2.0]) == 1
    with pytest.raises(ValueError, match="no value"):
        first_best([math.nan])
    assert tie_order(["a", "b", "c"], {"a": 0.3, "b": 0.9, "c": 0.3 + NOISE}.get) == ["b", "a", "c"]
    assert tie_order(["c", "b", "a"], {"a": 0.3, "b": 0.9, "c": 0.3 + NOISE}.get, False) == ["c", "a", "b"]


def _wmt17_candidates(sources: int) -> tuple[list[str], list[str], list[tuple]]:
    """The distinct system outputs of WMT17's first ``sources`` segments, each with its reference."""
    with gzip.open(SYSTEM_OUTPUTS, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    by_segment = defaultdict(dict)
    for row in rows:
        by_segment[row["lp"], row["sid"]][row["system"]] = row["text"]
    outputs, references, segments = [], [], []
    for key in [k for k, texts in by_segment.items() if "reference" in texts][:sources]:
        texts = by_segment[key]
        for text in sorted({t for system, t in texts.items() if system != "reference"}):
            outputs.append(text)
            references.append(texts["reference"])
            segments.append(key)
    return outputs, references, segments


@pytest.mark.slow
def test_the_tolerance_is_above_the_noise_and_below_a_real_difference():
    from moverkit import functional

    outputs, references, segments = _wmt17_candidates(100)  # 389 outputs of 100 segments
    forward = np.array(functional.centered_bertscore(outputs, references)["f1"])
    backward = np.array(functional.centered_bertscore(references, outputs)["f1"])
    noise = np.abs(forward - backward).max()  # F1 is symmetric: what is left is rounding
    gaps = []
    for _, group in itertools.groupby(range(len(outputs)), key=segments.__getitem__):
        scores = np.sort(forward[list(group)])
        gaps += np.diff(scores).tolist()  # distinct outputs against one reference: a real difference
    # measured (AMD EPYC, AVX-512 and AVX2-capped): noise 2.6e-8 to 6e-8, smallest gap 9.6e-5
    assert noise < TIE_TOLERANCE / 4, noise
    assert min(gaps) > 20 * TIE_TOLERANCE, min(gaps)


def test_the_best_reference_is_the_first_of_tied_ones():
    from moverkit._core import best_per_group, reference_index

    group = torch.tensor([0, 0, 0, 1, 1])
    values = torch.tensor([0.2, 0.8 + NOISE, 0.8, 0.4, 0.4 - NOISE], dtype=torch.float64)
    kept, pair = best_per_group(values, group, 2)
    assert kept.tolist() == [0.8 + NOISE, 0.4] and reference_index(pair, group) == [1, 0]
    kept, pair = best_per_group(torch.tensor([0.3, 0.3 - NOISE, 0.9]), torch.tensor([0, 0, 0]), 1, True)
    assert reference_index(pair, torch.tensor([0, 0, 0])) == [0]
    for values in ([0.5, math.inf, 0.7], [-math.inf, -math.inf, 0.2], [-math.inf] * 3):
        kept, pair = best_per_group(torch.tensor(values, dtype=torch.float64), torch.tensor([0, 0, 0]), 1)
        assert kept.tolist() == [max(values)] and reference_index(pair, torch.tensor([0, 0, 0])) == [
            values.index(max(values))
        ]


def test_a_comparison_calls_float_noise_a_tie():
    from moverkit.comparison import paired_test, summarize

    a = np.linspace(0.2, 0.9, 40)
    b = a + NOISE * np.where(np.arange(40) % 2, 1, -1)  # the same scores, other last bits
    test = paired_test(a, b, resamples=200)
    assert test.win_rate == 0 and test.delta == 0 and test.p_value == 1 and test.p_permutation == 1
    for order in (["A", "B"], ["B", "A"]):
        segments = {"centered_bertscore": {name: {"A": a, "B": b}[name].tolist() for name in order}}
        comparison = summarize(segments, resamples=200, seed=0)
        assert comparison.ranking["centered_bertscore"] == [order]  # one cluster, in the given order


def test_tunings_best_setting_is_the_first_of_tied_ones():
    from moverkit.tuning import best_setting

    correlations = np.array([[0.31, 0.5], [0.4, 0.5 + NOISE], [0.4 + NOISE, 0.5], [np.nan, np.nan]])
    assert best_setting(correlations) == 1
    assert best_setting(correlations[[2, 1, 0, 3]]) == 0
    assert best_setting(np.array([[np.nan], [np.nan]])) == 0  # nothing to choose: the first
