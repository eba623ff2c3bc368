"""moverkit.judgments.correlation: the one home of correlation and rank statistics."""

import math

import pytest

from moverkit.judgments.correlation import acc_eq, correlate, pairwise, pearson


def test_acc_eq_on_a_hand_checked_example():
    """Three rows (Deutsch et al., 2023; mt-metrics-eval's KendallWithTiesOpt, acc23):

    row A: human (0, 0, 1), metric (.50, .52, .90): pairs |dm| .02 (human tie), .40 and .38 (both agree)
    row B: human (1, 1),    metric (.30, .31):      one pair, |dm| .01, human tie
    row C: human (1, 2),    metric (.50, .45):      one pair, |dm| .05, ordered against the humans

    eps = 0:    A 2/3 (the human tie is missed), B 0, C 0       -> mean 2/9
    eps = .01:  A 2/3, B 1 (tied on both sides), C 0            -> 5/9
    eps = .02:  A 3/3, B 1, C 0                                 -> 2/3  (the maximum)
    eps = .05:  A 3/3, B 1, C 0 (a metric-only tie is wrong)    -> 2/3  (equal: the smaller eps wins)
    eps = .38:  A 2/3 (a pair the humans order is now tied), B 1 -> 5/9
    eps = .40:  A 1/3, B 1, C 0                                 -> 4/9

    mt-metrics-eval's tau_optimization (commit 68a481a) gives 0.6667 at 0.02 on these rows too.
    """
    result = acc_eq([[0, 0, 1], [1, 1], [1, 2]], [[0.50, 0.52, 0.90], [0.30, 0.31], [0.50, 0.45]])
    assert result.accuracy == pytest.approx(2 / 3)
    assert result.epsilon == pytest.approx(0.02)
    assert result.rows == 3


def test_acc_eq_without_human_ties_is_the_share_ordered_alike():
    """No human tie: no threshold above 0 helps, and an exact metric tie counts as wrong.
    Pairs of (1, 2, 3, 4) against (1, 3, 2, 2): (1,2) (1,3) (1,4) agree, (2,3) (2,4) disagree,
    (3,4) is tied by the metric only: 3/6."""
    result = acc_eq([[1, 2, 3, 4]], [[1, 3, 2, 2]])
    assert (result.accuracy, result.epsilon) == (0.5, 0.0)
    assert pairwise(dict(enumerate([1, 3, 2, 2])), dict(enumerate([1, 2, 3, 4])), True) == (3, 6)
    # A row of one item has no pair and is left out; no pair at all is an error.
    assert acc_eq([[1, 2, 3, 4], [5]], [[1, 3, 2, 2], [0]]).rows == 1
    with pytest.raises(ValueError, match="no row has two items"):
        acc_eq([[1]], [[1]])
    with pytest.raises(ValueError, match="row 0 has 2 human scores and 3 metric scores"):
        acc_eq([[1, 2]], [[1, 2, 3]])


def test_pearson_is_nan_where_undefined():
    assert math.isnan(pearson([1, 2], [2, 1]))
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    r, tau = correlate([1, 2, 3, 4], [1, 3, 2, 4])
    assert tau == pytest.approx(4 / 6) and 0 < r < 1
