r"""Entropic unbalanced optimal transport, batched over padded problems: the generalized Sinkhorn
iteration of Lazy-EMD (Chen et al., IJCAI 2020, Section 5.2), log-domain and over-relaxed.

:func:`unbalanced_sinkhorn` solves a batch of problems (costs (B, n, m), masses (B, n) and (B, m))
for their dual potentials, :func:`unbalanced_sinkhorn_batches` several such batches of different
shapes in lockstep; :func:`unbalanced_plan` turns the potentials into the plans.
"""

from __future__ import annotations

import dataclasses
import math

import torch

__all__ = [
    "CHECK_EVERY",
    "MAX_OVERRELAXATION",
    "REFRESH_SHARE",
    "SOLVER_TOLERANCE",
    "SinkhornResult",
    "next_read",
    "overrelaxation",
    "scaling_exponent",
    "unbalanced_plan",
    "unbalanced_sinkhorn",
    "unbalanced_sinkhorn_batches",
]

SOLVER_TOLERANCE = 1e-6  # largest change of a dual potential over one iteration, in units of epsilon
CHECK_EVERY = 10  # Sinkhorn iterations between convergence checks
MAX_OVERRELAXATION = 1.8  # caps overrelaxation(); the best of 1.5-1.95 for hard marginals on WMT17 pairs
REFRESH_SHARE = 32
"""At each check a kernel rebuilds up to a 32nd of its batch's rows (one at least): a 20th of the
batch's cost over the ten iterations between checks (a row's rebuild costs about 15 of its updates)."""


@dataclasses.dataclass
class SinkhornResult:
    """Dual potentials of a batch of problems: ``P_ij = exp((f_i + g_j - C_ij) / epsilon)``."""

    f: torch.Tensor  # (B, n), 0 where a_i = 0
    g: torch.Tensor  # (B, m), 0 where b_j = 0
    iterations: torch.Tensor  # (B,) iterations run per problem
    error: torch.Tensor  # (B,) last change of the potentials over one iteration, in units of epsilon
    converged: torch.Tensor  # (B,) bool


def scaling_exponent(penalty: float, epsilon: float) -> float:
    r""":math:`\varphi = \lambda / (\lambda + \varepsilon)`: 1 for a hard marginal, 0 for a free one."""
    return 1.0 if math.isinf(penalty) else penalty / (penalty + epsilon)


def overrelaxation(phi_c: float, phi_r: float) -> float:
    r"""Young's optimal SOR factor :math:`2 / (1 + \sqrt{1 - \rho})` for the contraction bound
    :math:`\rho = \varphi_c \varphi_r` of one Sinkhorn iteration, capped at :data:`MAX_OVERRELAXATION`:
    1 (plain Sinkhorn) when a side is free, 1.585 for the "en" preset."""
    return min(2.0 / (1.0 + math.sqrt(1.0 - phi_c * phi_r)), MAX_OVERRELAXATION)


def unbalanced_sinkhorn(
    cost: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    epsilon: float,
    reg_c: float,
    reg_r: float,
    *,
    tol: float = SOLVER_TOLERANCE,
    max_iter: int = 10_000,
) -> SinkhornResult:
    r"""Entropic unbalanced optimal transport for a batch of padded problems (generalized Sinkhorn).

    .. math::

        \min_{P \ge 0}\ \langle C, P \rangle + \varepsilon\, \mathrm{KL}(P \,|\, \mathbf{1}\mathbf{1}^\top)
        + \lambda_c\, \mathrm{KL}(P\mathbf{1} \,|\, a) + \lambda_r\, \mathrm{KL}(P^\top \mathbf{1} \,|\, b),
        \qquad \mathrm{KL}(p \,|\, q) = \textstyle\sum p \log \tfrac{p}{q} - p + q

    (Chizat et al. 2018 [1]; POT's ``sinkhorn_unbalanced`` with ``reg_type="entropy"``, the
    iteration of the Lazy-EMD release). The optimum is :math:`P_{ij} = e^{(f_i + g_j - C_{ij})/\varepsilon}`
    at the fixed point of

    .. math::

        f_i = \varphi_c\, \varepsilon \big(\log a_i - \mathrm{LSE}_j \tfrac{g_j - C_{ij}}{\varepsilon}\big),
        \qquad
        g_j = \varphi_r\, \varepsilon \big(\log b_j - \mathrm{LSE}_i \tfrac{f_i - C_{ij}}{\varepsilon}\big),
        \qquad \varphi = \tfrac{\lambda}{\lambda + \varepsilon}

    (:math:`\varphi = 1` for :math:`\lambda = \infty`, a hard marginal; 0 for :math:`\lambda = 0`).

    *Log-domain, without an exponential per iteration.* Each log-sum-exp is a batched
    matrix-vector product with a kernel :math:`e^{(g^0_j - C_{ij})/\varepsilon - r_i}` built at a
    reference :math:`g^0` and scaled to a largest entry of 1 per row (one kernel per side), rebuilt
    for a problem when its potential has moved more than ``tau * epsilon`` from the reference
    (Schmitzer's absorption [2]): nothing over- or underflows at any epsilon, in float32 too
    (ε = 0.009 on costs up to 2 takes a plain kernel to e^-222), and an iteration costs two ``bmm``.

    *Over-relaxed.* Each update is :math:`f \leftarrow f + \omega (T(g) - f)` with the factor of
    :func:`overrelaxation` (successive over-relaxation of the block Gauss-Seidel dual ascent that
    Sinkhorn is [3]); it has the same fixed point and takes a fifth of the iterations of plain
    Sinkhorn for the "en" preset on WMT17 pairs (42 instead of 217 on average). A problem whose change grew between two checks, or turned
    non-finite, goes back to its potentials of the previous check and on with ω = 1, which
    converges from anywhere (a contraction of rate :math:`\varphi_c \varphi_r` for finite penalties).

    POT solves one problem per call; this solves a padded batch, drops problems as they converge,
    and waits for the device only a few times, whatever the iterations
    (:func:`unbalanced_sinkhorn_batches`, which solves several batches at once).

    Parameters
    ----------
    cost : Tensor, shape (B, n, m)
        Costs; any finite values at padding.
    a, b : Tensor, shapes (B, n) and (B, m)
        Masses, >= 0, 0 at padding; every problem needs some mass on each side.
    epsilon, reg_c, reg_r : float
        :math:`\varepsilon > 0`, :math:`\lambda_c, \lambda_r \in [0, \infty]`.
    tol : float
        Stop a problem when no potential moved more than ``tol * epsilon`` over one iteration
        (checked every :data:`CHECK_EVERY` iterations); floored at the precision of the potentials,
        4 machine epsilons of :math:`\max |C| / \varepsilon` (1e-4 in float32 at ε = 0.009, 1e-13 in float64).
    max_iter : int
        Iterations at most; problems still moving keep their last potentials, ``converged`` False.

    Returns
    -------
    SinkhornResult
        The potentials ``f`` (B, n) and ``g`` (B, m) (0 off the supports), and per problem the
        iterations run, the last change and whether it converged; :func:`unbalanced_plan` gives P.

    References
    ----------
    .. [1] L. Chizat, G. Peyré, B. Schmitzer, F.-X. Vialard. Scaling algorithms for unbalanced
       optimal transport problems. Mathematics of Computation 87, 2018.
    .. [2] B. Schmitzer. Stabilized sparse scaling algorithms for entropy regularized transport
       problems. SIAM J. Sci. Comput. 41, 2019.
    .. [3] A. Thibault, L. Chizat, C. Dossal, N. Papadakis. Overrelaxed Sinkhorn-Knopp algorithm
       for regularized optimal transport. Algorithms 14, 2021.
    """
    return unbalanced_sinkhorn_batches([(cost, a, b)], epsilon, reg_c, reg_r, tol=tol, max_iter=max_iter)[0]


def unbalanced_sinkhorn_batches(
    problems: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    epsilon: float,
    reg_c: float,
    reg_r: float,
    *,
    tol: float = SOLVER_TOLERANCE,
    max_iter: int = 10_000,
) -> list[SinkhornResult]:
    r""":func:`unbalanced_sinkhorn` of several padded batches ``(cost, a, b)``, each of its own
    shape, iterated in lockstep; one result per batch.

    *Few host reads.* Nothing in the loop waits for the device: every problem's checks, its stop,
    the safeguard and the kernels' rebuilds are masks on the device. The host reads how many
    problems still iterate at the ticks of :func:`next_read` only (10, 20, 30, 40, 60, 90, 130, ...:
    each wait at most half the ticks before it), one read for all the batches, which then drop
    their recorded problems. With the check of the masses a call reads the device 6 times when its
    problems stop within 60 iterations (the "en" preset stops WMT17 pairs at 40 or 50), 19 times at
    10,000 iterations, whatever the number of batches and problems.

    *The same numbers.* Each problem takes the iterations and the arithmetic of
    :func:`unbalanced_sinkhorn` on its batch alone, a batch of one once it is its batch's last
    problem iterating (the one product that depends on the batch: ``bmm`` of one matrix rounds
    otherwise than that of a batch). A kernel row whose potential drifted past ``tau`` is rebuilt
    before the half-step that needs it, as by a loop that read the drift at every half-step: before
    each half-step a batch rebuilds as many drifted rows as it needed at most at one half-step
    since the last read, at each check up to :data:`REFRESH_SHARE` of its rows if more; a batch
    with a drifted row left waits ten iterations (its checks stay on the ticks of the others) and
    rebuilds meanwhile. A problem whose potentials are not finite does not hold its batch back:
    its updates are NaN, as from a rebuilt kernel, until the safeguard of its next check takes it
    back.
    """
    masses_missing = [((a > 0).sum(1) == 0).any() | ((b > 0).sum(1) == 0).any() for _, a, b in problems]
    if problems and bool(torch.stack(masses_missing).any()):
        raise ValueError("every problem needs positive mass on both sides (leave empty pairs out)")
    results = [_SolverState.empty_result(cost, a, b) for cost, a, b in problems]
    states = [_SolverState.start(k, cost, a, b, epsilon, reg_c, reg_r, tol) for k, (cost, a, b) in enumerate(problems)]
    tick, read = 0, next_read(0, max_iter)
    while states:
        tick += 1
        checks = tick % CHECK_EVERY == 0
        check = checks or (tick >= max_iter and tick % CHECK_EVERY == max_iter % CHECK_EVERY)
        for state in states:
            state.advance(tick, max_iter, checks=checks, check=check)
        if tick == read:
            read_out = torch.stack([torch.stack([state.pending.sum(), state.peak]) for state in states]).tolist()
            states = [
                state.dropped(count, peak, results[state.batch]) for state, (count, peak) in zip(states, read_out)
            ]
            states = [state for state in states if state is not None]
            read = next_read(tick, max_iter)
    return results


def next_read(tick: int, max_iter: int) -> int:
    """The tick after ``tick`` at which :func:`unbalanced_sinkhorn_batches` reads how many problems
    still iterate: :data:`CHECK_EVERY` ticks later, or half the ticks so far (in whole checks) if
    more, and ``max_iter`` itself (where every problem has stopped unless its batch waited)."""
    after = tick + max(CHECK_EVERY, tick // 2 // CHECK_EVERY * CHECK_EVERY)
    return max_iter if tick < max_iter < after else after


@dataclasses.dataclass
class _Kernel:
    r"""One side's Sinkhorn update :math:`f_i = \varphi \varepsilon (\log a_i - \mathrm{LSE}_j (g_j - C_{ij})/\varepsilon)`
    with a stabilized Gibbs kernel.

    ``matrix`` holds :math:`K_{ij} = e^{(g^0_j - C_{ij})/\varepsilon - r_i}` (0 where :math:`b_j = 0`),
    :math:`r_i = \max_j (g^0_j - C_{ij})/\varepsilon`, so that
    :math:`\mathrm{LSE}_j (g_j - C_{ij})/\varepsilon = r_i + \log \sum_j K_{ij} e^{(g_j - g^0_j)/\varepsilon}`.
    Every row has an entry 1, so the sum stays in :math:`[e^{-\tau}, m e^{\tau}]` while
    :math:`|g - g^0| \le \tau \varepsilon`; :meth:`refresh` rebuilds it beyond that.
    ``base`` is :math:`\varphi \varepsilon (\log a_i - r_i)`, the part of the update fixed with the kernel.
    """

    matrix: torch.Tensor  # (B, n, m)
    base: torch.Tensor  # (B, n)
    reference: torch.Tensor  # (B, m), g0
    log_mass: torch.Tensor  # (B, n), log a_i (0 off the support)
    epsilon: float
    phi: float

    @classmethod
    def build(cls, cost, g, free, log_mass, epsilon, phi) -> _Kernel:
        """The kernel at ``g``; ``free`` (B, m) marks the columns off the support (:math:`b_j = 0`)."""
        exponent = ((g[:, None, :] - cost) / epsilon).masked_fill(free[:, None, :], -math.inf)
        shift = exponent.amax(2)
        matrix = torch.exp(exponent - shift[:, :, None]).contiguous()
        return cls(matrix, phi * epsilon * (log_mass - shift), g, log_mass, epsilon, phi)

    @property
    def tau(self) -> float:
        """Rebuild beyond ``tau`` epsilons of drift: 177 in float64, 22 in float32."""
        return math.log(torch.finfo(self.matrix.dtype).max) / 4

    def update(self, g: torch.Tensor, alone: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The update from ``g``. ``alone``, a mask (B, 1, 1) and its row (1,): that row's product
        taken as a batch of one, as when it is the only problem of its batch (``bmm`` of one matrix
        rounds otherwise than that of a batch)."""
        if self.phi == 0.0:
            # A free marginal (penalty 0): the update is 0 whatever g is. Computed, 0 times the log
            # of a sum that underflowed to 0 is NaN (a padded row of a one-token text at epsilon 1e-3).
            return torch.zeros_like(self.base)
        scale = torch.exp((g - self.reference) / self.epsilon)[:, :, None]
        product = torch.bmm(self.matrix, scale)
        if alone is not None:
            mask, row = alone
            product = torch.where(
                mask, torch.bmm(self.matrix.index_select(0, row), scale.index_select(0, row)), product
            )
        return torch.add(self.base, product.squeeze(2).log_(), alpha=-self.phi * self.epsilon)

    def stale(self, g: torch.Tensor, free: torch.Tensor) -> torch.Tensor:
        """The rows (B,) whose ``g`` moved more than ``tau`` epsilons from the reference on the
        support (or whose reference is not finite): their update needs a rebuilt kernel."""
        drift = (g - self.reference).abs().masked_fill(free, 0.0).amax(1)
        return ~(drift <= self.tau * self.epsilon)

    def refresh(self, cost, g, free, stale: torch.Tensor, rows: int) -> torch.Tensor:
        """Rebuild, at ``g``, the rows ``stale`` (a mask (B,)), at most ``rows`` of them (all of
        them if ``rows`` is the batch); returns the mask of the rows rebuilt."""
        if rows >= len(stale):
            fresh = _Kernel.build(cost, g, free, self.log_mass, self.epsilon, self.phi)
            for name in ("matrix", "base", "reference"):
                new = getattr(fresh, name)
                setattr(self, name, torch.where(stale.view(-1, *(1,) * (new.dim() - 1)), new, getattr(self, name)))
            return stale
        chosen = torch.topk(stale.to(self.base.dtype), rows).indices
        renew = stale.index_select(0, chosen)
        fresh = _Kernel.build(
            cost.index_select(0, chosen),
            g.index_select(0, chosen),
            free.index_select(0, chosen),
            self.log_mass.index_select(0, chosen),
            self.epsilon,
            self.phi,
        )
        for name in ("matrix", "base", "reference"):
            old, new = getattr(self, name), getattr(fresh, name)
            kept = torch.where(renew.view(-1, *(1,) * (new.dim() - 1)), new, old.index_select(0, chosen))
            if name == "reference":  # a potential of the state (the one it was built at): not written
                self.reference = old.index_copy(0, chosen, kept)
            else:
                old.index_copy_(0, chosen, kept)
        return torch.zeros_like(stale).index_copy_(0, chosen, renew)

    def take(self, rows: torch.Tensor) -> _Kernel:
        return dataclasses.replace(
            self, **{k: v.index_select(0, rows) for k, v in vars(self).items() if isinstance(v, torch.Tensor)}
        )


@dataclasses.dataclass
class _SolverState:
    """One batch's problems: costs, masses, potentials, the two stabilized kernels, each problem's
    over-relaxation factor with the potentials and change of its last check, what was recorded of
    it, and the batch's schedule on the device (its iterations, whether it is between the two
    half-steps of one, the tick it moves again at, and the problem that iterates alone).

    Off the supports (padding, zero mass) the potentials hold finite values that nothing reads:
    the kernels give those rows and columns weight 0, and the result sets them to 0. Recorded
    problems iterate on with the others until the batch drops them, their kernels left as they are."""

    batch: int  # which of the caller's batches
    index: torch.Tensor  # (B,) position of each problem in its batch
    cost: torch.Tensor  # (B, n, m)
    free_a: torch.Tensor  # (B, n) bool, a_i = 0
    free_b: torch.Tensor  # (B, m) bool
    f: torch.Tensor  # (B, n)
    g: torch.Tensor  # (B, m)
    omega: torch.Tensor  # (B, 1) over-relaxation factor
    checked_f: torch.Tensor  # (B, n) potentials at the last check
    checked_g: torch.Tensor  # (B, m)
    checked_error: torch.Tensor  # (B,) change at the last check
    start_f: torch.Tensor  # (B, n) potentials before the iteration under way at a check
    start_g: torch.Tensor  # (B, m)
    pending: torch.Tensor  # (B,) bool, not recorded yet
    alone: torch.Tensor  # (B, 1, 1) bool, the problem left alone (the batch's last one pending)
    alone_row: torch.Tensor  # (1,) its row
    result: SinkhornResult  # (B, ...) what was recorded
    tol: torch.Tensor  # () the tolerance, floored (in the dtype of the costs)
    iteration: torch.Tensor  # () iterations done
    halfway: torch.Tensor  # () bool: g moved, f not yet, in the iteration under way
    resume: torch.Tensor  # () the tick the batch moves again at (it waits for its kernels before)
    peak: torch.Tensor  # () the most kernel rows due at one half-step since the last read
    epsilon: float
    f_kernel: _Kernel  # gives f's update from g
    g_kernel: _Kernel  # gives g's update from f
    rebuild_rows: int = 0  # kernel rows rebuilt at most before every half-step (more at checks)

    @staticmethod
    def empty_result(cost, a, b) -> SinkhornResult:
        size = cost.shape[0]
        return SinkhornResult(
            f=torch.zeros_like(a),
            g=torch.zeros_like(b),
            iterations=torch.zeros(size, dtype=torch.long, device=cost.device),
            error=torch.full((size,), math.inf, dtype=cost.dtype, device=cost.device),
            converged=torch.zeros(size, dtype=torch.bool, device=cost.device),
        )

    @classmethod
    def start(cls, batch, cost, a, b, epsilon, reg_c, reg_r, tol) -> _SolverState:
        free_a, free_b = ~(a > 0), ~(b > 0)
        phi_c, phi_r = scaling_exponent(reg_c, epsilon), scaling_exponent(reg_r, epsilon)
        f, g = torch.zeros_like(a), torch.zeros_like(b)
        f_kernel = _Kernel.build(cost, g, free_b, torch.where(free_a, 0.0, a.log()), epsilon, phi_c)
        f = f_kernel.update(g)  # a plain first step
        g_kernel = _Kernel.build(cost.transpose(1, 2), f, free_a, torch.where(free_b, 0.0, b.log()), epsilon, phi_r)
        # The precision of the potentials, 4 machine epsilons of max |C| / epsilon, floors the tolerance.
        floor = (cost.abs().amax().double() / epsilon).clamp_min(1.0) * (4 * torch.finfo(cost.dtype).eps)
        size, device = cost.shape[0], cost.device
        zero = torch.zeros((), dtype=torch.long, device=device)
        return cls(
            batch=batch,
            index=torch.arange(size, device=device),
            cost=cost,
            free_a=free_a,
            free_b=free_b,
            f=f,
            g=g,
            omega=torch.full((size, 1), overrelaxation(phi_c, phi_r), dtype=cost.dtype, device=device),
            checked_f=f,
            checked_g=g,
            checked_error=torch.full((size,), math.inf, dtype=cost.dtype, device=device),
            start_f=f,
            start_g=g,
            pending=torch.ones(size, dtype=torch.bool, device=device),
            alone=torch.zeros((size, 1, 1), dtype=torch.bool, device=device),
            alone_row=torch.zeros(1, dtype=torch.long, device=device),
            result=cls.empty_result(cost, a, b),
            tol=floor.clamp_min(tol).to(cost.dtype),
            iteration=zero,
            halfway=torch.zeros((), dtype=torch.bool, device=device),
            resume=zero,
            peak=zero,
            epsilon=epsilon,
            f_kernel=f_kernel,
            g_kernel=g_kernel,
        )

    def advance(self, tick: int, max_iter: int, *, checks: bool, check: bool) -> None:
        """One tick: one over-relaxed Sinkhorn iteration (g towards its update from f, then f from
        g), or the half of it left, each half-step unless a kernel row must be rebuilt first.
        Before each half-step up to :attr:`rebuild_rows` drifted rows are rebuilt, at the
        ``checks`` ticks up to :data:`REFRESH_SHARE` of the batch if more; at a ``check`` tick the
        iteration is checked."""
        moving = self.resume <= tick
        if check:
            self.start_f = torch.where(self.halfway, self.start_f, self.f)
            self.start_g = torch.where(self.halfway, self.start_g, self.g)
        alone = (self.alone, self.alone_row) if len(self.pending) > 1 else None
        rows = max(self.rebuild_rows, -(-len(self.pending) // REFRESH_SHARE)) if checks else self.rebuild_rows
        g_next = ~self.halfway
        self.g, g_moves, g_held = self._half_step(
            self.g_kernel, self.cost.transpose(1, 2), self.f, self.free_a, self.g, g_next, moving, rows, alone
        )
        f_next = self.halfway | g_moves
        self.f, f_moves, f_held = self._half_step(
            self.f_kernel, self.cost, self.g, self.free_b, self.f, f_next, moving, rows, alone
        )
        self.halfway = f_next & ~f_moves
        self.iteration = self.iteration + f_moves
        # Waiting ten ticks keeps this batch's checks on the ticks of the others.
        self.resume = torch.where(moving & (g_held | f_held), tick + CHECK_EVERY, self.resume)
        if check:
            self._check(f_moves & ((self.iteration % CHECK_EVERY == 0) | (self.iteration == max_iter)), max_iter)

    def _half_step(self, kernel: _Kernel, cost, g, free, f, next_half, moving, rows, alone):
        """``f`` towards its update from ``g`` by ``kernel`` if this half-step is the batch's next
        (``next_half``) and it is ``moving``, unless a problem still iterating has a kernel row
        drifted from ``g`` left after rebuilding up to ``rows`` of them. Returns ``f``, whether it
        moved, and whether it waits for a rebuild."""
        # Where g is not finite the kernel takes g as its reference, as a rebuild would: the update
        # is then NaN, as from a rebuilt kernel, and the problem iterates void until the safeguard
        # takes it back; its kernel is rebuilt after that. It does not hold the batch back.
        entries = (g - g) == 0
        kernel.reference = torch.where(entries, kernel.reference, g)
        due = kernel.stale(g, free) & entries.logical_or_(free).all(1) & self.pending & next_half
        self.peak = torch.maximum(self.peak, due.sum())
        if rows:
            due = due & ~kernel.refresh(cost, g, free, due, rows)
        held = due.any()
        moves = moving & next_half & ~held
        return torch.where(moves, torch.lerp(f, kernel.update(g, alone), self.omega), f), moves, held

    def _check(self, checking: torch.Tensor, max_iter: int) -> None:
        """At a check (``checking``, a scalar: the batch just ended an iteration due for one): the
        safeguard, then problems within the tolerance (all at ``max_iter``) are recorded."""
        error = self.change(self.start_f, self.start_g) / self.epsilon
        # Problems whose change grew since the last check (or is not finite) while over-relaxed go
        # back to their last checked potentials with omega = 1; their change counts as inf.
        failed = checking & ~(error <= self.checked_error) & (self.omega[:, 0] > 1.0)
        self.f = torch.where(failed[:, None], self.checked_f, self.f)
        self.g = torch.where(failed[:, None], self.checked_g, self.g)
        self.omega = torch.where(failed[:, None], 1.0, self.omega)
        error = error.masked_fill(failed, math.inf)
        self.checked_f = torch.where(checking, self.f, self.checked_f)
        self.checked_g = torch.where(checking, self.g, self.checked_g)
        self.checked_error = torch.where(checking, error, self.checked_error)
        done = error <= self.tol
        record = checking & self.pending & (done | (self.iteration >= max_iter))
        out = self.result
        out.f = torch.where(record[:, None], self.f.masked_fill(self.free_a, 0.0), out.f)
        out.g = torch.where(record[:, None], self.g.masked_fill(self.free_b, 0.0), out.g)
        out.error = torch.where(record, error, out.error)
        out.iterations = torch.where(record, self.iteration, out.iterations)
        out.converged = torch.where(record, done, out.converged)
        self.pending = self.pending & ~record
        if len(self.pending) > 1:
            self.alone = self.alone | (self.pending & (self.pending.sum() == 1)).view(-1, 1, 1)
            self.alone_row = self.alone.view(-1).to(torch.uint8).argmax().view(1)

    def change(self, f_prev: torch.Tensor, g_prev: torch.Tensor) -> torch.Tensor:
        """The largest change of a potential on the supports since ``f_prev, g_prev``, (B,)."""
        df = (self.f - f_prev).abs().masked_fill(self.free_a, 0.0).amax(1)
        dg = (self.g - g_prev).abs().masked_fill(self.free_b, 0.0).amax(1)
        return torch.maximum(df, dg)

    def dropped(self, pending: int, peak: int, out: SinkhornResult) -> _SolverState | None:
        """After a read that found ``pending`` problems iterating: the state without its recorded
        problems once they are a quarter of it (copying the state's tensors to drop them costs more
        than a few iterations), ``None`` without any left; what is dropped goes to ``out``. Until
        the next read it rebuilds before every half-step as many kernel rows as were due at most at
        one half-step since the last (``peak``): a batch whose potentials drift past ``tau``
        between checks does not wait for them."""
        self.rebuild_rows, self.peak = peak, torch.zeros_like(self.peak)
        size = len(self.pending)
        if 4 * pending > 3 * size:
            return self
        for name in ("f", "g", "iterations", "error", "converged"):
            getattr(out, name).index_copy_(0, self.index, getattr(self.result, name))
        if not pending:
            return None
        rows = torch.sort(self.pending.to(torch.uint8), descending=True, stable=True).indices[:pending]
        tensors = {
            k: v.index_select(0, rows)
            for k, v in vars(self).items()
            if isinstance(v, torch.Tensor) and v.dim() and k != "alone_row"
        }
        result = SinkhornResult(**{k: v.index_select(0, rows) for k, v in vars(self.result).items()})
        kernels = {"f_kernel": self.f_kernel.take(rows), "g_kernel": self.g_kernel.take(rows)}
        return dataclasses.replace(self, **tensors, result=result, **kernels, alone_row=torch.zeros_like(rows[:1]))


def unbalanced_plan(cost: torch.Tensor, a: torch.Tensor, b: torch.Tensor, solved: SinkhornResult, epsilon: float):
    r"""The plan :math:`P_{ij} = e^{(f_i + g_j - C_{ij})/\varepsilon}` of solved problems, on the
    supports of a and b, 0 elsewhere.

    ``cost`` (B, n, m), ``a`` (B, n), ``b`` (B, m) and ``epsilon`` as given to
    :func:`unbalanced_sinkhorn`, ``solved`` its result; returns (B, n, m), the dtype of ``cost``.
    """
    exponent = (solved.f[:, :, None] + solved.g[:, None, :] - cost) / epsilon
    live = (a > 0)[:, :, None] & (b > 0)[:, None, :]
    return torch.exp(exponent.masked_fill(~live, -math.inf))
