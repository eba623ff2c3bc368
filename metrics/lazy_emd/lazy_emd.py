# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""Lazy Earth Mover's Distance: unbalanced optimal transport between contextual token clouds."""

import importlib.util

import evaluate  # noqa: F401  (the examples' evaluate.load)

if importlib.util.find_spec("moverkit") is None:  # evaluate.load then names the exact release to install
    raise ImportError("this evaluate module needs the moverkit package: pip install moverkit==0.4.0")
else:  # indented, so that evaluate.load's own check of the imports (and its generic hint) passes them by
    from moverkit.functional.lazy_emd import lazy_emd
    from moverkit.integrations.evaluate_modules import evaluate_module, inputs_description

_CITATION = """\
@inproceedings{chen-etal-2020-lazy-emd,
    title     = {Evaluating Natural Language Generation via Unbalanced Optimal Transport},
    author    = {Chen, Yimeng and Lan, Yanyan and Xiong, Ruibin and Pang, Liang and Ma, Zhiming and Cheng, Xueqi},
    booktitle = {Proceedings of the Twenty-Ninth International Joint Conference on Artificial Intelligence, {IJCAI-20}},
    pages     = {3730--3736},
    year      = {2020},
    doi       = {10.24963/ijcai.2020/516},
    url       = {https://doi.org/10.24963/ijcai.2020/516},
}
"""

_LINKS = {
    "homepage": "https://doi.org/10.24963/ijcai.2020/516",
    "codebase_urls": ["https://github.com/Beastlyprime/lazy_emd"],
    "reference_urls": ["https://doi.org/10.24963/ijcai.2020/516", "https://arxiv.org/abs/1607.05816"],
}

_DESCRIPTION = """\
Lazy-EMD (Chen et al., IJCAI 2020) is the cost of the optimal *unbalanced* transport plan between
the tokens of a prediction (the candidate, masses a) and of a reference (masses b): the marginal
constraints of the Earth Mover's Distance are replaced by KL penalties, so a plan may leave mass
behind or add mass where the texts do not match (Definition 4 and Eq. (11)):

    P* = argmin_P <C, P> + epsilon KL(P | 1) + reg_c KL(P 1 | a) + reg_r KL(P^T 1 | b),   P >= 0
    lazy_emd = <C, P*> = sum_ij C_ij P*_ij,    C_ij = 1 - cos(x_i, y_j)

x_i, y_j: contextual token vectors (optionally centered) of prediction and reference, special
tokens left out; a, b: uniform token weights (or IDF), each summing to 1; KL(p | q) =
sum p log(p / q) - p + q. epsilon KL(P | 1) is the entropic term of the generalized Sinkhorn
algorithm (Section 5.2), POT's reg_type="entropy", as in the authors' release. Lower is closer.
The extreme penalties give the paper's family (Sections 3-4), up to the entropic blur of epsilon:
EMD = lazy_emd(reg_c=inf, reg_r=inf), precision = 1 - lazy_emd(reg_c=inf, reg_r=0) and
recall = 1 - lazy_emd(reg_c=0, reg_r=inf).
"""

_KWARGS_DESCRIPTION = inputs_description(
    """
Args:
    predictions (list of str): the texts to score (the candidates).
    {references}
    lang (str, default "en"): the target language, which picks the penalties of Section 5.2: "en"
        (reg_c, reg_r) = (0.23, 0.31), "zh" (0.018, 0.97), and "other" (0.009, 0.95), the paper's preset
        for every other target language, which any other language code takes too ("de", "fi"; untuned
        for them). A code is ISO 639-1 or 639-3, any case, optionally with subtags (the preset is that
        of the language: "zh-hans" takes "zh"'s, "en-sci" "en"'s); a name that is no code ("klingon",
        "english") is a ValueError naming lang. An explicit reg_c or reg_r overrides its preset value.
        With another language than English, rescale_with_baseline needs baseline_path.
    reg_c (float, optional): lambda_c >= 0, the KL penalty on the prediction's marginal.
        float("inf") makes it a hard constraint (every prediction token sends all its mass); 0
        leaves it free. Default: the preset of lang.
    reg_r (float, optional): lambda_r >= 0, the same for the reference's marginal. Default: the
        preset of lang.
    epsilon (float, default 0.009): the entropic regularization (> 0) of the Sinkhorn solver, the
        paper's value. Smaller values come closer to the unregularized problem and need more
        iterations.
    max_iter (int, default 10000, at most 100,000): the most Sinkhorn iterations per pair; a pair
        that has not converged by then keeps its last plan and a warning says how many there were
        (a score above the plan's bound is an error naming epsilon and max_iter).
    {model_type, num_layers}
    idf (bool or dict, default False): token masses from IDF fitted on the references
        (log((N+1)/(df+1)), for both sides), or from a given dict from token id (or token string)
        to weight; then normalized to sum 1 per text. False: uniform masses (the paper's setting).
    {batch_size, device, verbose}
    centering (str, default "none"): "none" (the paper's raw cosines, for which the lang presets
        were tuned), "dim", "sentence", "batch" (the mean of all tokens of this compute call) or
        "corpus" (a mean fitted once on a corpus: needs centering_stats).
    centering_stats (CenteringStats or path, optional): the corpus statistic for centering="corpus",
        from moverkit.fit_centering(texts, model_type=..., num_layers=...) (or the file it was saved to).
    {max_length, long_texts, dtype, rescale_with_baseline, baseline_path}
    return_alignment (bool, default False): also return, per prediction, the tokens of the
        prediction and of its best reference, their cost matrix and the optimal plan P*.
    {return_reference_index, settings}

Returns:
    lazy_emd (list of float): per prediction, <C, P*> >= 0; a distance: LOWER is closer. With
        raw cosines and the "en" preset, real translation pairs score about 0.05-0.3; a text
        against itself scores exactly 0 (its plan is the identity coupling). A
        prediction or reference with no scored token (empty or whitespace-only) scores 1.0, the
        value 1 - precision gives for bert-score's precision 0.
    hashcode (str): model, layer, idf, centering, token limit (max_length), reg_c, reg_r, epsilon,
        max_iter and versions.
    alignment (list of dict, only with return_alignment): "prediction_tokens", "reference_tokens",
        "cost" (1 - cosine) and "plan" (rows: prediction tokens; columns: reference tokens).
    {reference_index}

Examples:
    {identical_pairs}
    >>> results = metric.compute(predictions=["the cat sat on the mat"],
    ...                          references=["a cat was sitting on the mat"], lang="en")
    >>> print(sorted(results), results["lazy_emd"][0] > 0.0)
    ['hashcode', 'lazy_emd'] True
""",
    "lazy_emd",
    score="0.0",
)

LazyEmd = evaluate_module("LazyEmd", lazy_emd, __name__, (_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION), _LINKS)
