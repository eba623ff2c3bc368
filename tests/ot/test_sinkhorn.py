"""TWMD's log-domain Sinkhorn plan and TRWMD's closed form (moverkit.ot.sinkhorn), pinned to a
hand computation, to POT's entropic and exact solvers, and to the entropic objective of Eq. (4)."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import torch

from moverkit._core import prepare_pairs
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.request import EncoderRequest
from moverkit.ot import sinkhorn_log_plan, trwmd_value


def _value(sim, rows, cols, temperature, iterations):
    """C = <pi, S> per pair, float64."""
    return (sinkhorn_log_plan(sim, rows, cols, temperature, iterations).exp() * sim).sum((1, 2), dtype=torch.float64)


# --- the hand-computed example -----------------------------------------------------------------

# Reference X1 (rows): r1 = (1, 0), r2 = (0, 1), r3 = (0.6, 0.8); prediction X2 (columns):
# p1 = (1, 0), p2 = (0.8, 0.6). All unit vectors, so s_ij = <r_i, p_j>:
#     S = [[1.0, 0.8 ],
#          [0.0, 0.6 ],
#          [0.6, 0.96]]
# T = 0.5, kernel K = exp(+S / T) = exp(2 S):
#     K = [[e^2.0 = 7.389056, e^1.6  = 4.953032],
#          [e^0   = 1.000000, e^1.2  = 3.320117],
#          [e^1.2 = 3.320117, e^1.92 = 6.820958]]
# Eq. (6), first half: each column to sum 1/L2 = 1/2. Column sums 11.709173 and 15.094108:
#     xi = K / (2 * colsum) = [[0.315524, 0.164072], [0.042702, 0.109981], [0.141774, 0.225948]]
# Second half: each row to sum 1/L1 = 1/3. Row sums of xi 0.479596, 0.152682, 0.367722:
#     pi = xi / (3 * rowsum) = [[0.219299, 0.114035], [0.093225, 0.240108], [0.128516, 0.204818]]
# C = sum pi * S = 0.219299 + 0.8 * 0.114035 + 0.6 * 0.240108 + 0.6 * 0.128516 + 0.96 * 0.204818
#   = 0.728325
HAND_REF = [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]
HAND_PRED = [[1.0, 0.0], [0.8, 0.6]]
HAND_PLAN = [[0.219299, 0.114035], [0.093225, 0.240108], [0.128516, 0.204818]]
HAND_C = 0.728325


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hand_computed_one_sinkhorn_step(dtype):
    ref, pred = torch.tensor([HAND_REF], dtype=dtype), torch.tensor([HAND_PRED], dtype=dtype)
    sim = torch.einsum("brd,bpd->brp", ref, pred)
    rows, cols = torch.ones(1, 3, dtype=torch.bool), torch.ones(1, 2, dtype=torch.bool)
    plan = sinkhorn_log_plan(sim, rows, cols, 0.5, 1).exp()[0]
    np.testing.assert_allclose(plan.numpy(), HAND_PLAN, atol=1e-6)
    assert float(_value(sim, rows, cols, 0.5, 1)[0]) == pytest.approx(HAND_C, abs=1e-6)
    # The plan favours similar tokens: r1 sends most of its mass to p1 (s = 1 > 0.8), r2 to p2.
    assert plan[0, 0] > plan[0, 1] and plan[1, 1] > plan[1, 0]


# --- POT ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_batch(wmt_pairs):
    """Padded cosines (float64) of 8 real pairs of different lengths, centering none."""
    data = prepare_pairs(wmt_pairs[0][:8], wmt_pairs[1][:8], EncoderRequest(), Centering("none"))
    pred, ref = data.pad_pairs(torch.arange(8))
    sim = torch.einsum("brd,bpd->brp", ref.vectors.double(), pred.vectors.double())
    return sim, ref.mask, pred.mask


def _unpadded(sim, rows, cols, k):
    s = sim[k][rows[k]][:, cols[k]].numpy()
    return s, np.full(s.shape[0], 1 / s.shape[0]), np.full(s.shape[1], 1 / s.shape[1])


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.2, 0.1])
def test_many_iterations_give_pots_entropic_transport_value(real_batch, temperature, one_thread):
    # POT minimises <pi, M> + reg * sum pi log pi with kernel exp(-M / reg); with M = -S and
    # reg = T that is Eq. (5) with the sign flipped, so the same plan, and ot.sinkhorn2 returns
    # <pi, M> (no entropy term) = -C.
    sim, rows, cols = real_batch
    ours = _value(sim, rows, cols, temperature, 1000)
    for k in range(len(sim)):
        s, a, b = _unpadded(sim, rows, cols, k)
        pot = ot.sinkhorn2(a, b, -s, temperature, method="sinkhorn_log", numItermax=100_000, stopThr=1e-14)
        assert float(ours[k]) == pytest.approx(-float(pot), abs=1e-9)


def test_small_temperature_and_many_iterations_give_the_exact_wmd(one_thread, masks):
    # With pi_T the entropic optimum and pi* the exact one (ot.emd2 on M = -S):
    # <pi*, S> - <pi_T, S> <= T (H(pi_T) - H(pi*)) <= T (log(L1 L2) - log max(L1, L2)) = T log min(L1, L2),
    # and <pi_T, S> <= <pi*, S> (up to the marginals' convergence error). Three padded problems of
    # sizes 5x7, 9x4 and 12x12 with random unit vectors (float64).
    generator = torch.Generator().manual_seed(0)
    sizes = [(5, 7), (9, 4), (12, 12)]
    x = torch.nn.functional.normalize(torch.randn(3, 12, 16, generator=generator, dtype=torch.float64) + 0.8, dim=-1)
    y = torch.nn.functional.normalize(torch.randn(3, 12, 16, generator=generator, dtype=torch.float64) + 0.8, dim=-1)
    rows, cols = masks(*[(n1, 12) for n1, _ in sizes]), masks(*[(n2, 12) for _, n2 in sizes])
    x, y = x * rows[..., None], y * cols[..., None]
    sim = torch.einsum("brd,bpd->brp", x, y)
    temperature = 0.005
    ours = _value(sim, rows, cols, temperature, 5000)
    for k, (n1, n2) in enumerate(sizes):
        s = sim[k, :n1, :n2].numpy()
        exact = -float(ot.emd2(np.full(n1, 1 / n1), np.full(n2, 1 / n2), -s))
        gap = exact - float(ours[k])
        assert -1e-6 <= gap <= temperature * math.log(min(n1, n2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plan_is_finite_with_exact_row_marginals_at_any_temperature(dtype, one_thread, masks):
    torch.manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(4, 9, 16, dtype=dtype), dim=-1)
    y = torch.nn.functional.normalize(torch.randn(4, 7, 16, dtype=dtype), dim=-1)
    sim = torch.einsum("brd,bpd->brp", x, y)
    rows = masks((9, 9), (4, 9), (0, 9), (3, 9))
    cols = masks((7, 7), (7, 7), (5, 7), (0, 7))  # pairs 2 and 3 have an empty side
    for temperature in (1e-6, 1e-3, 1e3):
        plan = sinkhorn_log_plan(sim, rows, cols, temperature, 20).exp()
        assert torch.isfinite(plan).all()
        assert (plan[~(rows[:, :, None] & cols[:, None, :])] == 0).all()  # nothing on padding
        np.testing.assert_allclose(plan.sum((1, 2)).double().numpy(), [1, 1, 0, 0], atol=1e-5)
        row_mass = plan.sum(2)[:2] * rows[:2].sum(1, keepdim=True)  # each real row sends 1/L1
        np.testing.assert_allclose(row_mass[rows[:2]].double().numpy(), 1.0, atol=1e-5)


# --- TRWMD's closed form -------------------------------------------------------------------------


def test_trwmd_is_the_entropic_optimum_of_eq4_less_t_log_l1(masks):
    # Eq. (4) with the entropy term, over plans whose rows send 1/L1 each (columns free):
    #     F(pi) = <pi, S> - T sum_ij pi_ij log pi_ij.
    # Row by row, max over p >= 0, sum p = m, of <p, s> - T sum p log p is m T LSE(s / T) - T m log m
    # (Gibbs), at p = m softmax(s / T); summed with m = 1/L1: (T / L1) sum_i LSE_i + T log L1.
    rng = np.random.default_rng(2)
    sizes, temperature = [(3, 5), (6, 2), (1, 1), (6, 5)], 0.07
    sim = torch.zeros(len(sizes), 6, 5, dtype=torch.float64)
    for k, (n1, n2) in enumerate(sizes):
        sim[k, :n1, :n2] = torch.from_numpy(rng.uniform(-0.3, 1.0, (n1, n2)))
    rows, cols = masks(*[(n1, 6) for n1, _ in sizes]), masks(*[(n2, 5) for _, n2 in sizes])
    ours = trwmd_value(sim, rows, cols, temperature)
    assert ours.dtype == torch.float64
    for k, (n1, n2) in enumerate(sizes):
        s = sim[k, :n1, :n2].numpy()

        def objective(plan, s=s):
            return float((plan * s).sum() - temperature * (plan * np.log(plan)).sum())

        best = np.exp(s / temperature) / np.exp(s / temperature).sum(1, keepdims=True) / n1
        assert float(ours[k]) == pytest.approx(objective(best) - temperature * math.log(n1), abs=1e-12)
        for _ in range(20):  # any other plan with the same row masses does no better
            other = rng.dirichlet(np.ones(n2), size=n1) / n1
            assert objective(other) <= objective(best) + 1e-12


def test_trwmd_is_zero_for_an_empty_side_and_finite_at_tiny_temperature(masks):
    sim = torch.tensor([[[1.0, -1.0], [0.5, 0.0]]] * 3, dtype=torch.float32)
    rows, cols = masks((2, 2), (0, 2), (2, 2)), masks((2, 2), (2, 2), (0, 2))
    for temperature in (1e-6, 1e3):
        values = trwmd_value(sim, rows, cols, temperature)
        assert torch.isfinite(values).all() and values[1] == 0 and values[2] == 0
    # As T -> 0, C -> mean_i max_j s_ij = (1 + 0.5) / 2, from above by at most T log L2.
    assert 0 <= float(trwmd_value(sim.double(), rows, cols, 1e-6)[0]) - 0.75 <= 1e-6 * math.log(2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_temperatures_whose_inverse_overflows_the_dtype_run_in_float64(dtype, masks):
    # float32: 1/T = 1e39 overflows (max 3.4e38); float16: 1/T = 1e5 overflows (max 65504). Before,
    # s/T was inf, the TRWMD value NaN and the plan NaN.
    torch.manual_seed(3)
    x = torch.nn.functional.normalize(torch.randn(2, 4, 8, dtype=torch.float64), dim=-1)
    y = torch.nn.functional.normalize(torch.randn(2, 3, 8, dtype=torch.float64), dim=-1)
    sim64 = torch.einsum("brd,bpd->brp", x, y)
    sim = sim64.to(dtype)
    rows, cols = masks((4, 4), (2, 4)), masks((3, 3), (3, 3))
    temperature = 1e-39 if dtype == torch.float32 else 1e-5
    # The T -> 0 limit, computed independently: the mean over real rows of each row's best similarity.
    best = [sim[b, : int(rows[b].sum()), :3].double().amax(1).mean().item() for b in range(2)]
    gap = trwmd_value(sim, rows, cols, temperature).numpy() - np.array(best)
    assert np.all(gap >= -1e-12) and np.all(gap <= temperature * math.log(3) + 1e-12)  # Eq. (7)'s bound
    plan = sinkhorn_log_plan(sim, rows, cols, temperature, 1).exp()
    assert plan.dtype == torch.float64 and torch.isfinite(plan).all()
    np.testing.assert_allclose(plan.sum((1, 2)).numpy(), 1.0, atol=1e-12)
