# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""Centered BERTScore: BERTScore on batch-, corpus-, sentence- or dimension-centered token vectors."""

import evaluate
import torch

from moverkit._core import TextPairMetric, best_per_group, get_hash, prepare_pairs, text_pair_features

_CITATION = """\
@inproceedings{chen-etal-2020-improving,
    title = "Improving Text Generation Evaluation with Batch Centering and Tempered Word Mover Distance",
    author = "Chen, Xi and Ding, Nan and Levinboim, Tomer and Soricut, Radu",
    booktitle = "Proceedings of the First Workshop on Evaluation and Comparison of NLP Systems",
    year = "2020",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2020.eval4nlp-1.6",
    pages = "51--57",
}
@inproceedings{bert-score,
    title = {BERTScore: Evaluating Text Generation with BERT},
    author = {Tianyi Zhang and Varsha Kishore and Felix Wu and Kilian Q. Weinberger and Yoav Artzi},
    booktitle = {International Conference on Learning Representations},
    year = {2020},
    url = {https://openreview.net/forum?id=SkeHuCVFDr}
}
"""

_DESCRIPTION = """\
BERTScore (Zhang et al., 2020) matches every token of a prediction to its most similar token of
the reference (precision) and every reference token to its most similar prediction token (recall),
by cosine similarity of contextual embeddings, and reports their harmonic mean (F1). Chen et al.
(2020, Section 5) showed that these cosines are inflated by the anisotropy of the embeddings and
that subtracting the mean token vector of the batch (or of a corpus) first improves agreement with
human judgments: BERTScore-b in their tables. With ``centering="none"`` this module gives the
numbers of the ``bert-score`` package on the same model and layer.

    P = sum_i a_i max_j cos(x_i, y_j) / sum_i a_i,   R = sum_j b_j max_i cos(x_i, y_j) / sum_j b_j,
    F1 = 2 P R / (P + R)

x_i, y_j: centered token vectors of prediction and reference; a, b: token weights (1, or IDF).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the texts to score.
    references (list of str, or list of list of str): one reference per prediction, or a list of
        references per prediction; each prediction is then scored against each of its references
        and the best precision, recall and F1 are kept (each maximised on its own, as bert-score).
    model_type (str, optional): a Hugging Face model id or local path. Default: the embedded
        sentence-transformers/all-MiniLM-L6-v2 (installed with moverkit, no download).
    num_layers (int, optional): the layer whose token vectors are used (k = output of the k-th
        block, negative counts from the top). Default: a tuned layer for known models, else the last.
    idf (bool or dict, default False): weight tokens by IDF fitted on the references (BERTScore's
        log((N+1)/(df+1))), or by a given dict from token id (or token string) to weight.
    batch_size (int, default 64): texts per forward pass.
    device (str, optional): "cpu", "cuda", "cuda:1", ... Default: CUDA when available, else CPU.
    verbose (bool, default False): show a progress bar while encoding.
    centering (str, default "batch"): "none", "dim" (each vector's own mean over dimensions),
        "sentence" (the mean of the text's tokens), "batch" (the mean of all tokens of all texts of
        this compute call) or "corpus" (a mean fitted once on a corpus: needs centering_stats).
    centering_stats (CenteringStats or path, optional): the corpus statistic for centering="corpus",
        from moverkit.fit_centering(texts, model_type=..., num_layers=...) (or the file it was saved to).
    max_length (int, optional): truncate texts to this many tokens (default and maximum: the
        model's limit). Longer texts are truncated with one warning.
    return_alignment (bool, default False): also return, per prediction, the tokens of the
        prediction and of its best reference and their cosine similarity matrix.

Returns:
    precision (list of float): per prediction, in [-1, 1]; higher is better.
    recall (list of float): per prediction, in [-1, 1]; higher is better.
    f1 (list of float): per prediction, in [-1, 1]; higher is better.
    hashcode (str): model, layer, idf, centering and versions, to reproduce the numbers.
    alignment (list of dict, only with return_alignment): "prediction_tokens", "reference_tokens",
        "similarity" (rows: prediction tokens; columns: reference tokens).
    An empty (or whitespace-only) prediction or reference scores 0.0 for all three.

Examples:
    >>> metric = evaluate.load("metrics/centered_bertscore")
    >>> results = metric.compute(predictions=["hello there", "general kenobi"],
    ...                          references=["hello there", "general kenobi"])
    >>> print([round(v, 2) for v in results["f1"]])
    [1.0, 1.0]
    >>> print(results["hashcode"].split("_L")[0])
    centered_bertscore:sentence-transformers/all-MiniLM-L6-v2
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CenteredBERTScore(TextPairMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            homepage="https://aclanthology.org/2020.eval4nlp-1.6",
            inputs_description=_KWARGS_DESCRIPTION,
            features=text_pair_features(),
            codebase_urls=["https://github.com/Tiiiger/bert_score"],
            reference_urls=["https://aclanthology.org/2020.eval4nlp-1.6", "https://arxiv.org/abs/1904.09675"],
        )

    def _compute(
        self,
        predictions,
        references,
        model_type: str | None = None,
        num_layers: int | None = None,
        idf: bool | dict = False,
        batch_size: int = 64,
        device: str | None = None,
        verbose: bool = False,
        centering: str = "batch",
        centering_stats=None,
        max_length: int | None = None,
        return_alignment: bool = False,
    ):
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
        n_pairs = len(data.pred_index)
        scores = torch.zeros(3, n_pairs, dtype=torch.float64)
        for batch in data.batches(with_special=True):
            scores[:, batch.cpu()] = greedy_match(*data.pad_pairs(batch, with_special=True)).cpu()
        results = {}
        best = None
        for name, values in zip(("precision", "recall", "f1"), scores):
            results[name], best = best_per_group(values, data.group, data.n_predictions)
            results[name] = results[name].tolist()
        results["hashcode"] = get_hash(
            "centered_bertscore", data.encoder, idf=data.idf, centering=centering, stats=data.stats
        )
        if return_alignment:
            results["alignment"] = [alignment(data, int(k)) for k in best]
        return results


def greedy_match(pred, ref) -> torch.Tensor:
    """Precision, recall and F1 of a padded batch of pairs, shape (3, B).

    Every token (special ones included, as bert-score does) is a candidate for the max; only
    tokens with weight > 0 are scored. A pair with no scored token on a side gets 0.
    """
    # b = pairs, p = prediction tokens, r = reference tokens, d = embedding dimension
    sim = torch.einsum("bpd,brd->bpr", pred.vectors, ref.vectors)
    pair_mask = pred.mask[:, :, None] & ref.mask[:, None, :]
    sim = sim.masked_fill(~pair_mask, float("-inf"))
    best_for_pred = sim.max(dim=2).values.masked_fill(~pred.mask, 0.0)
    best_for_ref = sim.max(dim=1).values.masked_fill(~ref.mask, 0.0)
    pred_mass = pred.weights.sum(1)
    ref_mass = ref.weights.sum(1)
    precision = (best_for_pred * pred.weights).sum(1) / pred_mass.clamp_min(1e-30)
    recall = (best_for_ref * ref.weights).sum(1) / ref_mass.clamp_min(1e-30)
    empty = (pred_mass == 0) | (ref_mass == 0)
    precision = precision.masked_fill(empty, 0.0)
    recall = recall.masked_fill(empty, 0.0)
    f1 = (2 * precision * recall / (precision + recall)).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    return torch.stack([precision, recall, f1]).double()


def alignment(data, pair: int) -> dict:
    """Tokens of a pair (special tokens left out) and their cosine similarity matrix."""
    pred, ref = data.pad_pairs(torch.tensor([pair], device=data.pred_index.device))
    n, m = int(pred.mask.sum()), int(ref.mask.sum())
    sim = pred.vectors[0, :n] @ ref.vectors[0, :m].T
    return {
        "prediction_tokens": data.clouds.scored_tokens(int(data.pred_index[pair])),
        "reference_tokens": data.clouds.scored_tokens(int(data.ref_index[pair])),
        "similarity": sim.cpu().double().tolist(),
    }

