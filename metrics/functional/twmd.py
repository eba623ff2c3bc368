r"""Tempered Word Mover Distance (TWMD, TRWMD) and its family (SBERT, Wordset-CKA) on centered
token vectors, as a plain function (Chen et al., 2020).

Every member is a similarity C between the token clouds X1 (the reference, L1 tokens) and X2 (the
prediction, L2 tokens), normalized as in Eq. (1):
:math:`\mathrm{Sim}(X_1, X_2) = C(X_1, X_2) / \sqrt{C(X_1, X_1)\, C(X_2, X_2)}`, with the cosines
:math:`s_{ij} = \langle x_1^i, x_2^j \rangle` of unit vectors:

- twmd (Eq. 5, 6): :math:`C = \sum_{ij} \pi_{ij} s_{ij}`, :math:`\pi` after a few Sinkhorn steps
  (:func:`moverkit.ot.sinkhorn_log_plan`);
- trwmd (Eq. 7): :math:`C = \frac{T}{L_1} \sum_i \log \sum_j e^{s_{ij}/T}` (:func:`moverkit.ot.trwmd_value`);
- sbert: :math:`C = \langle \bar x_1, \bar x_2 \rangle`, the cosine of mean-pooled vectors after Eq. (1);
- cka (Wordset-CKA): :math:`C = \sum_{ij} s_{ij}^2`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import closing

import torch

from moverkit._core import checks
from moverkit._core.call import MetricCall, PreparedChunk, chunks
from moverkit._core.maths import self_cosine_one
from moverkit.functional.signature import metric_function
from moverkit.ot import sinkhorn_log_plan, trwmd_value
from moverkit.ot.sinkhorn import MAX_TEMPERATURE, MIN_TEMPERATURE, tempered

__all__ = ["twmd"]

VARIANTS = ("twmd", "trwmd", "sbert", "cka")

# Chen et al. (2020), Section 6.2: temperatures tuned on WMT15-16 (RoBERTa), without centering and
# with batch centering. Centering by a mean (batch, corpus, sentence) moves the cosines from about
# [0.3, 1] to about [-0.3, 1]; "dim" changes them very little (paper, Section 5 and Table 1).
DEFAULT_TEMPERATURES = {
    "twmd": {"uncentered": 0.02, "centered": 0.10},
    "trwmd": {"uncentered": 0.02, "centered": 0.15},
}
MEAN_CENTERINGS = ("sentence", "batch", "corpus")

MAX_SINKHORN_ITERATIONS = 10_000
"""The most Sinkhorn steps ``sinkhorn_iterations`` takes. The paper recommends 1 (Section 6.2);
more steps approach the entropic optimal transport plan, and 10,000 get there: on 20 WMT17 pairs
with the embedded model, going from 3,000 to 10,000 steps moved no score by more than 1e-7 at
T = 0.1, 3e-5 at T = 0.02 (the paper's smallest temperature) and 1e-5 at T = 0.005. Each step
costs a pass over every pair's cosine matrix, so the time grows linearly (10,000 steps: 5 to 9 s
for those 20 pairs on one CPU core; 10^6 steps took 68 s for one pair, for the score of 10^3
steps): a larger count only buys time, and a typo of a few zeros would hang a call."""


@metric_function()
def twmd(
    call: MetricCall,
    *,
    variant: str = "twmd",
    temperature: float | None = None,
    sinkhorn_iterations: int = 1,
    normalize: bool = True,
) -> dict:
    """Score each prediction against its reference(s) with the chosen member of the family.

    The arguments and the result are those of ``moverkit.load("twmd").compute`` (documented in
    its card): ``{variant: [one float per prediction, higher is closer, 1 for identical texts,
    0 for an empty side], "hashcode": str}``, plus ``"alignment"`` with ``return_alignment``.
    With several references per prediction, the best score is kept. With
    ``rescale_with_baseline``, each score s becomes (s - b) / (1 - b), b the mean score of unrelated
    sentence pairs (:func:`~moverkit._core.call.baseline.rescale`).
    """
    params = resolve_params(variant, temperature, sinkhorn_iterations, normalize, call.centering.mode)
    with closing(chunks(call)) as parts:
        return call.close([_scores(chunk, params=params) for chunk in parts])


def _scores(chunk: PreparedChunk, *, params) -> dict:
    """The result of one chunk of a call (:func:`~moverkit._core.call.streaming.chunks`)."""
    data = chunk.pairs()
    results, best = chunk.results(
        pair_scores(data, params),
        (params["variant"],),
        data,
        hash_params=params,
    )
    if chunk.return_alignment:
        results["alignment"] = [alignment(data, int(k), params) for k in best]
    return results


def resolve_params(variant, temperature, sinkhorn_iterations, normalize, centering) -> dict:
    """The variant's parameters, checked and with defaults filled in, in hashcode order.

    A variant lists only the parameters it uses: twmd (temperature, Sinkhorn steps), trwmd
    (temperature), sbert and cka (neither). ``temperature=None`` takes :data:`DEFAULT_TEMPERATURES`
    for the centering mode.
    """
    checks.one_of("variant", variant, VARIANTS)
    iterations = checks.positive_int(
        "sinkhorn_iterations",
        sinkhorn_iterations,
        maximum=MAX_SINKHORN_ITERATIONS,
        hint=f" (the paper uses 1; {MAX_SINKHORN_ITERATIONS:,} steps reach the entropic optimum, more only take longer)",
    )
    if temperature is not None:
        temperature = checks.finite_positive_float(
            "temperature",
            temperature,
            minimum=MIN_TEMPERATURE,
            maximum=MAX_TEMPERATURE,
            hint=" (or None for the paper's default)",
        )
    checks.boolean("normalize", normalize)
    params = {"variant": variant}
    if variant in DEFAULT_TEMPERATURES:
        if temperature is None:
            temperature = DEFAULT_TEMPERATURES[variant]["centered" if centering in MEAN_CENTERINGS else "uncentered"]
        params["temperature"] = float(temperature)
    if variant == "twmd":
        params["sinkhorn_iterations"] = iterations
    params["normalize"] = normalize
    return params


def pair_scores(data, params, similarities: Similarities | None = None) -> torch.Tensor:
    """The score of every pair before rescaling: C, or Eq. (1) with ``normalize``, cut back into
    :func:`score_range`; float64, shape (n_pairs,).

    ``similarities`` (:func:`similarities`), when given, are the pairs' and the texts' own cosine
    matrices computed once: tuning (:mod:`moverkit.tuning`) scores many variants and temperatures
    from them. Without it each batch's matrix is made, used and dropped (bounded memory)."""
    pairs, selves = (None, None) if similarities is None else similarities
    scores = pair_values(data, params, pairs)
    if params["normalize"]:
        scores = normalized(scores, self_values(data, params, selves), data.ref_index, data.pred_index)
    return within_range(scores, params, data)


SimilarityBatch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""``(pairs, sim, rows, cols)``: pair indices, their s_ij (B, L1, L2) and the masks of X1 and X2."""

Similarities = tuple[list[SimilarityBatch], list[SimilarityBatch]]
"""The similarity batches of the pairs and of the texts against themselves (:func:`similarities`)."""


def similarity_batches(data) -> Iterator[SimilarityBatch]:
    """The pairs of ``data`` in padded batches, with their s_ij (:func:`pair_similarity`)."""
    for batch in data.batches():
        sim, ref, pred = pair_similarity(data, batch)
        yield batch, sim, ref.mask, pred.mask


def similarities(data) -> Similarities:
    """Every similarity batch of the pairs and of the texts against themselves (for Eq. 1), held
    in memory: what :func:`pair_scores` needs for any variant and temperature of these clouds."""
    return list(similarity_batches(data)), list(similarity_batches(self_pairs(data)))


def pair_values(data, params, batches: list[SimilarityBatch] | None = None) -> torch.Tensor:
    """C(reference, prediction) of every pair, float64, shape (n_pairs,)."""
    values = torch.zeros(len(data.pred_index), dtype=torch.float64, device=data.pred_index.device)
    for batch, sim, rows, cols in similarity_batches(data) if batches is None else batches:
        values[batch] = family_value(sim, rows, cols, params)
    return values


def pair_similarity(data, pairs: torch.Tensor):
    """s_ij of the pairs ``pairs`` (with the cosine of a token with itself 1, see
    :func:`~moverkit._core.maths.matching.self_cosine_one`) and their padded reference and prediction clouds."""
    device_pairs = pairs.to(data.pred_index.device, non_blocking=True)
    same = data.pred_index[device_pairs] == data.ref_index[device_pairs]
    pred, ref = data.pad_pairs(pairs)  # texts against themselves (Eq. 1's C(X, X)): padded once
    return self_cosine_one(similarity(ref, pred), same, ref.mask), ref, pred


def self_pairs(data):
    """``data`` with every text that takes part paired with itself (pair k: text k of the result's ``pred_index``)."""
    texts = torch.unique(torch.cat([data.pred_index, data.ref_index]))
    return dataclasses.replace(data, pred_index=texts, ref_index=texts, group=torch.arange(len(texts)))


def self_values(data, params, batches: list[SimilarityBatch] | None = None) -> torch.Tensor:
    """C(X, X) of every text that takes part, by the same procedure as the pairs (Eq. 1), indexed
    like ``data.clouds``; texts taking no part keep 0. ``batches``: those of :func:`self_pairs`."""
    as_pairs = self_pairs(data)
    values = torch.zeros(len(data.clouds.texts), dtype=torch.float64, device=as_pairs.pred_index.device)
    values[as_pairs.pred_index] = pair_values(as_pairs, params, batches)
    return values


def differentiable_similarity(data, params) -> torch.Tensor:
    """Eq. (1) Sim of every pair of ``data`` (float64, shape (n_pairs,)), with autograd through the
    encoder that made its clouds: fine-tuning's scorer (:attr:`moverkit.integrations.registry.Metric.differentiable`),
    the same code as :func:`pair_scores` but for the cut back to the documented range, which has no
    useful gradient."""
    return normalized(pair_values(data, params), self_values(data, params), data.ref_index, data.pred_index)


def normalized(cross: torch.Tensor, own: torch.Tensor, ref_index: torch.Tensor, pred_index: torch.Tensor):
    r"""Eq. (1): :math:`C(X_1, X_2) / \sqrt{C(X_1, X_1) C(X_2, X_2)}`, exactly 1 for a text against
    itself; 0 where a self-similarity is not positive (an empty text; a token that centering turned
    to zero still has cosine 1 with itself)."""
    # Each root on its own: trwmd's C grows like T log L, and at T = 1e300 the product would overflow.
    # Clamp before the square root: at a zero value sqrt's gradient would be 0/0 = NaN (fine-tuning).
    # A text against itself is C(X, X) / C(X, X) = 1 exactly (the product of the two roots can
    # differ from C(X, X) in its last bit: 1.0000000000000002 was seen).
    roots = own.clamp_min(1e-300).sqrt()
    denominator = roots[ref_index] * roots[pred_index]
    positive = (own[ref_index] > 0) & (own[pred_index] > 0)
    ratio = torch.where(ref_index == pred_index, 1.0, cross / denominator)
    return torch.where(positive, ratio, 0.0)


def score_range(params: dict, n_pred: torch.Tensor | None = None, n_ref: torch.Tensor | None = None):
    r"""The documented range (low, high) of the variant's scores (the card's "Output values"),
    per pair where it depends on the token counts ``n_pred`` (L2) and ``n_ref`` (L1).

    Cauchy-Schwarz bounds sbert and cka (and unnormalized twmd, a convex combination of cosines);
    normalized twmd is documented as [-1, 1] (Eq. 1 does not bound it: measured at most 1.0 on
    WMT17); trwmd's entropy term lets it pass 1 by at most :math:`T \log L_2`, and unnormalized
    trwmd lies in [-1, 1 + T log L2]; unnormalized cka in [0, L1 L2]."""
    variant, normalize = params["variant"], params["normalize"]
    if variant == "cka":
        return 0.0, (1.0 if normalize or n_pred is None else (n_pred * n_ref).double())
    if variant == "trwmd":
        excess = params["temperature"] * torch.log(n_pred.double().clamp_min(1)) if n_pred is not None else math.inf
        return -1.0, 1.0 + excess
    return -1.0, 1.0


def within_range(scores: torch.Tensor, params: dict, data) -> torch.Tensor:
    """``scores`` cut back into :func:`score_range`: float rounding (a cosine of unit vectors at
    1 + 2e-16, a float32 dot product) must not leave the documented range."""
    low, high = score_range(params, data.lengths(data.pred_index), data.lengths(data.ref_index))
    high = torch.as_tensor(high, dtype=scores.dtype, device=scores.device)
    return torch.minimum(scores.clamp_min(low), high)


def similarity(ref, pred) -> torch.Tensor:
    """Token similarities s_ij = <x1_i, x2_j> of padded clouds (cosines: the vectors are unit)."""
    # b = pairs, r = reference tokens (X1, rows), p = prediction tokens (X2, columns), d = dimension
    return torch.einsum("brd,bpd->brp", ref.vectors, pred.vectors)


def family_value(sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, params: dict) -> torch.Tensor:
    """C(X1, X2) of the variant ``params["variant"]`` for a padded batch, float64, shape (B,); 0
    where a side is empty (sums run in float64).

    ``sim`` (B, L1, L2) holds s_ij, zero at padding; ``rows`` (B, L1) and ``cols`` (B, L2) mark the
    real tokens of X1 (reference) and X2 (prediction).
    """
    variant = params["variant"]
    if variant == "twmd":
        log_plan = sinkhorn_log_plan(sim, rows, cols, params["temperature"], params["sinkhorn_iterations"])
        return (log_plan.exp() * sim).sum((1, 2), dtype=torch.float64)
    if variant == "trwmd":
        return trwmd_value(sim, rows, cols, params["temperature"])
    n_rows, n_cols = rows.sum(1), cols.sum(1)
    if variant == "sbert":
        return sim.sum((1, 2), dtype=torch.float64) / (n_rows * n_cols).clamp_min(1)
    return sim.square().sum((1, 2), dtype=torch.float64)


def variant_plan(sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, params: dict) -> torch.Tensor | None:
    """The plan behind C for a padded batch, (B, L1, L2), summing to 1 per pair (None for cka)."""
    variant = params["variant"]
    if variant == "twmd":
        return sinkhorn_log_plan(sim, rows, cols, params["temperature"], params["sinkhorn_iterations"]).exp()
    live = rows[:, :, None] & cols[:, None, :]
    if variant == "trwmd":
        logits = tempered(sim, params["temperature"]).masked_fill(~live, -math.inf)
        plan = torch.softmax(logits, dim=2).nan_to_num(0.0)
        return plan / rows.sum(1).clamp_min(1)[:, None, None]
    if variant == "sbert":
        return live / (rows.sum(1) * cols.sum(1)).clamp_min(1)[:, None, None]
    return None


def alignment(data, pair: int, params: dict) -> dict:
    """Tokens of a pair (special tokens left out), cosine matrix and plan, rows = prediction tokens."""
    sim, ref, pred = pair_similarity(data, torch.tensor([pair], device=data.pred_index.device))
    n_ref, n_pred = int(ref.mask.sum()), int(pred.mask.sum())
    plan = variant_plan(sim, ref.mask, pred.mask, params)
    return {
        "prediction_tokens": data.clouds.scored_tokens(int(data.pred_index[pair])),
        "reference_tokens": data.clouds.scored_tokens(int(data.ref_index[pair])),
        "similarity": sim[0, :n_ref, :n_pred].T.cpu().double().tolist(),
        "plan": None if plan is None else plan[0, :n_ref, :n_pred].T.cpu().double().tolist(),
    }
