r"""When two scores are the same: the one tolerance of every choice moverkit makes.

A score is computed in float32 (the encoder, the cosines, the transport) and reported in float64.
Two values that are equal in exact arithmetic (F1(a, b) and F1(b, a); a symmetric utility's two
expected values) differ in their last float32 bits, and which way they differ depends on the CPU's
kernels (AVX-512 or AVX2, Intel or AMD) and on the batch a text was encoded in. A choice that takes
the strictly larger of two such values is a coin toss decided by the machine.

So every choice among values (MBR's candidate, the best reference of a prediction, the order of
systems in a comparison and the sign of a segment's difference, tuning's best setting, the
threshold of a tie-calibrated accuracy) treats values within

.. math::

    |a - b| \le \tau \max(1, |a|, |b|), \qquad \tau = 10^{-6}

as a tie (:func:`tied`), and breaks a tie by the documented rule: the first (:func:`first_best`,
:func:`tie_order`). :math:`\tau` is about 8 float32 units in the last place of a value near 1 (the
float32 epsilon is :math:`1.19 \times 10^{-7}`): above the rounding noise of one score
(``tests/test_ties.py`` measures it over WMT17: F1(a, b) against F1(b, a), and the same scores under
AVX2-capped kernels), and far below a difference a metric means (the same test measures the
smallest gap between two distinct candidates' scores against one reference).

A value that moves by more than :math:`\tau` between CPUs (an iterative solver stopped at its
tolerance, a rank correlation where one near-equal pair of scores swaps) is not a tie: such a
choice is stable unless the two best values are within that movement of each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import cmp_to_key

TIE_TOLERANCE = 1e-6
"""The relative tolerance :math:`\\tau` under which two values are one (see the module doc)."""


def tie_width(value):
    """How far from ``value`` another value is still a tie with it: :math:`\\tau \\max(1, |v|)`;
    elementwise for a numpy array or a torch tensor (the one formula of the comparison's segment
    differences and of a prediction's best reference; this room imports neither library)."""
    magnitude = abs(value)
    if isinstance(magnitude, (float, int)):
        return TIE_TOLERANCE * max(1.0, magnitude)
    return TIE_TOLERANCE * magnitude.clip(min=1.0)


def tied(a: float, b: float) -> bool:
    """Whether ``a`` and ``b`` are one value: :math:`|a - b| \\le \\tau \\max(1, |a|, |b|)`."""
    return abs(a - b) <= tie_width(max(abs(a), abs(b)))


def first_best(values: Iterable[float], higher_is_better: bool = True) -> int:
    """The position of the first value within :func:`tie_width` of the best one (the largest, or
    the smallest when lower is better): the same choice on every CPU. NaN is never chosen while a
    number is there; all NaN (or no value) is an error."""
    values = [float(v) for v in values]
    numbers = [v for v in values if v == v]
    if not numbers:
        raise ValueError("no value to choose from (empty, or every value is NaN)")
    best = max(numbers) if higher_is_better else min(numbers)
    if math.isinf(best):  # nothing but the same infinity ties with it
        return values.index(best)
    return next(i for i, v in enumerate(values) if abs(v - best) <= tie_width(best))


def tie_order(items: Sequence, value, higher_is_better: bool = True) -> list:
    """``items`` sorted best first by ``value(item)``, items whose values are tied kept in their
    given order (a stable sort whose comparison is :func:`tied`-aware)."""

    def compare(a, b) -> int:
        x, y = value(a), value(b)
        if tied(x, y):
            return 0
        return (-1 if x > y else 1) if higher_is_better else (-1 if x < y else 1)

    return sorted(items, key=cmp_to_key(compare))


__all__ = ["TIE_TOLERANCE", "first_best", "tie_order", "tie_width", "tied"]
