# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""Centered BERTScore: BERTScore on batch-, corpus-, sentence- or dimension-centered token vectors."""

import importlib.util

import evaluate  # noqa: F401  (the examples' evaluate.load)

if importlib.util.find_spec("moverkit") is None:  # evaluate.load then names the exact release to install
    raise ImportError("this evaluate module needs the moverkit package: pip install moverkit==0.4.0")
else:  # indented, so that evaluate.load's own check of the imports (and its generic hint) passes them by
    from moverkit.functional.centered_bertscore import centered_bertscore
    from moverkit.integrations.evaluate_modules import BATCH_CENTERING_CITATION, evaluate_module, inputs_description

_CITATION = (
    BATCH_CENTERING_CITATION
    + """\
@inproceedings{bert-score,
    title = {BERTScore: Evaluating Text Generation with BERT},
    author = {Tianyi Zhang and Varsha Kishore and Felix Wu and Kilian Q. Weinberger and Yoav Artzi},
    booktitle = {International Conference on Learning Representations},
    year = {2020},
    url = {https://openreview.net/forum?id=SkeHuCVFDr}
}
"""
)

_LINKS = {
    "homepage": "https://aclanthology.org/2020.eval4nlp-1.6",
    "codebase_urls": ["https://github.com/Tiiiger/bert_score"],
    "reference_urls": ["https://aclanthology.org/2020.eval4nlp-1.6", "https://arxiv.org/abs/1904.09675"],
}

_DESCRIPTION = """\
BERTScore (Zhang et al., 2020) matches every token of a prediction to its most similar token of
the reference (precision) and every reference token to its most similar prediction token (recall),
by cosine similarity of contextual embeddings, and reports their harmonic mean (F1). Chen et al.
(2020, Section 5) showed that these cosines are inflated by the anisotropy of the embeddings and
that subtracting the mean token vector of the batch (or of a corpus) first improves agreement with
human judgments: BERTScore-b in their tables. With ``centering="none"`` this module gives the
numbers of the ``bert-score`` package on the same model and layer.

    P = sum_i a_i max_j cos(x_i, y_j) / sum_i a_i,   R = sum_j b_j max_i cos(x_i, y_j) / sum_j b_j,
    F1 = 2 P R / (P + R) where P > 0 and R > 0, else min(P, R)

x_i, y_j: centered token vectors of prediction and reference; a, b: token weights (1, or IDF).
Centered cosines can be negative, and where P and R have opposite signs the harmonic mean leaves
[min(P, R), max(P, R)] and even [-1, 1] ("a" against "b": P = -0.19, R = 0.15, 2PR/(P+R) = 1.34);
min(P, R) is its continuous extension, always between P and R. Where both are positive F1 is
BERTScore's.
"""

_KWARGS_DESCRIPTION = inputs_description(
    """
Args:
    predictions (list of str): the texts to score.
    references (list of str, or list of list of str): one reference per prediction, or a list of
        references per prediction; each prediction is then scored against each of its references
        and the best precision, recall and F1 are kept (each maximised on its own, as bert-score).
    {model_type, num_layers}
    idf (bool or dict, default False): weight tokens by IDF fitted on the references (BERTScore's
        log((N+1)/(df+1))), or by a given dict from token id (or token string) to weight.
    {batch_size, device, verbose, centering, centering_stats, max_length}
    lang (str, default "en"): the language of the texts, as in evaluate's bertscore: a language
        code, ISO 639-1 or 639-3 ("en", "de", "zh", "yue"), any case (bertscore lower-cases it too),
        optionally with subtags as bert-score's "en-sci" or "pt-br"; a name that is no code
        ("klingon", "english") is a ValueError naming lang. It changes no score for a given model
        (not in the hashcode): bertscore picks a default model per language, moverkit always
        defaults to the English embedded model, so any other language with model_type None warns:
        pass a multilingual model_type.
    {rescale_with_baseline, baseline_path}
    use_fast_tokenizer (bool, default False): accepted for bertscore compatibility and ignored:
        moverkit always tokenizes with the model's fast (Rust) tokenizer.
    nthreads (int, default 4): accepted for bertscore compatibility and ignored (bertscore's
        threads for IDF counting; moverkit counts in one pass).
    all_layers (bool, default False): only False: True (bertscore's scores of every layer) is a
        ValueError; score one layer per call with num_layers.
    {long_texts, dtype}
    return_alignment (bool, default False): also return, per prediction, the tokens of the
        prediction and of its best reference and their cosine similarity matrix.
    {return_reference_index_by_f1, settings}

Returns:
    {precision_recall_f1}
    hashcode (str): model, layer, idf, centering, token limit and versions, to reproduce the numbers.
    alignment (list of dict, only with return_alignment): "prediction_tokens", "reference_tokens",
        "similarity" (rows: prediction tokens; columns: reference tokens).
    {reference_index}
    An empty (or whitespace-only) prediction or reference scores 0.0 for all three.

Examples:
    {identical_pairs}
    >>> print(results["hashcode"].split("_L")[0])
    centered_bertscore:sentence-transformers/all-MiniLM-L6-v2
""",
    "centered_bertscore",
    "f1",
)

CenteredBertscore = evaluate_module(
    "CenteredBertscore", centered_bertscore, __name__, (_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION), _LINKS
)
