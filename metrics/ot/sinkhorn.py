r"""Tempered optimal transport of Chen et al. (2020): TWMD's few-step log-domain Sinkhorn plan and
TRWMD's closed form, batched over padded pairs of token clouds.

Both take the similarities :math:`s_{ij} = \langle x_1^i, x_2^j \rangle` of a padded batch,
``sim`` (B, L1, L2) (any finite value at padding), with ``rows`` (B, L1) and ``cols`` (B, L2) marking the real
tokens of X1 (the rows, masses :math:`1/L_1`) and X2 (the columns, masses :math:`1/L_2`).
"""

from __future__ import annotations

import math

import torch

__all__ = ["MAX_TEMPERATURE", "MIN_TEMPERATURE", "sinkhorn_log_plan", "tempered", "trwmd_value"]

MIN_TEMPERATURE = 1e-300
"""The smallest admissible T: :math:`s/T` (:math:`|s| \\le 1`) stays finite in float64 down to about 5.6e-309,
where 1/T overflows; 1e-300 keeps a margin and is already the T -> 0 limit to rounding (T log L2 < 1e-297)."""
MAX_TEMPERATURE = 1e300
"""The largest admissible T: TRWMD's C grows like :math:`T \\log L_2` and must stay finite in float64."""


def tempered(sim: torch.Tensor, temperature: float) -> torch.Tensor:
    r""":math:`s/T`, in the dtype of ``sim`` where it cannot overflow (cosines, :math:`|s| \le 1`: where
    :math:`16/T` fits its largest value), else in float64: at T = 1e-39 float32 would turn
    :math:`1/T` into inf and every tempered similarity into inf or NaN. Float64 holds :math:`s/T` for
    every T in [:data:`MIN_TEMPERATURE`, :data:`MAX_TEMPERATURE`]."""
    if temperature * torch.finfo(sim.dtype).max < 16.0:
        sim = sim.double()
    return sim / temperature


def sinkhorn_log_plan(
    sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, temperature: float, iterations: int
) -> torch.Tensor:
    r"""Log of the TWMD transport plan after ``iterations`` Sinkhorn steps (Eq. 5, 6).

    .. math::

        \max_\pi \sum_{ij} \pi_{ij} s_{ij} - T \sum_{ij} \pi_{ij} \log \pi_{ij}
        \quad\text{s.t.}\quad \textstyle\sum_i \pi_{ij} = 1/L_2,\ \sum_j \pi_{ij} = 1/L_1

    Its solution is :math:`\pi = \operatorname{diag}(u)\, K \operatorname{diag}(v)` with the kernel
    :math:`K_{ij} = \exp(+s_{ij}/T)`, which favours similar tokens, as this maximisation of
    similarity needs (the paper's Eq. (6) starts from :math:`\exp(-\langle x_1^i, x_2^j\rangle/T)`,
    the sign of Cuturi's cost minimisation, which would favour dissimilar tokens). Each step scales
    the columns to sum to :math:`1/L_2`, then the rows to :math:`1/L_1` (Eq. 6), in the log domain:

    .. math::

        \log \xi = \log \pi - \operatorname{LSE}_i \log \pi - \log L_2,\qquad
        \log \pi \leftarrow \log \xi - \operatorname{LSE}_j \log \xi - \log L_1,\qquad
        \log \pi^{(0)} = s / T

    Written on the log-plan itself (each half step a ``log_softmax``), every value stays in
    :math:`[-\infty, 0]` after the first half step, so nothing over- or underflows and the last
    marginals hold to rounding at any T, in float32 too (scaling potentials :math:`\log u, \log v`
    grow like :math:`1/T` and lose float32 precision at tiny T). This is POT's ``sinkhorn_log``
    batched over padded pairs of different sizes, which POT does not offer. Padding gets
    :math:`-\infty`; a pair with an empty side gets an all-zero plan.

    Parameters
    ----------
    sim : Tensor, shape (B, L1, L2)
        Similarities :math:`s_{ij}`, any finite value at padding.
    rows, cols : Tensor (bool), shapes (B, L1) and (B, L2)
        True at the real tokens of X1 and X2.
    temperature : float
        :math:`T > 0`.
    iterations : int
        Sinkhorn steps, >= 1 (the paper uses 1; many converge to the entropic optimum).

    Returns
    -------
    Tensor, shape (B, L1, L2), the dtype of ``sim`` (float64 where :func:`tempered` needs it)
        :math:`\log \pi`, :math:`-\infty` at padding; :math:`\pi` sums to 1 per pair with both
        sides non-empty, each real row to :math:`1/L_1` exactly (the last half step).

    References
    ----------
    .. [1] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with
       Batch Centering and Tempered Word Mover Distance. Eval4NLP 2020, Section 4, Eq. (5)-(6).
    .. [2] M. Cuturi. Sinkhorn Distances: Lightspeed Computation of Optimal Transport. NeurIPS 2013.
    """
    dead = ~(rows[:, :, None] & cols[:, None, :])
    log_plan = tempered(sim, temperature).masked_fill(dead, -math.inf)
    log_a = -rows.sum(1).clamp_min(1).to(log_plan.dtype).log()[:, None, None]
    log_b = -cols.sum(1).clamp_min(1).to(log_plan.dtype).log()[:, None, None]
    if log_plan.requires_grad:
        # Out of place: the backward pass of log_softmax needs its output (fine-tuning differentiates this).
        for _ in range(iterations):
            log_plan = (torch.log_softmax(log_plan, dim=1) + log_b).masked_fill(dead, -math.inf)
            log_plan = (torch.log_softmax(log_plan, dim=2) + log_a).masked_fill(dead, -math.inf)
        return log_plan
    # Without gradients, in place: the same values with half the (B, L1, L2) allocations (tuning
    # runs this for every setting of its grid).
    for _ in range(iterations):
        log_plan = torch.log_softmax(log_plan, dim=1).add_(log_b).masked_fill_(dead, -math.inf)
        log_plan = torch.log_softmax(log_plan, dim=2).add_(log_a).masked_fill_(dead, -math.inf)
    return log_plan


def trwmd_value(sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, temperature: float) -> torch.Tensor:
    r"""TRWMD, Eq. (7): :math:`C = \frac{T}{L_1} \sum_i \log \sum_j \exp(s_{ij}/T)`.

    It is the optimum of Eq. (4) with the entropy term, less the constant :math:`T \log L_1`,
    reached by :math:`\pi^*_{ij} = \operatorname{softmax}_j(s_{ij}/T)/L_1`; as
    :math:`T \to 0` it tends to :math:`\frac{1}{L_1}\sum_i \max_j s_{ij}`, BERTScore's recall (Eq. 3),
    from above by at most :math:`T \log L_2`.

    Parameters
    ----------
    sim, rows, cols, temperature
        As in :func:`sinkhorn_log_plan`: the similarities (B, L1, L2), the masks of the real tokens
        of X1 and X2, :math:`T > 0`.

    Returns
    -------
    Tensor, shape (B,), float64
        :math:`C(X_1, X_2)`; 0 for a pair with an empty side.

    References
    ----------
    .. [1] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with
       Batch Centering and Tempered Word Mover Distance. Eval4NLP 2020, Section 4, Eq. (7).
    """
    lse = torch.logsumexp(tempered(sim, temperature).masked_fill(~cols[:, None, :], -math.inf), dim=2)
    n_rows = rows.sum(1)
    keep = rows & (cols.sum(1) > 0)[:, None]
    # T times each row's LSE before the sum: at T = 1e-300 the LSEs are about 1e300 and their sum could overflow.
    return (temperature * torch.where(keep, lse, 0.0).double()).sum(1) / n_rows.clamp_min(1)
