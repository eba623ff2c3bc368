r"""Lazy Earth Mover's Distance (Chen et al., IJCAI 2020) as a plain function: the cost of the
optimal *unbalanced* transport plan between the tokens of a prediction (masses a) and of a
reference (masses b), Definition 4 and Eq. (11):

.. math::

    P^* = \arg\min_{P \ge 0} \langle C, P \rangle + \varepsilon\, \mathrm{KL}(P \,|\, \mathbf{1})
    + \lambda_c\, \mathrm{KL}(P\mathbf{1} \,|\, a) + \lambda_r\, \mathrm{KL}(P^\top\mathbf{1} \,|\, b),
    \qquad \text{lazy\_emd} = \langle C, P^* \rangle,\quad C_{ij} = 1 - \cos(x_i, y_j)

solved for all pairs at once by :func:`moverkit.ot.unbalanced_sinkhorn`. Lower is closer.
"""

from __future__ import annotations

import warnings

import torch

from moverkit._core import best_per_group, checks, pair_hash, prepare_pairs
from moverkit.ot import transport_plan, unbalanced_sinkhorn
from moverkit.ot.unbalanced import SOLVER_TOLERANCE

__all__ = ["lazy_emd"]

PENALTY_PRESETS = {
    # Chen et al. (2020), Section 5.2: (lambda_c, lambda_r) per target language, with epsilon = 0.009
    # and BERTScore's default model of the language (roberta-large for English).
    "en": (0.23, 0.31),  # tuned on WMT18 et-en
    "zh": (0.018, 0.97),  # tuned on WMT19 en-zh
    "other": (0.009, 0.95),  # tuned on WMT19 en-cs, for every other target language
}
DEFAULT_EPSILON = 0.009  # Section 5.2, and the authors' release (Lazy-EMD/score.py)
EMPTY_SCORE = 1.0  # a pair with no scored token on a side: 1 - (bert-score's precision 0)
SOLVER_BATCH_ELEMENTS = 1 << 20
"""Entries of one padded (pairs x prediction x reference) float64 cost tensor per solve: the solver
keeps a few tensors of that size (costs, two kernels) over its tens of iterations, and a smaller
batch lets the pairs that converge early leave sooner."""


def lazy_emd(
    predictions,
    references,
    *,
    lang: str = "en",
    reg_c: float | None = None,
    reg_r: float | None = None,
    epsilon: float = DEFAULT_EPSILON,
    max_iter: int = 10_000,
    model_type: str | None = None,
    num_layers: int | None = None,
    idf: bool | dict = False,
    batch_size: int = 64,
    device: str | None = None,
    verbose: bool = False,
    centering: str = "none",
    centering_stats=None,
    max_length: int | None = None,
    return_alignment: bool = False,
) -> dict:
    """Lazy-EMD of each prediction against its reference(s).

    The arguments and the result are those of ``moverkit.load("lazy_emd").compute`` (documented
    in its card): ``{"lazy_emd": [one float >= 0 per prediction, lower is closer, 1.0 for an empty
    side], "hashcode": str}``, plus ``"alignment"`` with ``return_alignment``. With several
    references per prediction, the lowest distance is kept.
    """
    params = resolve_params(lang, reg_c, reg_r, epsilon, max_iter)
    checks.optional_positive_int("max_length", max_length)
    data = prepare_pairs(
        predictions,
        references,
        model_type=model_type,
        num_layers=num_layers,
        device=device,
        batch_size=batch_size,
        max_length=max_length,
        verbose=verbose,
        idf=idf,
        centering=centering,
        centering_stats=centering_stats,
    )
    live = pairs_with_mass(data)
    scores = pair_scores(data, live, params)
    best, which = best_per_group(scores, data.group, data.n_predictions, lower_is_better=True)
    results = {
        "lazy_emd": best.tolist(),
        "hashcode": pair_hash("lazy_emd", data, **params),
    }
    if return_alignment:
        results["alignment"] = [alignment(data, int(k), bool(live[k]), params) for k in which]
    return results


def resolve_params(lang, reg_c, reg_r, epsilon, max_iter) -> dict:
    """The penalties (an explicit value wins over the ``lang`` preset), epsilon and max_iter,
    checked, in hashcode order. ``float("inf")`` is a hard marginal, 0 a free one."""
    lang = checks.nonempty_str("lang", lang, hint=' (a language code such as "en", "zh" or "other")')
    preset = PENALTY_PRESETS.get(lang, PENALTY_PRESETS["other"])
    hint = " (0: a free marginal, inf: a hard one)"
    reg_c = preset[0] if reg_c is None else checks.nonnegative_float("reg_c", reg_c, allow_inf=True, hint=hint)
    reg_r = preset[1] if reg_r is None else checks.nonnegative_float("reg_r", reg_r, allow_inf=True, hint=hint)
    epsilon = checks.finite_positive_float("epsilon", epsilon, hint=" (the paper uses 0.009)")
    return {"reg_c": reg_c, "reg_r": reg_r, "epsilon": epsilon, "max_iter": checks.positive_int("max_iter", max_iter)}


def cosine_cost(pred, ref) -> torch.Tensor:
    """C_ij = 1 - cos(x_i, y_j) of padded unit vectors, float64, shape (B, n, m); in [0, 2] (a
    float32 dot product of unit vectors can pass 1 by a rounding error: cut back, so that C >= 0)."""
    # b = pairs, p = prediction tokens, r = reference tokens, d = embedding dimension
    cosine = torch.einsum("bpd,brd->bpr", pred.vectors, ref.vectors).double()
    return 1.0 - cosine.clamp(-1.0, 1.0)


def masses(weights: torch.Tensor) -> torch.Tensor:
    """Token weights (B, L) scaled to sum 1 per text (the paper's normalized w), float64."""
    weights = weights.double()
    return weights / weights.sum(1, keepdim=True).clamp_min(1e-300)


def solve_pairs(data, pairs: torch.Tensor, params: dict):
    """Costs, masses, solution and plan of the pairs ``pairs`` (each with mass on both sides)."""
    pred, ref = data.pad_pairs(pairs)
    cost, a, b = cosine_cost(pred, ref), masses(pred.weights), masses(ref.weights)
    solved = unbalanced_sinkhorn(
        cost, a, b, params["epsilon"], params["reg_c"], params["reg_r"], max_iter=params["max_iter"]
    )
    return cost, solved, transport_plan(cost, a, b, solved, params["epsilon"])


def pair_scores(data, live: torch.Tensor, params: dict) -> torch.Tensor:
    """lazy_emd of every pair, float64, shape (n_pairs,); :data:`EMPTY_SCORE` for the pairs not
    ``live`` (no mass on a side). Warns once if some pairs stopped at ``max_iter``."""
    scores = torch.full((len(data.pred_index),), EMPTY_SCORE, dtype=torch.float64, device=data.pred_index.device)
    stalled, worst = 0, 0.0
    for pairs in data.batches(pairs=torch.nonzero(live).flatten(), max_elements=SOLVER_BATCH_ELEMENTS):
        cost, solved, plan = solve_pairs(data, pairs, params)
        scores[pairs] = (plan * cost).sum((1, 2))
        stalled += int((~solved.converged).sum())
        worst = max(worst, float(solved.error.max()))
    if stalled:
        warnings.warn(
            f"lazy_emd: the Sinkhorn iterations did not converge for {stalled} of {int(live.sum())} pairs "
            f"within max_iter={params['max_iter']} (their potentials still moved {worst:.1e} epsilons per "
            f"iteration, tolerance {SOLVER_TOLERANCE:g}); their scores are approximate. Raise max_iter, or "
            f"raise epsilon (now {params['epsilon']:g}), or use finite penalties reg_c, reg_r (now "
            f"{params['reg_c']:g}, {params['reg_r']:g}): hard marginals (inf) converge slowest.",
            RuntimeWarning,
            stacklevel=3,
        )
    return scores


def pairs_with_mass(data) -> torch.Tensor:
    """Whether each pair has a scored token of positive weight on both sides (bool, (n_pairs,)).
    Warns when a text has tokens but all its weights are 0 (IDF fitted on too few references)."""
    index = data.clouds.text_index()
    words = (~data.clouds.special).double()
    n_texts = len(data.clouds.texts)
    n_words = torch.zeros(n_texts, dtype=torch.float64, device=words.device).index_add_(0, index, words)
    live = torch.ones(len(data.pred_index), dtype=torch.bool, device=words.device)
    weightless = 0
    for texts, weights in ((data.pred_index, data.pred_weights), (data.ref_index, data.ref_weights)):
        mass = torch.zeros(n_texts, dtype=torch.float64, device=words.device).index_add_(0, index, weights.double())
        live &= mass[texts] > 0
        weightless += int(((mass[texts] == 0) & (n_words[texts] > 0)).sum())
    if weightless:
        warnings.warn(
            f"lazy_emd: {weightless} texts of the pairs have tokens but zero total weight (every IDF weight "
            f"is 0: IDF was fitted on too few references); they score {EMPTY_SCORE} like empty texts. "
            "Pass idf=False, or an IDF dict fitted on a larger corpus.",
            RuntimeWarning,
            stacklevel=3,
        )
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
        cost = cosine_cost(*data.pad_pairs(pairs))
        plan = torch.zeros_like(cost)
    return {
        "prediction_tokens": pred_tokens,
        "reference_tokens": ref_tokens,
        "cost": cost[0, :n, :m].cpu().tolist(),
        "plan": plan[0, :n, :m].cpu().tolist(),
    }
