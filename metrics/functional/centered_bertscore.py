r"""Centered BERTScore (Chen et al., 2020, Section 5; BERTScore: Zhang et al., 2020, Section 3).

Every token of a prediction is matched to its most similar token of the reference (precision),
every reference token to its most similar prediction token (recall), by the cosine of contextual
token vectors that were first centered (``centering``) and scaled to unit length:

.. math::

    P = \frac{\sum_i a_i \max_j \cos(x_i, y_j)}{\sum_i a_i}, \qquad
    R = \frac{\sum_j b_j \max_i \cos(x_i, y_j)}{\sum_j b_j}, \qquad
    F_1 = \begin{cases} \frac{2PR}{P+R} & P, R > 0 \\ \min(P, R) & \text{otherwise} \end{cases}

with :math:`a, b` the token weights (1, or IDF; 0 for [CLS]/[SEP], which stay candidates for the
max, as in the bert-score package). F1 is bert-score's wherever P and R are positive, and stays in
:math:`[\min(P, R), \max(P, R)]` where centered cosines make one of them negative.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from moverkit._core import (
    PairData,
    best_per_group,
    check_centering,
    checks,
    cosine_matrix,
    f_measure,
    greedy_match,
    pair_hash,
    prepare_pairs,
)


def centered_bertscore(
    predictions,
    references,
    *,
    model_type: str | None = None,
    num_layers: int | None = None,
    idf: bool | Mapping = False,
    batch_size: int = 64,
    device: str | None = None,
    verbose: bool = False,
    centering: str = "batch",
    centering_stats=None,
    max_length: int | None = None,
    return_alignment: bool = False,
) -> dict:
    """Precision, recall and F1 of every prediction against its best reference (each maximised
    over the references on its own, as bert-score), and the ``hashcode``; with
    ``return_alignment``, the tokens and the cosine matrix of each prediction and its best
    reference (by F1). The arguments are those of ``moverkit.load("centered_bertscore").compute``."""
    check_centering(centering)
    checks.positive_int("batch_size", batch_size)
    checks.boolean("verbose", verbose)
    checks.optional_positive_int("max_length", max_length)
    checks.boolean("return_alignment", return_alignment)
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
    scores = torch.zeros(3, len(data.pred_index), dtype=torch.float64)
    for batch in data.batches(with_special=True):
        pred, ref = data.pad_pairs(batch, with_special=True)
        sim = cosine_matrix(pred.vectors, ref.vectors)
        precision, recall = greedy_match(sim, pred.mask, ref.mask, pred.weights, ref.weights)
        precision, recall = precision.double(), recall.double()
        scores[:, batch.cpu()] = torch.stack([precision, recall, f_measure(precision, recall)]).cpu()
    results = {}
    best = None
    for name, values in zip(("precision", "recall", "f1"), scores):
        results[name], best = best_per_group(values, data.group, data.n_predictions)
        results[name] = results[name].tolist()
    results["hashcode"] = pair_hash("centered_bertscore", data)
    if return_alignment:
        results["alignment"] = [alignment(data, int(k)) for k in best]
    return results


def alignment(data: PairData, pair: int) -> dict:
    """The scored tokens of a pair (special tokens left out) and their cosine matrix."""
    pred, ref = data.pad_pairs(torch.tensor([pair], device=data.pred_index.device))
    n, m = int(pred.mask.sum()), int(ref.mask.sum())
    sim = cosine_matrix(pred.vectors[:, :n], ref.vectors[:, :m])[0]
    return {
        "prediction_tokens": data.clouds.scored_tokens(int(data.pred_index[pair])),
        "reference_tokens": data.clouds.scored_tokens(int(data.ref_index[pair])),
        "similarity": sim.cpu().double().tolist(),
    }
