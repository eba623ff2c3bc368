r"""Exact (unregularized) optimal transport: MoverScore's Word Mover's Distance (Zhao et al., 2019,
Eq. 3), by POT's network simplex.

.. math::

    \mathrm{WMD}(a, b; C) = \min_{P \ge 0} \langle C, P \rangle
    \quad \text{s.t.}\quad P \mathbf{1} = a, \; P^\top \mathbf{1} = b

Unlike the Sinkhorn solvers beside it, this solves one problem per call (POT's ``emd`` takes one
pair of histograms); MoverScore batches the cost matrices and loops over the solves.
"""

from __future__ import annotations

import functools

import numpy as np

from moverkit._core.base import kept_random_state

EMD_MAX_ITER = 10_000_000
"""The network simplex stops at this many iterations (POT's default, 1e5, can be too few for two
512-token texts, and then the plan is not optimal)."""


def exact_transport(a: np.ndarray, b: np.ndarray, cost: np.ndarray, with_plan: bool = False):
    """``(wmd, plan)`` between the weights ``a`` (n,) and ``b`` (m,), each normalised here to sum 1,
    under ``cost`` (n, m), in float64; the plan (n, m) only ``with_plan`` (else ``None``)."""
    ot = _pot()
    a, b, cost = a / a.sum(), b / b.sum(), np.ascontiguousarray(cost)
    if with_plan:
        plan = ot.emd(a, b, cost, numItermax=EMD_MAX_ITER)
        return float((plan * cost).sum()), plan
    return float(ot.emd2(a, b, cost, numItermax=EMD_MAX_ITER)), None


@functools.cache
def _pot():
    """POT, imported where it is used (the other metrics run without it: a GPU machine may lack
    it), once, under :func:`~moverkit._core.base.kept_random_state`: importing it imports sklearn
    and rich, which draw from Python's ``random``, so a process's first exact transport would
    otherwise move a user's seeded draws."""
    with kept_random_state():
        import ot

    return ot
