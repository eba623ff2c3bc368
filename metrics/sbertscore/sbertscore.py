# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""sBERTScore: BERTScore's greedy matching over sentence embeddings instead of token embeddings."""

import importlib.util

import evaluate  # noqa: F401  (the examples' evaluate.load)

if importlib.util.find_spec("moverkit") is None:  # evaluate.load then names the exact release to install
    raise ImportError("this evaluate module needs the moverkit package: pip install moverkit==0.4.0")
else:  # indented, so that evaluate.load's own check of the imports (and its generic hint) passes them by
    from moverkit.functional.sbertscore import sbertscore
    from moverkit.integrations.evaluate_modules import BATCH_CENTERING_CITATION, evaluate_module, inputs_description

_CITATION = (
    """\
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
"""
    + BATCH_CENTERING_CITATION
)

_LINKS = {
    "homepage": "https://github.com/multitude00999/MSAI_337_project",
    "codebase_urls": [
        "https://github.com/multitude00999/MSAI_337_project",
        "https://github.com/nipunsadvilkar/pySBD",
    ],
    "reference_urls": ["https://aclanthology.org/D19-1410", "https://aclanthology.org/2020.eval4nlp-1.6"],
}

_DESCRIPTION = """\
sBERTScore (Sharma et al., 2023, Section 3 and Figure 1) is BERTScore with sentences in place of
tokens: prediction and reference are split into sentences, each sentence is embedded once by a
sentence-transformers model (Sentence-BERT; default the embedded all-MiniLM-L6-v2, 384
dimensions), and every prediction sentence is matched to its most similar reference sentence
(precision), every reference sentence to its most similar prediction sentence (recall):

    S_ij = cos(c_i, r_j),   P = (1/q) sum_i max_j S_ij,   R = (1/p) sum_j max_i S_ij,
    F1 = 2 P R / (P + R) where P > 0 and R > 0, else min(P, R)

c_1..c_q: prediction sentence vectors; r_1..r_p: reference sentence vectors. The similarity matrix
has q x p entries instead of BERTScore's (tokens x tokens), and a sentence model is run once per
distinct sentence. Sentence vectors may first be centered (Chen et al., 2020, Section 5: SBERT-b is
batch centering), then scaled to unit length. Sentences are split by pysbd (rule-based, no
download). Two single-sentence texts score P = R = F1 = the cosine of their sentence embeddings.
Cosines can be negative (unrelated sentences, centered vectors), and where P and R have opposite
signs the harmonic mean leaves [min(P, R), max(P, R)] and even [-1, 1]; min(P, R) is its
continuous extension, always between P and R. Where both are positive F1 is BERTScore's.
"""

_KWARGS_DESCRIPTION = inputs_description(
    """
Args:
    predictions (list of str): the texts to score (one or several sentences each).
    references (list of str, or list of list of str): one reference per prediction, or a list of
        references per prediction; each prediction is then scored against each of its references
        and the best precision, recall and F1 are kept (each maximised on its own, as bert-score).
    model_type (str, optional): a sentence-transformers model id (from the local cache when
        offline) or a local folder; a plain transformers model gets mean pooling. Default: the
        embedded sentence-transformers/all-MiniLM-L6-v2 (installed with moverkit, no download).
        Sentences are embedded as the model's SentenceTransformer.encode() embeds them (its
        default prompt, chat template, pooling, truncate_dim, Dense and Normalize modules).
    prompt_name (str, optional): the name of one of the model's prompts, put before every
        sentence (as encode(prompt_name=...)).
    prompt (str, optional): a text put before every sentence (as encode(prompt=...)). Neither
        given: the model's default prompt, if it has one. An unknown prompt name, or both given,
        is a ValueError naming the argument; either, given, is in the hashcode.
    batch_size (int, default 64): sentences per forward pass.
    {device, verbose}
    centering (str, default "none"): centering of the sentence vectors before cosines: "none" (the
        paper's metric), "dim" (each vector's own mean over dimensions), "batch" (the mean sentence
        vector of all texts of this compute call: SBERT-b) or "corpus" (a mean fitted once on a
        corpus: needs centering_stats). "sentence" is refused: with one vector per sentence it
        would leave every vector zero.
    centering_stats (CenteringStats or path, optional): the corpus statistic for centering="corpus",
        from moverkit.fit_centering(texts, level="sentence", model_type=...) (or the file it was
        saved to); it records the model and the sentence layer tag -1.
    lang (str, default "en"): the language of the sentence splitter, any case (pysbd's codes: "en",
        "de", "fr", "es", "it", "ru", "zh", "ja", ...; another code is a ValueError listing them, and a
        name that is no code, "klingon", one naming lang). With another language than English,
        rescale_with_baseline needs baseline_path (the shipped baseline is English).
    {dtype, rescale_with_baseline, baseline_path}
    return_alignment (bool, default False): also return, per prediction, the sentences of the
        prediction and of its best reference (by F1) and their cosine similarity matrix.
    {return_reference_index_by_f1, settings}

Returns:
    {precision_recall_f1}
    hashcode (str): model, sentence layer tag (L-1), centering, splitter, the prompt arguments
        given, and versions.
    alignment (list of dict, only with return_alignment): "prediction_sentences",
        "reference_sentences", "similarity" (rows: prediction sentences; columns: reference sentences).
    {reference_index}
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
""",
    "sbertscore",
)

Sbertscore = evaluate_module("Sbertscore", sbertscore, __name__, (_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION), _LINKS)
