r"""sBERTScore (Sharma et al., 2023, Section 3 and Figure 1): BERTScore's greedy matching over
sentence embeddings instead of token embeddings.

Prediction and reference are split into sentences (pysbd), each distinct sentence is embedded
once by a sentence-transformers model, optionally centered (Chen et al., 2020, Section 5) and
scaled to unit length, and matched greedily in both directions:

.. math::

    S_{ij} = \cos(c_i, r_j), \qquad P = \frac{1}{q} \sum_i \max_j S_{ij}, \qquad
    R = \frac{1}{p} \sum_j \max_i S_{ij}, \qquad
    F_1 = \begin{cases} \frac{2PR}{P+R} & P, R > 0 \\ \min(P, R) & \text{otherwise} \end{cases}

with :math:`c_1..c_q` the prediction's sentence vectors and :math:`r_1..r_p` the reference's.
A text with no sentence (empty or white space) makes its pair score 0.
"""

from __future__ import annotations

from contextlib import closing

from moverkit._core.base import warn_user
from moverkit._core.call import MetricCall, PreparedChunk, chunks
from moverkit._core.encoding import splitter_languages
from moverkit.functional.centered_bertscore import alignment, pair_scores
from moverkit.functional.signature import metric_function

OUTPUTS = ("precision", "recall", "f1")


@metric_function(languages=splitter_languages)
def sbertscore(call: MetricCall) -> dict:
    """Precision, recall and F1 of every prediction against its best reference (each maximised
    over the references on its own, as bert-score), and the ``hashcode``; with
    ``return_alignment``, the sentences and the cosine matrix of each prediction and its best
    reference (by F1). The arguments are those of ``moverkit.load("sbertscore").compute``; with
    ``rescale_with_baseline`` the three scores are rescaled by :func:`~moverkit._core.call.baseline.rescale`.

    It stands on the path of the token metrics with sentences for tokens
    (:func:`~moverkit._core.call.pairs.sentence_pair_data`) and scores them with centered_bertscore's
    greedy matching, every sentence a candidate of weight 1."""
    with closing(chunks(call)) as parts:
        return call.close([_scores(chunk) for chunk in parts])


def _scores(chunk: PreparedChunk) -> dict:
    """The result of a call (a sentence-level call is one chunk: :func:`~moverkit._core.call.streaming.chunks`)."""
    data = chunk.pairs()
    units = dict(zip(data.clouds.texts, data.clouds.units))
    warn_empty(chunk.texts.predictions, chunk.texts.pair_references, units, rescaled=chunk.rescaled)
    results, best = chunk.results(
        pair_scores(data),
        OUTPUTS,
        data,
    )
    if chunk.return_alignment:
        results["alignment"] = [sentence_alignment(data, int(k)) for k in best]
    return results


def sentence_alignment(data, pair: int) -> dict:
    """The sentences of a pair and their cosine matrix (centered_bertscore's alignment of units)."""
    tokens = alignment(data, pair)
    return {
        "prediction_sentences": tokens["prediction_tokens"],
        "reference_sentences": tokens["reference_tokens"],
        "similarity": tokens["similarity"],
    }


def warn_empty(
    predictions: list[str], pair_references: list[str], split: dict[str, list[str]], *, rescaled: bool = False
) -> None:
    """One warning counting the predictions and (per pair) references that hold no sentence (whose
    pairs score 0, rescaled as any score when the call is)."""
    n_pred = sum(not split[p] for p in predictions)
    n_ref = sum(not split[r] for r in pair_references)
    if n_pred or n_ref:
        warn_user(
            f"{n_pred} prediction(s) and {n_ref} reference(s) hold no sentence (empty or white space); "
            "their pairs score 0.0" + (" before rescaling (the baseline's value of 0 after)" if rescaled else "")
        )
