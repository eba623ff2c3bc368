# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""Tempered Word Mover Distance (TWMD, TRWMD) and its family (SBERT, Wordset-CKA) on centered token vectors."""

import importlib.util

import evaluate  # noqa: F401  (the examples' evaluate.load)

if importlib.util.find_spec("moverkit") is None:  # evaluate.load then names the exact release to install
    raise ImportError("this evaluate module needs the moverkit package: pip install moverkit==0.4.0")
else:  # indented, so that evaluate.load's own check of the imports (and its generic hint) passes them by
    from moverkit.functional.twmd import twmd
    from moverkit.integrations.evaluate_modules import BATCH_CENTERING_CITATION, evaluate_module, inputs_description

_CITATION = BATCH_CENTERING_CITATION

_LINKS = {
    "homepage": "https://aclanthology.org/2020.eval4nlp-1.6",
    "codebase_urls": ["https://github.com/PythonOT/POT"],
    "reference_urls": ["https://aclanthology.org/2020.eval4nlp-1.6", "https://arxiv.org/abs/1306.0895"],
}

_DESCRIPTION = """\
Tempered Word Mover Distance (Chen et al., 2020) compares a prediction with a reference through the
entropy-regularized optimal transport between their contextual token vectors. Every metric of the
paper's family (Section 3) is a similarity C between the token clouds X1 (the reference, L1 tokens)
and X2 (the prediction, L2 tokens), normalized as in Eq. (1):

    Sim(X1, X2) = C(X1, X2) / sqrt(C(X1, X1) C(X2, X2)),   s_ij = <x1_i, x2_j> (unit vectors: cosines)

    twmd  (Eq. 5, 6): C = sum_ij pi_ij s_ij, pi after `sinkhorn_iterations` Sinkhorn steps from the
                      kernel exp(+s_ij / T), towards the marginals 1/L1 (rows) and 1/L2 (columns)
    trwmd (Eq. 7):    C = (T / L1) sum_i log sum_j exp(s_ij / T)   (-> BERTScore recall as T -> 0)
    sbert:            C = <mean_i x1_i, mean_j x2_j>              (Sim = cosine of mean-pooled vectors)
    cka   (Wordset-CKA): C = sum_ij s_ij^2

Token vectors are centered first (Section 5; batch centering is the paper's best; the default subtracts a
shipped corpus mean instead, within 0.2 Pearson of it on WMT17)
and scaled to unit length. Only word tokens take part: the tokenizer's [CLS]/[SEP] are left out.
"""

_KWARGS_DESCRIPTION = inputs_description(
    """
Args:
    predictions (list of str): the texts to score.
    {references}
    variant (str, default "twmd"): the member of the family: "twmd" (tempered WMD, Sinkhorn),
        "trwmd" (tempered relaxed WMD, closed form), "sbert" (cosine of mean-pooled token vectors)
        or "cka" (Wordset-CKA). The result key is the variant's name.
    temperature (float, optional): T > 0 of twmd and trwmd (ignored by sbert and cka). Default:
        the paper's values tuned on WMT15-16 (Section 6.2): twmd 0.02 with centering "none" or
        "dim", 0.10 with a mean centering ("sentence", "batch", "corpus"); trwmd 0.02 / 0.15.
    sinkhorn_iterations (int, default 1): Sinkhorn steps of twmd (Eq. 6), 1 to 10,000; the paper
        recommends 1. Many steps converge to the entropic optimal transport plan (10,000 reach it
        to about 1e-5, and the time grows with the count). Ignored by the other variants.
    normalize (bool, default True): divide by sqrt(C(X1, X1) C(X2, X2)) (Eq. 1), so that a text
        scores 1 against itself; False returns the raw C(X1, X2).
    {model_type, num_layers, batch_size, device, verbose, centering, centering_stats, max_length}
    {lang, long_texts, dtype, rescale_with_baseline, baseline_path}
    return_alignment (bool, default False): also return, per prediction, the tokens of the
        prediction and of its best reference, their cosine similarity matrix and the transport plan.
    {return_reference_index, settings}

Returns:
    twmd | trwmd | sbert | cka (list of float): per prediction, the score of the chosen variant;
        higher is better. Normalized: exactly 1 for identical texts; sbert in [-1, 1], cka in [0, 1];
        twmd in [-1, 1] (Eq. 1 does not bound it: a value past 1 is cut back, none was seen on
        WMT17); trwmd can pass 1 by at most T log L2 (Eq. 7 holds an entropy term; at most 1.0008
        on WMT17). No rounding leaves these ranges. An empty (or whitespace-only) prediction or
        reference, or a text whose vectors centering turns to zero (one token, "sentence"), scores 0.0.
    hashcode (str): model, layer, centering, token limit (max_length), variant, its parameters and versions.
    alignment (list of dict, only with return_alignment): "prediction_tokens", "reference_tokens",
        "similarity" and "plan" (rows: prediction tokens; columns: reference tokens). The plan
        sums to 1: twmd's after its Sinkhorn steps, trwmd's closed-form optimum (each reference
        token's 1/L1 spread by a softmax), sbert's uniform coupling; None for cka.
    {reference_index}

Examples:
    {identical_pairs}
    >>> results = metric.compute(predictions=["the cat sat on the mat"],
    ...                          references=["a cat was sitting on the mat"], variant="trwmd")
    >>> print(sorted(results), results["trwmd"][0] < 1.0)
    ['hashcode', 'trwmd'] True
""",
    "twmd",
)

Twmd = evaluate_module("Twmd", twmd, __name__, (_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION), _LINKS)
