r"""Greedy matching and its F rule: the one matcher of centered_bertscore and sbertscore.

BERTScore (Zhang et al., 2020, Section 3) matches every unit of a prediction (a token; for
sBERTScore a sentence) to its most similar unit of the reference, and every reference unit to its
most similar prediction unit:

.. math::

    P = \frac{\sum_i a_i \max_{j \in C_r} S_{ij}}{\sum_i a_i}, \qquad
    R = \frac{\sum_j b_j \max_{i \in C_p} S_{ij}}{\sum_j b_j}

with :math:`S_{ij}` the cosine of prediction unit :math:`i` and reference unit :math:`j`,
:math:`C_p, C_r` the *candidates* of each side (the units a max may pick) and :math:`a, b` the
*scoring weights* (which units are averaged, and how much). centered_bertscore keeps [CLS] and
[SEP] as candidates with weight 0, as the bert-score package does; sbertscore weighs every
sentence 1. A side whose weights sum to 0 (an empty text) makes the pair score 0.

F1 is BERTScore's harmonic mean where it is one, and the smaller score elsewhere:

.. math::

    F_1 = \begin{cases} \frac{2PR}{P+R} & P > 0 \text{ and } R > 0 \\ \min(P, R) & \text{otherwise} \end{cases}

Cosines can be negative (unrelated units, centered vectors); where P and R have opposite signs,
:math:`2PR/(P+R)` leaves :math:`[\min(P,R), \max(P,R)]` and even :math:`[-1, 1]` (P = -0.190,
R = 0.148 gives 1.341). The rule above is continuous (the harmonic mean tends to 0 as P or R
does), always lies in :math:`[\min(P,R), \max(P,R)]`, and equals bert-score's F1 wherever both
scores are positive.

The cosine of a unit with itself is 1, also where centering left it the zero vector (a text's only
token minus its own mean, a lone sentence minus the batch mean): :func:`self_cosine_one` sets it
so wherever a text is compared with itself (texts are deduplicated, so a pair of identical texts
holds the same rows on both sides), which makes identical texts score the best value in every
centering mode. It is the limit of :math:`\cos(v, v) = 1` as :math:`v \to 0`; every other cosine
with a zero vector stays 0.

References
----------
.. [1] T. Zhang, V. Kishore, F. Wu, K. Q. Weinberger, Y. Artzi. BERTScore: Evaluating Text
   Generation with BERT. ICLR 2020.
"""

from __future__ import annotations

import torch


def cosine_matrix(pred: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Cosines of unit (or zero) vectors, (B, p, d) x (B, r, d) -> (B, p, r), clamped to [-1, 1]
    (rounding puts the cosine of a unit vector with itself at 1 + 1e-7 in float32)."""
    # b = pairs, p = prediction units, r = reference units, d = embedding dimension
    return torch.einsum("bpd,brd->bpr", pred, ref).clamp(-1.0, 1.0)


def self_cosine_one(sim: torch.Tensor, same: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sim`` (B, L1, L2) with its diagonal set to 1 at the real rows (``mask`` (B, L1)) of the
    pairs whose two sides are the same text (``same`` (B,) bool), as padded from one cloud: the
    cosine of each unit with itself (see the module doc). Returns a new tensor."""
    diagonal = torch.eye(sim.shape[1], sim.shape[2], dtype=torch.bool, device=sim.device)
    return sim.masked_fill(diagonal & (mask & same[:, None])[:, :, None], 1.0)


def greedy_match(
    sim: torch.Tensor,
    pred_mask: torch.Tensor,
    ref_mask: torch.Tensor,
    pred_weights: torch.Tensor,
    ref_weights: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Precision and recall, each (B,), of a padded batch of pairs (see the module doc).

    ``sim`` (B, p, r): the cosines, any value at padding. ``pred_mask`` (B, p) and ``ref_mask``
    (B, r): the candidates of each side (False at padding). ``pred_weights`` (B, p) and
    ``ref_weights`` (B, r): the scoring weights, >= 0, zero at padding and on candidates that are
    not scored. A pair whose weights sum to 0 on a side scores P = R = 0.
    """
    candidates = pred_mask[:, :, None] & ref_mask[:, None, :]
    sim = sim.masked_fill(~candidates, float("-inf"))
    best_for_pred = sim.amax(dim=2).masked_fill(~pred_mask, 0.0)
    best_for_ref = sim.amax(dim=1).masked_fill(~ref_mask, 0.0)
    pred_mass, ref_mass = pred_weights.sum(1), ref_weights.sum(1)
    empty = (pred_mass == 0) | (ref_mass == 0)
    precision = (best_for_pred * pred_weights).sum(1) / pred_mass.masked_fill(empty, 1.0)
    recall = (best_for_ref * ref_weights).sum(1) / ref_mass.masked_fill(empty, 1.0)
    return precision.masked_fill(empty, 0.0), recall.masked_fill(empty, 0.0)


def f_measure(precision: torch.Tensor, recall: torch.Tensor) -> torch.Tensor:
    """F1 = 2 P R / (P + R) where P > 0 and R > 0, else min(P, R) (see the module doc)."""
    positive = (precision > 0) & (recall > 0)
    harmonic = 2 * precision * recall / torch.where(positive, precision + recall, 1.0)
    return torch.where(positive, harmonic, torch.minimum(precision, recall))
