"""Lazy-EMD's batched unbalanced Sinkhorn (moverkit.ot.unbalanced), pinned to POT's
sinkhorn_unbalanced (reg_type="entropy"), to Theorem 2's closed form, and to its extreme penalties
(ot.emd2, precision's and recall's softmins)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import ot
import pytest
import torch
from scipy.optimize import brentq

from benchmarks.host import DispatchCounter
from moverkit.ot import unbalanced, unbalanced_plan, unbalanced_sinkhorn

PRESET_EN = (0.23, 0.31)


def _pot_lazy_emd(cost, a, b, epsilon, reg_c, reg_r, reg_type="entropy"):
    """<C, P*> by POT's unbalanced Sinkhorn, run to convergence."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns that reg_type="entropy" overwrites c
        plan = ot.unbalanced.sinkhorn_unbalanced(
            a, b, cost, epsilon, (reg_c, reg_r), method="sinkhorn", reg_type=reg_type, numItermax=10**6, stopThr=1e-14
        )
    return plan


# --- random padded problems ------------------------------------------------------------------


def _random_problems(seed, count=24, largest=8, zero_mass=True):
    """Costs in [0, 2] (cosine distances' range) and masses summing to 1, some with a zero mass."""
    rng = np.random.default_rng(seed)
    problems = []
    for _ in range(count):
        n, m = rng.integers(1, largest + 1, size=2)
        cost = rng.uniform(0.0, 2.0, (n, m))
        a, b = rng.uniform(0.1, 1.0, n), rng.uniform(0.1, 1.0, m)
        if zero_mass and n > 2:
            a[0] = 0.0  # a token of weight 0 (IDF 0): its row must stay empty
        problems.append((cost, a / a.sum(), b / b.sum()))
    return problems


def _padded(problems, dtype=torch.float64):
    """One batch: costs padded with 1 (what zero vectors give), masses with 0."""
    n = max(c.shape[0] for c, _, _ in problems)
    m = max(c.shape[1] for c, _, _ in problems)
    cost = torch.ones(len(problems), n, m, dtype=dtype)
    a = torch.zeros(len(problems), n, dtype=dtype)
    b = torch.zeros(len(problems), m, dtype=dtype)
    for k, (c, ak, bk) in enumerate(problems):
        cost[k, : c.shape[0], : c.shape[1]] = torch.from_numpy(c)
        a[k, : len(ak)] = torch.from_numpy(ak)
        b[k, : len(bk)] = torch.from_numpy(bk)
    return cost, a, b


def _solve(problems, epsilon, reg_c, reg_r, dtype=torch.float64, **kwargs):
    """Plans of our batched solver, cropped to each problem, float64 numpy."""
    cost, a, b = _padded(problems, dtype)
    solved = unbalanced_sinkhorn(cost, a, b, epsilon, reg_c, reg_r, **kwargs)
    plan = unbalanced_plan(cost, a, b, solved, epsilon)
    return [plan[k, : c.shape[0], : c.shape[1]].double().numpy() for k, (c, _, _) in enumerate(problems)], solved


SETTINGS = [
    (0.009, *PRESET_EN),  # the paper's "en" preset
    (0.009, 0.018, 0.97),  # "zh"
    (0.05, 0.5, 2.0),
    (0.05, math.inf, 0.3),  # a hard prediction marginal
    (0.1, 1.0, math.inf),  # a hard reference marginal
    (0.1, math.inf, math.inf),  # balanced entropic OT
    (0.01, 1e-9, 1e9),  # tiny and huge penalties
]


@pytest.mark.slow
@pytest.mark.parametrize("epsilon, reg_c, reg_r", SETTINGS)
def test_batched_solver_equals_pot_sinkhorn_unbalanced_entropy(epsilon, reg_c, reg_r):
    problems = _random_problems(seed=0)
    ours, solved = _solve(problems, epsilon, reg_c, reg_r, tol=1e-12, max_iter=10**5)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours, problems):
        theirs = _pot_lazy_emd(cost, a, b, epsilon, reg_c, reg_r)
        np.testing.assert_allclose(plan, theirs, rtol=0, atol=1e-10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ot.unbalanced.sinkhorn_unbalanced2(
                a, b, cost, epsilon, (reg_c, reg_r), reg_type="entropy", numItermax=10**6, stopThr=1e-14
            )
        assert abs(float((plan * cost).sum()) - float(value)) <= 1e-10
        if a[0] == 0:
            assert np.all(plan[0] == 0)  # no mass leaves a token of weight 0


def test_entropic_term_is_pots_entropy_not_its_kl():
    """The release iterates u = (a / K v)^(lambda / (lambda + eps)) with K = exp(-C / eps): the
    entropic term KL(P | 1 1^T), POT's reg_type="entropy". POT's default since 0.9.5,
    reg_type="kl", regularizes towards a b^T instead: a different plan, which we must not match."""
    problems = _random_problems(seed=1, count=6, zero_mass=False)
    ours, _ = _solve(problems, 0.009, *PRESET_EN, tol=1e-12)
    for plan, (cost, a, b) in zip(ours, problems):
        entropy = _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN, reg_type="entropy")
        kl = _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN, reg_type="kl")
        assert np.abs(plan - entropy).max() <= 1e-10
        assert np.abs(plan - kl).max() >= 1e-3 * plan.max()


@pytest.mark.slow  # thousands of iterations to reach the diverging regime
def test_overrelaxation_safeguard_recovers_from_a_diverging_factor(monkeypatch):
    """With omega = 1.99 the over-relaxed updates overshoot; the safeguard must bring every
    problem back to plain Sinkhorn and still reach POT's plan."""
    monkeypatch.setattr(unbalanced, "overrelaxation", lambda phi_c, phi_r: 1.99)
    problems = _random_problems(seed=2)
    ours, solved = _solve(problems, 0.009, *PRESET_EN, tol=1e-12, max_iter=10**5)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours, problems):
        assert np.abs(plan - _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN)).max() <= 1e-10


@pytest.mark.slow
def test_float32_and_extreme_parameters_give_finite_plans():
    """eps = 0.009 on costs up to 2 puts exp(-C / eps) at e^-222, below float32's range: the
    stabilized kernels must still give POT's float64 answer to float32 precision."""
    problems = _random_problems(seed=3)
    ours32, solved = _solve(problems, 0.009, *PRESET_EN, dtype=torch.float32)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours32, problems):
        assert np.isfinite(plan).all()
        assert (
            abs(float((plan * cost).sum()) - float((_pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN) * cost).sum())) <= 1e-4
        )
    for epsilon, reg_c, reg_r in [(1e-5, 1e-12, 1e12), (1e-5, 1e12, 1e-12), (0.009, 0.0, 0.0), (1e-4, 1e-3, 1e3)]:
        for dtype in (torch.float32, torch.float64):
            plans, _ = _solve(problems, epsilon, reg_c, reg_r, dtype=dtype, max_iter=2000)
            assert all(np.isfinite(p).all() and (p >= 0).all() for p in plans)


# --- Theorem 2: one reference token ----------------------------------------------------------
#
# One reference token of mass 1, candidate masses w_i, costs c_i, plan p (a column). With the
# entropic term, stationarity of
#     sum_i c_i p_i + eps sum_i (p_i log p_i - p_i + 1) + lc sum_i (p_i log(p_i / w_i) - p_i + w_i)
#       + lr (s log s - s + 1),   s = sum_i p_i,
# in p_i reads c_i + eps log p_i + lc log(p_i / w_i) + lr log s = 0, so
#     p_i = w_i^(lc / (lc + eps)) exp(-(c_i + lr A) / (lc + eps)),   A = log s.
# Summing: s = Q exp(-lr A / (lc + eps)) with Q = sum_i w_i^(lc/(lc+eps)) exp(-c_i / (lc + eps)),
# so A = (lc + eps) log Q / (lc + eps + lr). At eps = 0 this is Theorem 2, Eq. (12)-(13):
#     p_i = exp(-c_i / lc - (lr / lc) A) w_i,   A = log sum_i p_i.


def _theorem_2_entropic(c, w, lc, lr, eps):
    phi = lc / (lc + eps)
    log_q = phi * np.log(w) - c / (lc + eps)
    big_a = (lc + eps) * np.logaddexp.reduce(log_q) / (lc + eps + lr)
    return np.exp(log_q - lr * big_a / (lc + eps))


def _theorem_2_paper(c, w, lc, lr):
    """Eq. (12)-(13) as printed: A solves A = log sum_i w_i exp(-c_i / lc - (lr / lc) A)."""
    big_a = brentq(lambda x: x - np.log(np.sum(w * np.exp(-c / lc - lr / lc * x))), -100, 100)
    return w * np.exp(-c / lc - lr / lc * big_a)


@pytest.mark.parametrize("lc, lr", [PRESET_EN, (0.018, 0.97), (0.5, 0.05)])
@pytest.mark.parametrize("eps", [0.009, 0.05])
def test_theorem_2_closed_form_with_the_entropic_term(lc, lr, eps):
    rng = np.random.default_rng(4)
    c, w = rng.uniform(0.05, 1.5, 7), rng.uniform(0.1, 1.0, 7)
    w /= w.sum()
    (plan,), _ = _solve([(c[:, None], w, np.ones(1))], eps, lc, lr, tol=1e-12, max_iter=10**5)
    np.testing.assert_allclose(plan[:, 0], _theorem_2_entropic(c, w, lc, lr, eps), rtol=1e-9, atol=0)


@pytest.mark.slow
def test_theorem_2_as_printed_is_the_small_epsilon_limit():
    rng = np.random.default_rng(5)
    c, w = rng.uniform(0.05, 1.5, 6), rng.uniform(0.1, 1.0, 6)
    w /= w.sum()
    paper = _theorem_2_paper(c, w, *PRESET_EN)
    gaps = []
    for eps in (1e-3, 1e-4):
        (plan,), _ = _solve([(c[:, None], w, np.ones(1))], eps, *PRESET_EN, tol=1e-10, max_iter=10**5)
        gaps.append(np.abs(np.log(plan[:, 0] / paper)).max())
    # log p_i moves by O(eps): (phi - 1) log w_i and the 1 / (lc + eps) factors, about 20 eps here.
    assert gaps[1] <= 0.01
    assert gaps[0] / gaps[1] == pytest.approx(10, rel=0.2)


# --- the extreme penalties: EMD, precision and recall (Section 4) ------------------------------


def test_free_reference_marginal_is_a_softmin_per_prediction_token():
    """reg_r = 0 frees the reference side: g = 0, and f_i = eps (log a_i - LSE_j(-C_ij / eps)),
    so P_ij = a_i softmax_j(-C_ij / eps) (reg_c = inf), the entropic form of precision's argmax."""
    problems = _random_problems(seed=6)
    ours, _ = _solve(problems, 0.05, math.inf, 0.0)
    for plan, (cost, a, _) in zip(ours, problems):
        softmax = np.exp(-cost / 0.05) / np.exp(-cost / 0.05).sum(1, keepdims=True)
        np.testing.assert_allclose(plan, a[:, None] * softmax, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("eps", [1e-2, 1e-4])
def test_extreme_penalties_bound_one_minus_precision_and_recall(eps):
    """For each row, min_j c_ij <= <c_i, softmax(-c_i / eps)> <= min_j c_ij + eps log m (Gibbs'
    variational principle), so 0 <= lazy(inf, 0) - (1 - P) <= eps log m with P = sum_i a_i max_j S_ij."""
    for cost, a, b in _random_problems(seed=7, zero_mass=False):
        (p_plan,), _ = _solve([(cost, a, b)], eps, math.inf, 0.0)
        (r_plan,), _ = _solve([(cost, a, b)], eps, 0.0, math.inf)
        one_minus_p = float(a @ cost.min(1))
        one_minus_r = float(b @ cost.min(0))
        # 1e-9: the plan's exponent (f_i - C_ij) / eps carries float64 rounding amplified by 1 / eps
        assert -1e-9 <= float((p_plan * cost).sum()) - one_minus_p <= eps * math.log(cost.shape[1]) + 1e-9
        assert -1e-9 <= float((r_plan * cost).sum()) - one_minus_r <= eps * math.log(cost.shape[0]) + 1e-9


def _entropy(p):
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


def _emd_gap_bounds(plan, cost, a, b, eps):
    """With both marginals hard the plan is a coupling, so <C, P_eps> >= EMD; and since P_eps
    minimizes <C, P> - eps H(P) over couplings, <C, P_eps> - EMD <= eps (H(P_eps) - H(P_emd))."""
    emd_plan = ot.emd(a, b, cost)
    gap = float((plan * cost).sum()) - float((emd_plan * cost).sum())
    return gap, eps * (_entropy(plan) - _entropy(emd_plan))


@pytest.mark.parametrize("eps", [1e-2, pytest.param(1e-3, marks=pytest.mark.slow)])  # 1e-3: many iterations
def test_hard_marginals_approach_emd2_from_above(eps):
    problems = _random_problems(seed=8, largest=6, zero_mass=False)
    ours, solved = _solve(problems, eps, math.inf, math.inf, tol=1e-10, max_iter=10**5)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours, problems):
        np.testing.assert_allclose(plan.sum(1), a, atol=1e-9)
        gap, bound = _emd_gap_bounds(plan, cost, a, b, eps)
        assert abs(ot.emd2(a, b, cost) - float((ot.emd(a, b, cost) * cost).sum())) <= 1e-12
        assert -1e-9 <= gap <= bound + 1e-9
        assert bound <= eps * min(_entropy(a), _entropy(b)) + 1e-9


def test_a_free_marginal_keeps_its_potential_at_zero_in_a_padded_batch():
    # lambda_c = 0 makes the prediction side free: its update is identically 0 (POT's u = 1). A
    # one-token problem padded beside a two-token one at epsilon 1e-3 computed 0 * log(0) = NaN on
    # its padded row and returned a NaN plan; a text against itself then scored inf.
    costs = [np.zeros((1, 1)), np.array([[0.0, 0.7699], [0.7699, 0.0]])]
    masses = [np.ones(1), np.full(2, 0.5)]
    cost = torch.zeros(2, 2, 2, dtype=torch.float64)
    a = torch.zeros(2, 2, dtype=torch.float64)
    for k, (c, m) in enumerate(zip(costs, masses)):
        cost[k, : len(m), : len(m)] = torch.from_numpy(c)
        a[k, : len(m)] = torch.from_numpy(m)
    solved = unbalanced_sinkhorn(cost, a, a.clone(), 1e-3, 0.0, 0.31, max_iter=10_000)
    plan = unbalanced_plan(cost, a, a.clone(), solved, 1e-3)
    assert bool(solved.converged.all()) and bool(torch.isfinite(plan).all())
    for k, (c, m) in enumerate(zip(costs, masses)):
        pot = _pot_lazy_emd(c, m, m, 1e-3, 0.0, 0.31)
        np.testing.assert_allclose(plan[k, : len(m), : len(m)].numpy(), pot, atol=1e-8)


# --- host reads: the loop reads the device a few times, with the numbers of a loop that read it always


def _loop_reading_every_half_step(cost, a, b, epsilon, reg_c, reg_r, tol, max_iter):
    """The solver before issue 45, the reference: one batch, the kernels' drift read at every
    half-step and rebuilt for the rows past ``tau``, the checks read every CHECK_EVERY
    iterations, recorded problems dropped once they are a quarter of the batch (the last one left
    iterates as a batch of one)."""
    kernel = unbalanced._Kernel
    free_a, free_b = a <= 0, b <= 0
    phi_c, phi_r = unbalanced.scaling_exponent(reg_c, epsilon), unbalanced.scaling_exponent(reg_r, epsilon)
    tol = max(tol, 4 * torch.finfo(cost.dtype).eps * max(1.0, float(cost.abs().max()) / epsilon))
    g = torch.zeros_like(b)
    f_kernel = kernel.build(cost, g, free_b, torch.where(free_a, 0.0, a.log()), epsilon, phi_c)
    f = f_kernel.update(g)
    g_kernel = kernel.build(cost.transpose(1, 2), f, free_a, torch.where(free_b, 0.0, b.log()), epsilon, phi_r)
    omega = torch.full((len(a), 1), unbalanced.overrelaxation(phi_c, phi_r), dtype=cost.dtype)
    state = dict(index=torch.arange(len(a)), cost=cost, free_a=free_a, free_b=free_b, f=f, g=g, omega=omega)
    state.update(checked_f=f, checked_g=g, checked_error=torch.full((len(a),), math.inf, dtype=cost.dtype))
    kernels = dict(f=f_kernel, g=g_kernel)
    out = unbalanced._SolverState.empty_result(cost, a, b)
    pending = torch.ones(len(a), dtype=torch.bool)

    def refreshed(k, costs, potential, free):
        stale = k.stale(potential, free)
        if bool(stale.any()):
            fresh = kernel.build(costs[stale], potential[stale], free[stale], k.log_mass[stale], epsilon, k.phi)
            k = kernel(*(v.clone() for v in (k.matrix, k.base, k.reference, k.log_mass)), epsilon, k.phi)
            for name in ("matrix", "base", "reference"):
                getattr(k, name)[stale] = getattr(fresh, name)
        return k

    for iteration in range(1, max_iter + 1):
        s = state
        f_prev, g_prev = s["f"], s["g"]
        kernels["g"] = refreshed(kernels["g"], s["cost"].transpose(1, 2), s["f"], s["free_a"])
        s["g"] = torch.lerp(s["g"], kernels["g"].update(s["f"]), s["omega"])
        kernels["f"] = refreshed(kernels["f"], s["cost"], s["g"], s["free_b"])
        s["f"] = torch.lerp(s["f"], kernels["f"].update(s["g"]), s["omega"])
        if iteration % unbalanced.CHECK_EVERY and iteration < max_iter:
            continue
        df = (s["f"] - f_prev).abs().masked_fill(s["free_a"], 0.0).amax(1)
        error = torch.maximum(df, (s["g"] - g_prev).abs().masked_fill(s["free_b"], 0.0).amax(1)) / epsilon
        failed = ~(error <= s["checked_error"]) & (s["omega"][:, 0] > 1.0)
        s["f"] = torch.where(failed[:, None], s["checked_f"], s["f"])
        s["g"] = torch.where(failed[:, None], s["checked_g"], s["g"])
        s["omega"] = torch.where(failed[:, None], 1.0, s["omega"])
        error = error.masked_fill(failed, math.inf)
        s["checked_f"], s["checked_g"], s["checked_error"] = s["f"], s["g"], error
        done = error <= tol
        record = pending & (done if iteration < max_iter else torch.ones_like(done))
        rows = s["index"][record]
        out.f[rows] = s["f"][record].masked_fill(s["free_a"][record], 0.0)
        out.g[rows] = s["g"][record].masked_fill(s["free_b"][record], 0.0)
        out.error[rows], out.iterations[rows], out.converged[rows] = error[record], iteration, done[record]
        pending &= ~record
        if not bool(pending.any()):
            break
        if 4 * int(pending.sum()) <= 3 * len(pending):
            state = {k: v[pending] for k, v in s.items()}
            kernels = {k: v.take(torch.nonzero(pending).flatten()) for k, v in kernels.items()}
            pending = pending[pending]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    "epsilon, reg_c, reg_r, tol, max_iter",
    [
        (0.009, *PRESET_EN, 1e-6, 10_000),  # the "en" preset
        (0.05, math.inf, 0.3, 1e-6, 10_000),  # a hard marginal
        (0.009, 1.0, 2.0, 1e-12, 3000),  # kernels rebuilt along the way
        (0.001, *PRESET_EN, 1e-6, 37),  # rebuilt at most iterations; stopped between two checks
        (1e-4, 1e-3, 1e3, 1e-6, 2000),  # potentials turn NaN, and the safeguard takes them back
    ],
)
def test_lockstep_batches_give_the_numbers_of_a_loop_that_read_the_device_always(
    one_thread, dtype, epsilon, reg_c, reg_r, tol, max_iter
):
    """Bit for bit: the same iterations, potentials and changes per problem, each batch solved
    with others or alone, as the loop that read the drift at every half-step and each check."""
    batches = [_padded(_random_problems(seed, count=count), dtype) for seed, count in ((3, 24), (4, 7), (5, 1))]
    solved = unbalanced.unbalanced_sinkhorn_batches(batches, epsilon, reg_c, reg_r, tol=tol, max_iter=max_iter)
    for (cost, a, b), ours in zip(batches, solved):
        theirs = _loop_reading_every_half_step(cost, a, b, epsilon, reg_c, reg_r, tol, max_iter)
        assert torch.equal(ours.iterations, theirs.iterations) and torch.equal(ours.converged, theirs.converged)
        for name in ("f", "g", "error"):
            mine, reference = getattr(ours, name), getattr(theirs, name)
            assert torch.equal(mine.isnan(), reference.isnan()), name
            assert torch.equal(mine.nan_to_num(), reference.nan_to_num()), name


@pytest.mark.slow
def test_the_device_is_read_a_few_times_whatever_the_batches_and_iterations(monkeypatch):
    """One read of the masses, then one per tick of next_read (a copy of every batch's counts):
    as many for one batch as for eight, at most 5 when every problem stops within 60 iterations,
    and 13 to reach 1,000 (one more if a batch waited for its kernels on the way)."""
    ticks = []
    schedule = unbalanced.next_read
    monkeypatch.setattr(unbalanced, "next_read", lambda tick, max_iter: ticks.append(tick) or schedule(tick, max_iter))

    def reads(problems, *settings, **kwargs):
        ticks.clear()
        counter = DispatchCounter()
        with counter:
            solved = unbalanced.unbalanced_sinkhorn_batches(problems, *(settings or (0.05, *PRESET_EN)), **kwargs)
        return counter.reads, len(ticks) - 1, solved

    problems = _random_problems(seed=6, count=32)
    one = reads([_padded(problems)])
    eight = reads([_padded(problems[k : k + 4]) for k in range(0, 32, 4)])
    assert one[:2] == eight[:2] and one[0] == 1 and one[1] <= 5
    # Balanced transport at epsilon 1e-3: one of these problems iterates past 1,000 (24,150).
    problems = [_padded(_random_problems(seed=8, largest=6, zero_mass=False))]
    slow = reads(problems, 1e-3, math.inf, math.inf, max_iter=1000)
    assert slow[0] == 1 and 13 <= slow[1] <= 14 and not bool(slow[2][0].converged.all())
