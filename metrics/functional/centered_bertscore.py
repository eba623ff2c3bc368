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
from contextlib import closing

import torch

from moverkit._core import PairData, check_idf, checks, cosine_matrix, f_measure, greedy_match
from moverkit._core.call import MetricCall, PairOptions, PreparedChunk, chunks
from moverkit._core.encoding import count_zero_weight_texts, warn_zero_weights
from moverkit._core.maths import self_cosine_one
from moverkit.functional.signature import metric_function

OUTPUTS = ("precision", "recall", "f1")


@metric_function()
def centered_bertscore(
    call: MetricCall,
    *,
    idf: bool | Mapping = False,
    use_fast_tokenizer: bool = False,
    nthreads: int = 4,
    all_layers: bool = False,
) -> dict:
    """Precision, recall and F1 of every prediction against its best reference (each maximised
    over the references on its own, as bert-score), and the ``hashcode``; with
    ``return_alignment``, the tokens and the cosine matrix of each prediction and its best
    reference (by F1). The arguments are those of ``moverkit.load("centered_bertscore").compute``,
    evaluate's ``bertscore`` arguments included (``use_fast_tokenizer``, ``nthreads`` and
    ``all_layers`` are checked and change nothing); with ``rescale_with_baseline`` the three scores
    are rescaled by :func:`~moverkit._core.call.baseline.rescale`."""
    checks.boolean("use_fast_tokenizer", use_fast_tokenizer)
    checks.positive_int("nthreads", nthreads)
    if checks.boolean("all_layers", all_layers):
        raise ValueError("all_layers=True is not supported: score one layer per call with num_layers=k")
    idf = check_idf(idf)
    with closing(chunks(call, idf=idf)) as parts:
        return call.close([_scores(chunk, idf=idf) for chunk in parts])


def _scores(chunk: PreparedChunk, *, idf) -> dict:
    """The result of one chunk of a call (:func:`~moverkit._core.call.streaming.chunks`)."""
    data = chunk.pairs(PairOptions(idf=idf))
    warn_zero_weights(*count_zero_weight_texts(data), "their pairs score P = R = F1 = 0, as an empty text")
    results, best = chunk.results(
        pair_scores(data),
        OUTPUTS,
        data,
    )
    if chunk.return_alignment:
        results["alignment"] = [alignment(data, int(k)) for k in best]
    return results


def pair_scores(data: PairData) -> torch.Tensor:
    """Precision, recall and F1 of every pair by greedy matching (BERTScore, Eq. 3-5), before
    rescaling: float64, shape (3, n_pairs), on the CPU (kept on the clouds' device until the last
    batch, so that no batch waits for the device)."""
    scores = torch.zeros(3, len(data.pred_index), dtype=torch.float64, device=data.pred_index.device)
    for batch in data.batches(with_special=True):
        pred, ref = data.pad_pairs(batch, with_special=True)
        same = data.pred_index[batch] == data.ref_index[batch]
        sim = self_cosine_one(cosine_matrix(pred.vectors, ref.vectors), same, pred.mask)
        precision, recall = greedy_match(sim, pred.mask, ref.mask, pred.weights, ref.weights)
        precision, recall = precision.double(), recall.double()
        scores[:, batch] = torch.stack([precision, recall, f_measure(precision, recall)])
    return scores.cpu()


def alignment(data: PairData, pair: int) -> dict:
    """The scored tokens of a pair (special tokens left out) and their cosine matrix."""
    pred, ref = data.pad_pairs(torch.tensor([pair], device=data.pred_index.device))
    n, m = int(pred.mask.sum()), int(ref.mask.sum())
    same = data.pred_index[pair : pair + 1] == data.ref_index[pair : pair + 1]
    sim = self_cosine_one(cosine_matrix(pred.vectors, ref.vectors), same, pred.mask)[0, :n, :m]
    return {
        "prediction_tokens": data.clouds.scored_tokens(int(data.pred_index[pair])),
        "reference_tokens": data.clouds.scored_tokens(int(data.ref_index[pair])),
        "similarity": sim.cpu().double().tolist(),
    }
