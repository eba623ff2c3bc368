r"""Lazy Earth Mover's Distance (Chen et al., IJCAI 2020) as a plain function: the cost of the
optimal *unbalanced* transport plan between the tokens of a prediction (masses a) and of a
reference (masses b), Definition 4 and Eq. (11):

.. math::

    P^* = \arg\min_{P \ge 0} \langle C, P \rangle + \varepsilon\, \mathrm{KL}(P \,|\, \mathbf{1})
    + \lambda_c\, \mathrm{KL}(P\mathbf{1} \,|\, a) + \lambda_r\, \mathrm{KL}(P^\top\mathbf{1} \,|\, b),
    \qquad \text{lazy\_emd} = \langle C, P^* \rangle,\quad C_{ij} = 1 - \cos(x_i, y_j)

solved for all pairs at once by :func:`moverkit.ot.unbalanced.unbalanced_sinkhorn_batches`. Lower is closer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import closing

import torch
import torch.nn.functional as F

from moverkit._core import check_idf, checks
from moverkit._core.base import ConvergenceWarning, cuda_plan, warn_user
from moverkit._core.call import MetricCall, PairOptions, PreparedChunk, chunks
from moverkit._core.encoding import check_lang, count_zero_weight_texts, primary_language, warn_zero_weights
from moverkit._core.maths import self_cosine_one
from moverkit.functional.signature import metric_function
from moverkit.ot import unbalanced_plan
from moverkit.ot.unbalanced import SOLVER_TOLERANCE, unbalanced_sinkhorn_batches

__all__ = ["lazy_emd"]

PENALTY_PRESETS = {
    # Chen et al. (2020), Section 5.2: (lambda_c, lambda_r) per target language, with epsilon = 0.009
    # and BERTScore's default model of the language (roberta-large for English).
    "en": (0.23, 0.31),  # tuned on WMT18 et-en
    "zh": (0.018, 0.97),  # tuned on WMT19 en-zh
    "other": (0.009, 0.95),  # tuned on WMT19 en-cs, for every other target language
}
DEFAULT_EPSILON = 0.009  # Section 5.2, and the authors' release (Lazy-EMD/score.py)
MAX_EPSILON = 1.0
"""The largest admissible epsilon. Costs lie in [0, 2]: beyond 1 the kernel exp(-C/epsilon) varies by less
than a factor e^2 over all costs, the plan is mostly entropy rather than transport, and its mass (so the
score) grows towards L_p L_r times the mean cost (epsilon = 1e6 gave 14.45 for a near-identical pair;
see :func:`score_bound`)."""
MAX_ITER = 100_000
"""The most Sinkhorn iterations ``max_iter`` takes, ten times the default, as twmd caps its
``sinkhorn_iterations``. Each iteration is a pass over every pair's cost matrix, so the time grows
linearly (20 WMT17 pairs at epsilon 1e-6 on one CPU core: 17.5 s at 10,000 iterations, 96 s at
100,000, still short of the plan; at the paper's epsilon 10,000 are plenty); 10^12 would never end."""
EMPTY_SCORE = 1.0  # a pair with no scored token on a side: 1 - (bert-score's precision 0)
SOLVER_BATCH_ELEMENTS = 1 << 20
"""Entries of one padded (pairs x prediction x reference) float64 cost tensor per solver batch: the
solver keeps a few tensors of that size (costs, two kernels) over its tens of iterations, and a
smaller batch lets the pairs that converge early leave sooner."""
SOLVER_WAVE_ELEMENTS = 1 << 25
"""Entries of the padded cost tensors of the batches solved together (:func:`solve_waves`; about
1 GB in float64 with their kernels): a wave reads the device a few times, whatever its batches."""
CUDA_SOLVER_BATCH_ELEMENTS = 1 << 24
"""Under the CUDA plan (:func:`~moverkit._core.base.cuda_plan`) the solver batches are merged, padded
to the widest, up to this many entries (1,000 WMT17 pairs: one batch of 10M entries instead of 8 of
1.3M in all): a GPU's Sinkhorn iteration costs a few dozen kernel launches per batch and next to
nothing per entry. Their float64 scores then move in the last bits (other shapes), as on a GPU."""


@metric_function()
def lazy_emd(
    call: MetricCall,
    *,
    reg_c: float | None = None,
    reg_r: float | None = None,
    epsilon: float = DEFAULT_EPSILON,
    max_iter: int = 10_000,
    idf: bool | dict = False,
) -> dict:
    """Lazy-EMD of each prediction against its reference(s).

    The arguments and the result are those of ``moverkit.load("lazy_emd").compute`` (documented
    in its card): ``{"lazy_emd": [one float >= 0 per prediction, lower is closer, 1.0 for an empty
    side], "hashcode": str}``, plus ``"alignment"`` with ``return_alignment``. With several
    references per prediction, the lowest distance is kept. ``lang`` chooses the penalty preset
    where ``reg_c`` or ``reg_r`` is not given (:func:`resolve_params`). With ``rescale_with_baseline``,
    each distance d becomes d / b, b the mean distance of unrelated sentence pairs: 0 for identical
    texts, about 1 for unrelated ones, still lower is closer (:func:`~moverkit._core.call.baseline.rescale`).
    """
    params = resolve_params(call.request.lang, reg_c, reg_r, epsilon, max_iter)
    idf = check_idf(idf)
    with closing(chunks(call, idf=idf)) as parts:
        return call.close([_scores(chunk, params=params, idf=idf) for chunk in parts])


def _scores(chunk: PreparedChunk, *, params, idf) -> dict:
    """The result of one chunk of a call (:func:`~moverkit._core.call.streaming.chunks`)."""
    data = chunk.pairs(PairOptions(idf=idf))
    live = pairs_with_mass(data)
    results, best = chunk.results(
        pair_scores(data, live, params),
        ("lazy_emd",),
        data,
        hash_params=params,
        lower_is_better=True,
    )
    if chunk.return_alignment:
        results["alignment"] = [alignment(data, int(k), bool(live[k]), params) for k in best]
    return results


def resolve_params(lang, reg_c, reg_r, epsilon, max_iter) -> dict:
    """The penalties (an explicit value wins over the ``lang`` preset), epsilon and max_iter,
    checked, in hashcode order. ``float("inf")`` is a hard marginal, 0 a free one.

    ``lang`` is a language code (any case, subtags allowed: :func:`~moverkit._core.encoding.request.check_lang`)
    or ``"other"``; a name that is no code (``"klingon"``) is refused. The preset is that of its
    language without subtags (``"zh-hans"`` takes ``"zh"``'s, ``"en-sci"`` ``"en"``'s); a real code
    without a tuned preset (``"de"``, ``"fi"``, ``"tlh"``) takes ``"other"``'s, the paper's choice for
    every target language but English and Chinese (Section 5.2)."""
    preset = PENALTY_PRESETS.get(primary_language(check_lang(lang)), PENALTY_PRESETS["other"])
    hint = " (0: a free marginal, inf: a hard one)"
    reg_c = preset[0] if reg_c is None else checks.nonnegative_float("reg_c", reg_c, allow_inf=True, hint=hint)
    reg_r = preset[1] if reg_r is None else checks.nonnegative_float("reg_r", reg_r, allow_inf=True, hint=hint)
    epsilon = checks.finite_positive_float("epsilon", epsilon, maximum=MAX_EPSILON, hint=" (the paper uses 0.009)")
    max_iter = checks.positive_int(
        "max_iter",
        max_iter,
        maximum=MAX_ITER,
        hint=" (the default 10,000 reaches the plan at the paper's epsilon; more only take longer)",
    )
    return {"reg_c": reg_c, "reg_r": reg_r, "epsilon": epsilon, "max_iter": max_iter}


def score_bound(n_pred: int, n_ref: int, epsilon: float, reg_c: float, reg_r: float) -> float:
    r"""An upper bound of lazy_emd for a pair of ``n_pred`` and ``n_ref`` scored tokens: :math:`2M`,
    with :math:`M` a bound of the mass of :math:`P^*` (costs lie in [0, 2]).

    :math:`M = 1` when a penalty is infinite (that marginal holds exactly). Otherwise, scaling
    :math:`P^*` by :math:`t` cannot lower the objective, so its derivative at :math:`t = 1` is 0:
    :math:`\langle C, P^* \rangle = -\varepsilon \sum P^* \log P^* - \lambda_c \sum_i p_i \log(p_i/a_i)
    - \lambda_r \sum_j q_j \log(q_j / b_j)` (:math:`p, q` its marginals, mass :math:`m`). With
    :math:`-\sum P \log P \le m \log(N/m)` (:math:`N = n_p n_r` entries) and the log-sum inequality
    :math:`\sum_i p_i \log(p_i / a_i) \ge m \log m`,
    :math:`0 \le \langle C, P^* \rangle \le m\,(\varepsilon \log N - (\varepsilon + \lambda_c + \lambda_r) \log m)`,
    so :math:`m \le M = N^{\varepsilon / (\varepsilon + \lambda_c + \lambda_r)}` (1.23 at the "en"
    preset for two 512-token texts, :math:`N` with both penalties 0)."""
    if math.isinf(reg_c) or math.isinf(reg_r):
        return 2.0
    return 2.0 * float(n_pred * n_ref) ** (epsilon / (epsilon + reg_c + reg_r))


def cosine_cost(pred, ref, same: torch.Tensor) -> torch.Tensor:
    """C_ij = 1 - cos(x_i, y_j) of padded unit vectors, float64, shape (B, n, m); in [0, 2] (a
    float32 dot product of unit vectors can pass 1 by a rounding error: cut back, so that C >= 0).
    A token's cost to itself is 0 in the pairs whose sides are the ``same`` text (B,), also where
    centering made its vector zero (:func:`~moverkit._core.maths.matching.self_cosine_one`)."""
    # b = pairs, p = prediction tokens, r = reference tokens, d = embedding dimension
    cosine = torch.einsum("bpd,brd->bpr", pred.vectors, ref.vectors).double()
    return 1.0 - self_cosine_one(cosine.clamp(-1.0, 1.0), same, pred.mask)


def masses(weights: torch.Tensor) -> torch.Tensor:
    """Token weights (B, L) scaled to sum 1 per text (the paper's normalized w), float64."""
    weights = weights.double()
    return weights / weights.sum(1, keepdim=True).clamp_min(1e-300)


def problem(data, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Costs and masses of the pairs ``pairs`` (each with mass on both sides), padded:
    (B, n, m), (B, n), (B, m)."""
    pred, ref = data.pad_pairs(pairs)
    on_device = pairs.to(data.pred_index.device, non_blocking=True)
    same = data.pred_index[on_device] == data.ref_index[on_device]
    return cosine_cost(pred, ref, same), masses(pred.weights), masses(ref.weights)


def solve_pairs(data, pairs: torch.Tensor, params: dict):
    r"""Costs, solution and plan of the pairs ``pairs`` (each with mass on both sides).

    Every pair, a text against itself included, takes the entropic plan of Eq. (11), as the
    release's ``sinkhorn_unbalanced`` does: its cost is the metric's value, not the exact transport.
    A text against itself therefore scores a little above 0 (the plan blurs mass onto similar
    tokens: 1.7e-4 on average over 40 WMT17 references at the "en" preset, up to 8.7e-4), which
    measures epsilon as well as the text, and is what the definition gives."""
    ((_, cost, solved, plan),) = solve_waves(data, [pairs], params)
    return cost, solved, plan


def solve_waves(data, batches: Iterable[torch.Tensor], params: dict) -> Iterator[tuple]:
    """``(pairs, cost, solution, plan)`` of each batch of pairs of ``batches`` (:func:`solve_pairs`),
    the batches solved together (:func:`~moverkit.ot.unbalanced.unbalanced_sinkhorn_batches`: a few
    reads of the device whatever their number) in waves of :data:`SOLVER_WAVE_ELEMENTS` padded
    entries. Under the CUDA plan consecutive batches are merged into one, padded to the widest, up
    to :data:`CUDA_SOLVER_BATCH_ELEMENTS` entries."""
    merge = cuda_plan(data.pred_index.device)
    wave, group, entries = [], [], 0
    for pairs in batches:
        batch = (pairs, *problem(data, pairs))
        if group and not (merge and padded_entries(group + [batch]) <= CUDA_SOLVER_BATCH_ELEMENTS):
            wave.append(merged(group))
            group, entries = [], entries + wave[-1][1].numel()
            if entries >= SOLVER_WAVE_ELEMENTS:
                yield from _solved(wave, params)
                wave, entries = [], 0
        group.append(batch)
    if group:
        wave.append(merged(group))
    yield from _solved(wave, params)


def padded_entries(group: list[tuple]) -> int:
    """Entries of the costs of the batches ``group`` (pairs, cost, a, b) padded to one shape."""
    return (
        sum(len(pairs) for pairs, *_ in group)
        * max(c.shape[1] for _, c, _, _ in group)
        * max(c.shape[2] for _, c, _, _ in group)
    )


def merged(group: list[tuple]) -> tuple:
    """The batches ``group`` (pairs, cost, a, b) as one, padded to the widest (zero costs and masses)."""
    if len(group) == 1:
        return group[0]
    n, m = max(c.shape[1] for _, c, _, _ in group), max(c.shape[2] for _, c, _, _ in group)
    return (
        torch.cat([pairs for pairs, *_ in group]),
        torch.cat([F.pad(c, (0, m - c.shape[2], 0, n - c.shape[1])) for _, c, _, _ in group]),
        torch.cat([F.pad(a, (0, n - a.shape[1])) for _, _, a, _ in group]),
        torch.cat([F.pad(b, (0, m - b.shape[1])) for _, _, _, b in group]),
    )


def _solved(wave: list[tuple], params: dict) -> Iterator[tuple]:
    problems = [(cost, a, b) for _, cost, a, b in wave]
    solved = unbalanced_sinkhorn_batches(
        problems, params["epsilon"], params["reg_c"], params["reg_r"], max_iter=params["max_iter"]
    )
    for (pairs, cost, a, b), result in zip(wave, solved):
        yield pairs, cost, result, unbalanced_plan(cost, a, b, result, params["epsilon"])


def pair_scores(data, live: torch.Tensor, params: dict) -> torch.Tensor:
    """lazy_emd of every pair, float64, shape (n_pairs,); :data:`EMPTY_SCORE` for the pairs not
    ``live`` (no mass on a side). Warns once if some pairs stopped at ``max_iter``; a score above
    :func:`score_bound` (which the optimal plan cannot exceed: the iterations stopped far from it,
    at a tiny epsilon) is an error naming the settings, never a number."""
    on = data.pred_index.device
    scores = torch.full((len(data.pred_index),), EMPTY_SCORE, dtype=torch.float64, device=on)
    # Counts and maxima stay on the device, read once after the last batch (no batch waits for it).
    stalled = torch.zeros((), dtype=torch.float64, device=on)
    worst = torch.zeros((), dtype=torch.float64, device=on)
    beyond = torch.zeros((), dtype=torch.float64, device=on)
    bounds, highest = [], []  # per batch: its bound, the highest of its scores over it (or -inf)
    batches = data.batches(pairs=torch.nonzero(live).flatten(), max_elements=SOLVER_BATCH_ELEMENTS)
    for pairs, cost, solved, plan in solve_waves(data, batches, params):
        values = (plan * cost).sum((1, 2))
        scores[pairs.to(on, non_blocking=True)] = values
        stalled += (~solved.converged).sum()
        worst = torch.maximum(worst, solved.error.max().double())
        # The padded shape bounds every pair's token counts, and the bound grows with them.
        bounds.append(score_bound(cost.shape[1], cost.shape[2], params["epsilon"], params["reg_c"], params["reg_r"]))
        over = ~(values <= bounds[-1])  # NaN included
        beyond += over.sum()
        highest.append(torch.where(over, values.nan_to_num(math.inf), -math.inf).max())
    stalled, worst, beyond, n_live, *highest = torch.stack([stalled, worst, beyond, live.sum(), *highest]).tolist()
    if beyond:
        top = max(zip(highest, bounds))  # a batch with none gives -inf
        raise ValueError(
            f"lazy_emd: {int(beyond)} of {int(n_live)} pairs scored above the bound of the transport plan "
            f"({top[0]:.3g} > {top[1]:.3g}): the Sinkhorn iterations stopped far from the plan at "
            f"epsilon={params['epsilon']:g}, reg_c={params['reg_c']:g}, reg_r={params['reg_r']:g}, "
            f"max_iter={params['max_iter']}. Raise epsilon (the paper uses {DEFAULT_EPSILON}) or max_iter."
        )
    if stalled:
        warn_user(
            f"lazy_emd: the Sinkhorn iterations did not converge for {int(stalled)} of {int(n_live)} pairs "
            f"within max_iter={params['max_iter']} (their potentials still moved {worst:.1e} epsilons per "
            f"iteration, tolerance {SOLVER_TOLERANCE:g}); their scores are approximate. Raise max_iter, or "
            f"raise epsilon (now {params['epsilon']:g}), or use finite penalties reg_c, reg_r (now "
            f"{params['reg_c']:g}, {params['reg_r']:g}): hard marginals (inf) converge slowest.",
            ConvergenceWarning,
        )
    return scores


def pairs_with_mass(data) -> torch.Tensor:
    """Whether each pair has a scored token of positive weight on both sides (bool, (n_pairs,)).
    Warns when a text has tokens but all its weights are 0 (IDF fitted on too few references)."""
    index = data.clouds.text_index()
    live = torch.ones(len(data.pred_index), dtype=torch.bool, device=index.device)
    for texts, weights in ((data.pred_index, data.pred_weights), (data.ref_index, data.ref_weights)):
        mass = torch.zeros(len(data.clouds.texts), dtype=torch.float64, device=index.device)
        live &= mass.index_add_(0, index, weights.double())[texts] > 0
    warn_zero_weights(*count_zero_weight_texts(data), f"their pairs score {EMPTY_SCORE}, like empty texts")
    return live


def alignment(data, pair: int, live: bool, params: dict) -> dict:
    """Tokens of a pair (special tokens left out), its cost matrix and plan, rows = prediction tokens.
    The plan of a pair that is not ``live`` (no mass on a side) is all 0."""
    pairs = torch.tensor([pair], device=data.pred_index.device)
    pred_tokens = data.clouds.scored_tokens(int(data.pred_index[pair]))
    ref_tokens = data.clouds.scored_tokens(int(data.ref_index[pair]))
    n, m = len(pred_tokens), len(ref_tokens)
    if live:
        cost, _, plan = solve_pairs(data, pairs, params)
    else:
        cost = cosine_cost(*data.pad_pairs(pairs), data.pred_index[pairs] == data.ref_index[pairs])
        plan = torch.zeros_like(cost)
    return {
        "prediction_tokens": pred_tokens,
        "reference_tokens": ref_tokens,
        "cost": cost[0, :n, :m].cpu().tolist(),
        "plan": plan[0, :n, :m].cpu().tolist(),
    }
