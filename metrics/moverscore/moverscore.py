# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""MoverScore: word mover (n-grams) and sentence mover distances on contextual embeddings."""

import importlib.util

import evaluate  # noqa: F401  (the examples' evaluate.load)

if importlib.util.find_spec("moverkit") is None:  # evaluate.load then names the exact release to install
    raise ImportError("this evaluate module needs the moverkit package: pip install moverkit==0.4.0")
else:  # indented, so that evaluate.load's own check of the imports (and its generic hint) passes them by
    from moverkit.functional.moverscore import moverscore
    from moverkit.integrations.evaluate_modules import evaluate_module, inputs_description

_CITATION = """\
@inproceedings{zhao-etal-2019-moverscore,
    title = "{M}over{S}core: Text Generation Evaluating with Contextualized Embeddings and Earth Mover Distance",
    author = "Zhao, Wei and Peyrard, Maxime and Liu, Fei and Gao, Yang and Meyer, Christian M. and Eger, Steffen",
    booktitle = "Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing and the 9th
        International Joint Conference on Natural Language Processing (EMNLP-IJCNLP)",
    year = "2019",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/D19-1053",
    pages = "563--578",
}
"""

_LINKS = {
    "homepage": "https://github.com/AIPHES/emnlp19-moverscore",
    "codebase_urls": ["https://github.com/AIPHES/emnlp19-moverscore"],
    "reference_urls": ["https://aclanthology.org/D19-1053", "https://aclanthology.org/2020.eval4nlp-1.6"],
}

_DESCRIPTION = """\
MoverScore (Zhao et al., 2019) is the Earth Mover's Distance between the IDF-weighted
distributions of the contextual token (or n-gram) embeddings of a prediction and of a reference,
turned into a similarity. With prediction units x_i (weights f_x, summing to 1), reference units
y_j (weights f_y) and the Euclidean distance between L2-normalised embeddings as cost (Section 3.1):

    WMD = min_F sum_ij F_ij ||E(x_i) - E(y_j)||   s.t.  F 1 = f_x,  F^T 1 = f_y,  F >= 0

    moverscore = 1 / (1 + WMD)   (version="v2", the later release)   or   1 - WMD   (version="v1", the paper)

An n-gram's embedding is the IDF-weighted sum of its tokens' embeddings and its weight the sum of
their IDFs (Eqs. 1-2); the sentence mover (variant="smd") uses one unit, the whole text. Token
embeddings come from one layer, or from the concatenation of the power means p = 1, +inf, -inf of
the last five layers (Eq. 5). IDF is fitted on the references for the reference side and on the
predictions for the prediction side; subword pieces, punctuation and stop words can be left out.
Every EMD is solved exactly (POT's network simplex, float64). ``centering="batch"`` gives the
MoverScore-b of Chen et al. (2020).
"""

_KWARGS_DESCRIPTION = inputs_description(
    """
Args:
    predictions (list of str): the texts to score.
    {references}
    version (str, default "v2"): a whole public configuration; the arguments below left at None
        take its value, those given override it.
        "v2": moverscore_v2.word_mover_score: last layer, IDF over references and over predictions,
            subword and punctuation removal, unigrams, Euclidean cost, 1 / (1 + WMD).
        "v1": moverscore.word_mover_score (the paper): power means of the last five layers, IDF over
            references and over predictions, subword and punctuation removal, unigrams,
            squared Euclidean cost (the release's), 1 - WMD.
    variant (str, optional): "wmd" (word mover: transport between token or n-gram distributions)
        or "smd" (sentence mover: distance between the IDF-weighted sums of the token embeddings).
    n_gram (int, optional): n-gram size of the word mover (1 or 2 in the paper; any n >= 1), a
        sliding window of stride 1 over the tokens that the filters keep. Not for variant="smd".
    aggregation (str, optional): "layer" (the vectors of layer num_layers) or "power_means"
        (concatenated min, mean and max, Eq. 5, over the last five layers up to num_layers, each
        L2-normalised first; over all of them if the model has fewer).
    {model_type}
    num_layers (int, optional): the (top) layer used: k = output of the k-th block, negative
        counts from the top. Default: the last layer (as the MoverScore releases).
    idf (bool or dict, optional): True fits IDF log((N+1)/(df+1)) (unseen tokens log(N+1)) on the
        references for the reference side; False gives every token weight 1; a dict (token id or
        token string to weight) is used as given. Special tokens always weigh 0.
    prediction_idf (bool or dict, optional): the prediction side's weights. Default: follows idf
        (True fits IDF on the predictions, a dict is reused, False gives 1).
    stop_words (list of str, optional): tokens to leave out (compared with the token strings,
        word-start markers removed). Default: none.
    remove_subwords (bool, optional): leave out subword continuation pieces (WordPiece "##...";
        for byte-level BPE and SentencePiece, pieces without the word-start marker).
    remove_punctuation (bool, optional): leave out tokens made only of ASCII punctuation.
    cost (str, optional): "euclidean" (the paper and v2) or "sqeuclidean" (its square, v1's code)
        between the L2-normalised unit embeddings.
    score_form (str, optional): "1/(1+wmd)" (v2) or "1-wmd" (v1 and the paper).
    centering (str, default "none"): "none", "dim", "sentence", "batch" (MoverScore-b: the mean
        of all tokens of this compute call is subtracted) or "corpus" (needs centering_stats;
        aggregation="layer" only); vectors are L2-normalised after centering.
    centering_stats (CenteringStats or path, optional): the statistic for centering="corpus", from
        moverkit.fit_centering(texts, model_type=..., num_layers=...).
    {batch_size, device, verbose, max_length, lang, long_texts, dtype, rescale_with_baseline}
    {baseline_path}
    return_alignment (bool, default False): also return, per prediction, the transport units
        (tokens or n-grams with positive weight) of the prediction and of its best reference,
        the optimal plan (the release's "flow") and the cost matrix (the release's plot_example picture).
    {return_reference_index, settings}

Returns:
    moverscore (list of float): per prediction; higher is better. In (0, 1] for "1/(1+wmd)";
        at most 1 for "1-wmd" (down to -1 with the Euclidean and -3 with the squared cost).
        A pair whose prediction or reference has no unit of positive weight left (empty text, or
        every token filtered out) scores 0.0.
    hashcode (str): model, layer(s), idf, centering, every resolved option and versions.
    alignment (list of dict, only with return_alignment): "prediction_tokens",
        "reference_tokens", "plan" (rows: prediction units, columns: reference units; sums to 1)
        and "cost" (same shape).
    {reference_index}

Examples:
    {identical_pairs}
    >>> print(results["hashcode"].split("_")[0])
    moverscore:sentence-transformers/all-MiniLM-L6-v2
    >>> results = metric.compute(predictions=["?!", "hello there"], references=["general kenobi", "hello there"],
    ...                          version="v1")
    >>> print([round(v, 2) for v in results["moverscore"]])
    [0.0, 1.0]
""",
    "moverscore",
)

Moverscore = evaluate_module("Moverscore", moverscore, __name__, (_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION), _LINKS)
