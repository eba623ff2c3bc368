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

from collections import Counter
from functools import partial

import torch

from moverkit._core import (
    SENTENCE_LAYER,
    call_texts,
    center_rows,
    cosine_matrix,
    encode_sentences,
    f_measure,
    get_hash,
    greedy_match,
    split_sentences,
)
from moverkit._core.base import pad, pair_buckets, self_cosine_one, warn_user
from moverkit._core.call import PAIR_BATCH_ELEMENTS, MetricCall
from moverkit._core.encoding import sentence_encoder_for, splitter_languages, splitter_tag

from .entry import metric_function

OUTPUTS = ("precision", "recall", "f1")


@metric_function(level="sentence", languages=splitter_languages)
def sbertscore(call: MetricCall) -> dict:
    """Precision, recall and F1 of every prediction against its best reference (each maximised
    over the references on its own, as bert-score), and the ``hashcode``; with
    ``return_alignment``, the sentences and the cosine matrix of each prediction and its best
    reference (by F1). The arguments are those of ``moverkit.load("sbertscore").compute``; with
    ``rescale_with_baseline`` the three scores are rescaled by :func:`~moverkit._core.call.baseline.rescale`."""
    texts = call_texts(call.predictions, call.references)
    request, lang = call.request, call.request.lang
    encoder = sentence_encoder_for(request)
    stats = call.centering.resolved(encoder.name, SENTENCE_LAYER, encoder.dim)

    # Every distinct text is split once and every distinct sentence embedded once; a sentence
    # counts (for the batch mean) as often as it occurs in the texts of the call. Text i of
    # texts.unique owns entries offsets[i]:offsets[i + 1] of `rows`, its sentences' rows of `vectors`.
    split = {text: split_sentences(text, lang) for text in texts.unique}
    sentence_counts = Counter()
    for text, n in texts.occurrences.items():
        for sentence in split[text]:
            sentence_counts[sentence] += n
    sentences = list(sentence_counts)
    position = {s: i for i, s in enumerate(sentences)}
    warn_empty(texts.predictions, texts.pair_references, split)

    # Cosines in float64: float32 unit vectors give self-similarities of 1 + 1e-7.
    vectors = encode_sentences(encoder, sentences, request).double()
    counts = torch.tensor([sentence_counts[s] for s in sentences], dtype=torch.float64)
    vectors = center_rows(vectors, call.centering.mode, counts=counts, stats=stats)
    on = vectors.device
    rows = torch.tensor([position[s] for text in texts.unique for s in split[text]], dtype=torch.long, device=on)
    lengths = torch.tensor([len(split[text]) for text in texts.unique], dtype=torch.long, device=on)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long, device=on)
    torch.cumsum(lengths, 0, out=offsets[1:])
    pred_index, ref_index = texts.pair_indices(on)

    scores = torch.zeros(3, len(pred_index), dtype=torch.float64, device=on)  # read once, after the last batch
    for batch in pair_buckets(lengths[pred_index], lengths[ref_index], PAIR_BATCH_ELEMENTS):
        batch = batch.to(on)
        pred_mask, pred = pad(offsets, pred_index[batch], vectors, rows=rows)
        ref_mask, ref = pad(offsets, ref_index[batch], vectors, rows=rows)
        # Every sentence is a candidate and weighs 1; a sentence's cosine with itself is 1.
        sim = self_cosine_one(cosine_matrix(pred, ref), pred_index[batch] == ref_index[batch], pred_mask)
        precision, recall = greedy_match(sim, pred_mask, ref_mask, pred_mask.to(pred.dtype), ref_mask.to(ref.dtype))
        scores[:, batch] = torch.stack([precision, recall, f_measure(precision, recall)])

    results, best = call.results(
        scores.cpu(),
        OUTPUTS,
        group=texts.group,
        n_predictions=len(texts.predictions),
        encoder=encoder,
        hashcode=partial(
            get_hash,
            "sbertscore",
            encoder,
            idf=False,
            centering_mode=call.centering.mode,
            stats=stats,
            splitter=splitter_tag(lang),
            dtype=request.dtype,
        ),
    )
    if call.return_alignment:
        sentence_vectors = [vectors[rows[offsets[i] : offsets[i + 1]]] for i in range(len(texts.unique))]
        results["alignment"] = [
            {
                "prediction_sentences": split[texts.pair_predictions[k]],
                "reference_sentences": split[texts.pair_references[k]],
                "similarity": self_cosine_one(
                    cosine_matrix(sentence_vectors[pred_index[k]][None], sentence_vectors[ref_index[k]][None]),
                    (pred_index[k] == ref_index[k])[None],
                    torch.ones(1, int(lengths[pred_index[k]]), dtype=torch.bool, device=on),
                )[0].tolist(),
            }
            for k in best.tolist()
        ]
    return call.close([results])


def warn_empty(predictions: list[str], pair_references: list[str], split: dict[str, list[str]]) -> None:
    """One warning counting the predictions and (per pair) references that hold no sentence."""
    n_pred = sum(not split[p] for p in predictions)
    n_ref = sum(not split[r] for r in pair_references)
    if n_pred or n_ref:
        warn_user(
            f"{n_pred} prediction(s) and {n_ref} reference(s) hold no sentence (empty or white space); "
            "their pairs score 0.0"
        )
