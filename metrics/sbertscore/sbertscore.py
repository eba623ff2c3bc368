# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""sBERTScore: BERTScore's greedy matching over sentence embeddings instead of token embeddings."""

import warnings
from collections import Counter

import evaluate
import torch

from moverkit._core import TextPairMetric, best_per_group, call_texts, get_hash, text_pair_features
from moverkit._core.centering import center_vectors, check_vector_centering, resolve_stats
from moverkit._core.pairs import PAIR_BATCH_ELEMENTS
from moverkit._core.sentences import (
    SENTENCE_LAYER,
    encode_sentences,
    get_sentence_encoder,
    split_sentences,
    splitter_tag,
)

_CITATION = """\
@misc{sharma-etal-2023-sbertscore,
    title = {sBERT score: Evaluating text generation using Sentence BERT},
    author = {Sharma, Gaurav and Srivastava, Shikher and Iruvanti, Gautam Srinidhi and Parmar, Surya Pratap Singh},
    year = {2023},
    howpublished = {\\url{https://github.com/multitude00999/MSAI_337_project}},
}
@inproceedings{reimers-gurevych-2019-sentence,
    title = "Sentence-{BERT}: Sentence Embeddings using {S}iamese {BERT}-Networks",
    author = "Reimers, Nils and Gurevych, Iryna",
    booktitle = "Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing",
    year = "2019",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/D19-1410",
    pages = "3982--3992",
}
@inproceedings{chen-etal-2020-improving,
    title = "Improving Text Generation Evaluation with Batch Centering and Tempered Word Mover Distance",
    author = "Chen, Xi and Ding, Nan and Levinboim, Tomer and Soricut, Radu",
    booktitle = "Proceedings of the First Workshop on Evaluation and Comparison of NLP Systems",
    year = "2020",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2020.eval4nlp-1.6",
    pages = "51--57",
}
"""

_DESCRIPTION = """\
sBERTScore (Sharma et al., 2023, Section 3 and Figure 1) is BERTScore with sentences in place of
tokens: prediction and reference are split into sentences, each sentence is embedded once by a
sentence-transformers model (Sentence-BERT; default the embedded all-MiniLM-L6-v2, 384
dimensions), and every prediction sentence is matched to its most similar reference sentence
(precision), every reference sentence to its most similar prediction sentence (recall):

    S_ij = cos(c_i, r_j),   P = (1/q) sum_i max_j S_ij,   R = (1/p) sum_j max_i S_ij,
    F1 = 2 P R / (P + R)   (min(P, R) where P <= 0 or R <= 0: cosines can be negative)

c_1..c_q: prediction sentence vectors; r_1..r_p: reference sentence vectors. The similarity matrix
has q x p entries instead of BERTScore's (tokens x tokens), and a sentence model is run once per
distinct sentence. Sentence vectors may first be centered (Chen et al., 2020, Section 5: SBERT-b is
batch centering), then scaled to unit length. Sentences are split by pysbd (rule-based, no
download). Two single-sentence texts score P = R = F1 = the cosine of their sentence embeddings.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the texts to score (one or several sentences each).
    references (list of str, or list of list of str): one reference per prediction, or a list of
        references per prediction; each prediction is then scored against each of its references
        and the best precision, recall and F1 are kept (each maximised on its own, as bert-score).
    sentence_model (str, optional): a sentence-transformers model id (from the local cache when
        offline) or a local folder; a plain transformers model gets mean pooling. Default: the
        embedded sentence-transformers/all-MiniLM-L6-v2 (installed with moverkit, no download).
    batch_size (int, default 64): sentences per forward pass.
    device (str, optional): "cpu", "cuda", "cuda:1", ... Default: CUDA when available, else CPU.
    verbose (bool, default False): show a progress bar while encoding.
    centering (str, default "none"): centering of the sentence vectors before cosines: "none" (the
        paper's metric), "dim" (each vector's own mean over dimensions), "batch" (the mean sentence
        vector of all texts of this compute call: SBERT-b) or "corpus" (a mean fitted once on a
        corpus: needs centering_stats). "sentence" is refused: with one vector per sentence it
        would leave every vector zero.
    centering_stats (CenteringStats or path, optional): the corpus statistic for centering="corpus",
        from moverkit._core.sentences.fit_sentence_centering(texts, sentence_model=...) (or the file
        it was saved to); it records the model and the sentence layer tag -1.
    language (str, default "en"): the language of the sentence splitter (pysbd's codes: "en",
        "de", "fr", "es", "it", "ru", "zh", "ja", ...).
    return_alignment (bool, default False): also return, per prediction, the sentences of the
        prediction and of its best reference (by F1) and their cosine similarity matrix.

Returns:
    precision (list of float): per prediction, in [-1, 1]; higher is better.
    recall (list of float): per prediction, in [-1, 1]; higher is better.
    f1 (list of float): per prediction, in [-1, 1]; higher is better.
    hashcode (str): model, sentence layer tag (L-1), centering, splitter and versions.
    alignment (list of dict, only with return_alignment): "prediction_sentences",
        "reference_sentences", "similarity" (rows: prediction sentences; columns: reference sentences).
    A prediction or reference with no sentence (empty or white space only) scores 0.0 for all
    three, with a warning.

Examples:
    >>> metric = evaluate.load("metrics/sbertscore")
    >>> results = metric.compute(predictions=["The cat sat. It purred.", "general kenobi"],
    ...                          references=["The cat sat. It purred.", "general kenobi"])
    >>> print([round(v, 2) for v in results["f1"]])
    [1.0, 1.0]
    >>> results = metric.compute(predictions=["Dr. Smith paid $3.50. He left."],
    ...                          references=["He left."], return_alignment=True)
    >>> print(results["alignment"][0]["prediction_sentences"])
    ['Dr. Smith paid $3.50.', 'He left.']
    >>> print(round(results["recall"][0], 2))
    1.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SBERTScore(TextPairMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            homepage="https://github.com/multitude00999/MSAI_337_project",
            inputs_description=_KWARGS_DESCRIPTION,
            features=text_pair_features(),
            codebase_urls=[
                "https://github.com/multitude00999/MSAI_337_project",
                "https://github.com/nipunsadvilkar/pySBD",
            ],
            reference_urls=["https://aclanthology.org/D19-1410", "https://aclanthology.org/2020.eval4nlp-1.6"],
        )

    def _compute(
        self,
        predictions,
        references,
        sentence_model: str | None = None,
        batch_size: int = 64,
        device: str | None = None,
        verbose: bool = False,
        centering: str = "none",
        centering_stats=None,
        language: str = "en",
        return_alignment: bool = False,
    ):
        texts = call_texts(predictions, references)
        check_vector_centering(centering)
        splitter = splitter_tag(language)
        encoder = get_sentence_encoder(sentence_model, device)
        stats = None
        if centering == "corpus":
            stats = sentence_stats(centering_stats, encoder)
        pair_predictions, pair_references = texts.pair_predictions, texts.pair_references

        # Every distinct text is split once and every distinct sentence embedded once; a sentence
        # counts (for the batch mean) as often as it occurs in the texts of the call.
        split = {text: split_sentences(text, language) for text in texts.occurrences}
        sentence_counts = Counter()
        for text, n in texts.occurrences.items():
            for sentence in split[text]:
                sentence_counts[sentence] += n
        sentences = list(sentence_counts)
        position = {s: i for i, s in enumerate(sentences)}
        rows = {text: [position[s] for s in split[text]] for text in texts.occurrences}
        warn_empty(texts.predictions, pair_references, split)

        # Cosines in float64: float32 unit vectors give self-similarities of 1 + 1e-7.
        vectors = encode_sentences(encoder, sentences, batch_size=batch_size, verbose=verbose).double()
        counts = torch.tensor([sentence_counts[s] for s in sentences], dtype=torch.float64)
        vectors = center_vectors(vectors, centering, counts=counts, stats=stats)
        pred_rows = [rows[p] for p in pair_predictions]
        ref_rows = [rows[r] for r in pair_references]
        scores = greedy_match(vectors, pred_rows, ref_rows)

        results = {}
        best = None
        for name, values in zip(("precision", "recall", "f1"), scores):
            results[name], best = best_per_group(values, texts.group, len(texts.predictions))
            results[name] = results[name].tolist()
        results["hashcode"] = get_hash(
            "sbertscore", encoder, idf=False, centering=centering, stats=stats, splitter=splitter
        )
        if return_alignment:
            results["alignment"] = [
                {
                    "prediction_sentences": split[pair_predictions[k]],
                    "reference_sentences": split[pair_references[k]],
                    "similarity": similarity(vectors, pred_rows[k], ref_rows[k]).tolist(),
                }
                for k in best.tolist()
            ]
        return results


def sentence_stats(centering_stats, encoder):
    """The ``corpus`` statistic, checked to be one of sentence vectors of this model."""
    if centering_stats is None:
        raise ValueError(
            "centering='corpus' needs centering_stats: fit one with "
            "moverkit._core.sentences.fit_sentence_centering(texts, sentence_model=...) and pass it (or its path)"
        )
    return resolve_stats(centering_stats, encoder.name, SENTENCE_LAYER, encoder.dim)


def warn_empty(predictions, pair_references, split):
    """One warning counting the predictions and (per pair) references that hold no sentence."""
    n_pred = sum(not split[p] for p in predictions)
    n_ref = sum(not split[r] for r in pair_references)
    if n_pred or n_ref:
        warnings.warn(
            f"{n_pred} prediction(s) and {n_ref} reference(s) hold no sentence (empty or white space); "
            "their pairs score 0.0",
            stacklevel=3,
        )


def similarity(vectors, pred_rows, ref_rows) -> torch.Tensor:
    """The cosine matrix S (q x p) of one pair: its rows of the unit ``vectors``, clamped to [-1, 1]."""
    return (vectors[pred_rows] @ vectors[ref_rows].T).clamp(-1.0, 1.0).cpu()


def greedy_match(vectors, pred_rows, ref_rows) -> torch.Tensor:
    """Precision, recall and F1 of every pair, shape (3, n_pairs), float64.

    ``vectors`` (n_sentences, D), float64, are unit (or zero) sentence vectors; pair ``k`` compares the
    sentences ``pred_rows[k]`` with ``ref_rows[k]`` (lists of row indices). Pairs are padded and
    scored many at a time; a pair with no sentence on a side scores 0.
    """
    n_pred = torch.tensor([len(r) for r in pred_rows], dtype=torch.long)
    n_ref = torch.tensor([len(r) for r in ref_rows], dtype=torch.long)
    scores = torch.zeros(3, len(pred_rows), dtype=torch.float64)
    for chunk in pair_chunks(n_pred, n_ref):
        pred_index, pred_mask = pad_rows([pred_rows[k] for k in chunk], vectors.device)
        ref_index, ref_mask = pad_rows([ref_rows[k] for k in chunk], vectors.device)
        # b = pairs, q = prediction sentences, p = reference sentences, d = embedding dimension
        # Clamped: rounding puts the cosine of a vector with itself at 1 + 4e-16.
        sim = torch.einsum("bqd,bpd->bqp", vectors[pred_index], vectors[ref_index]).clamp(-1.0, 1.0)
        sim = sim.masked_fill(~(pred_mask[:, :, None] & ref_mask[:, None, :]), float("-inf"))
        best_for_pred = sim.amax(dim=2).masked_fill(~pred_mask, 0.0)
        best_for_ref = sim.amax(dim=1).masked_fill(~ref_mask, 0.0)
        q, p = n_pred[chunk].to(sim), n_ref[chunk].to(sim)
        empty = (q == 0) | (p == 0)
        precision = torch.where(empty, 0.0, best_for_pred.sum(1) / q.clamp_min(1.0))
        recall = torch.where(empty, 0.0, best_for_ref.sum(1) / p.clamp_min(1.0))
        scores[:, chunk] = torch.stack([precision, recall, f_measure(precision, recall)]).cpu()
    return scores


def f_measure(precision: torch.Tensor, recall: torch.Tensor) -> torch.Tensor:
    """F1 = 2 P R / (P + R) where P > 0 and R > 0, else min(P, R).

    Cosines can be negative (unrelated sentences, centered vectors). Where P and R have opposite
    signs the harmonic mean leaves [min(P, R), max(P, R)] and can leave [-1, 1] (P = 0.056,
    R = -0.063, a real WMT17 pair under batch centering, gives 0.96); min(P, R) is the continuous
    extension (the harmonic mean tends to 0 as P or R does) that keeps F1 between P and R, and
    F1 = P when P = R.
    """
    positive = (precision > 0) & (recall > 0)
    harmonic = 2 * precision * recall / torch.where(positive, precision + recall, 1.0)
    return torch.where(positive, harmonic, torch.minimum(precision, recall))


def pad_rows(rows, device):
    """Row-index lists padded to one width: indices (B, W) (0 at padding) and mask (B, W)."""
    width = max(1, max(len(r) for r in rows))
    index = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long, device=device)
    mask = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows], device=device)
    return index, mask


def pair_chunks(n_pred, n_ref):
    """Pair indices in chunks of similar sizes, each chunk's padded (B x q x p) similarity tensor
    holding at most ``PAIR_BATCH_ELEMENTS`` entries."""
    q, p = n_pred.clamp_min(1), n_ref.clamp_min(1)
    order = torch.argsort(q * p, stable=True).tolist()
    start = 0
    while start < len(order):
        end, width_q, width_p = start, 1, 1
        while end < len(order):
            wq, wp = max(width_q, int(q[order[end]])), max(width_p, int(p[order[end]]))
            if end > start and (end - start + 1) * wq * wp > PAIR_BATCH_ELEMENTS:
                break
            width_q, width_p, end = wq, wp, end + 1
        yield order[start:end]
        start = end
