# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""MoverScore: word mover (n-grams) and sentence mover distances on contextual embeddings."""

import hashlib
import string
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache

import evaluate
import numpy as np
import ot
import torch

from moverkit._core import (
    IdfTable,
    PairData,
    TextPairMetric,
    best_per_group,
    call_texts,
    center,
    check_idf,
    encode,
    get_encoder,
    get_hash,
    prepare_pairs,
    text_pair_features,
    token_weights,
)
from moverkit._core.centering import CENTERING_MODES
from moverkit._core.idf import idf_tag

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

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the texts to score.
    references (list of str, or list of list of str): one reference per prediction, or a list of
        references per prediction; each prediction is then scored against each of its references
        and the best (highest) score is kept.
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
    model_type (str, optional): a Hugging Face model id or local path. Default: the embedded
        sentence-transformers/all-MiniLM-L6-v2 (installed with moverkit, no download).
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
    batch_size (int, default 64): texts per forward pass.
    device (str, optional): "cpu", "cuda", "cuda:1", ... Default: CUDA when available, else CPU.
    verbose (bool, default False): show a progress bar while encoding.
    max_length (int, optional): truncate texts to this many tokens (default and maximum: the
        model's limit). Longer texts are truncated with one warning.
    return_alignment (bool, default False): also return, per prediction, the transport units
        (tokens or n-grams with positive weight) of the prediction and of its best reference,
        the optimal flow and the cost matrix (the release's plot_example picture).

Returns:
    moverscore (list of float): per prediction; higher is better. In (0, 1] for "1/(1+wmd)";
        at most 1 for "1-wmd" (down to -1 with the Euclidean and -3 with the squared cost).
        A pair whose prediction or reference has no unit of positive weight left (empty text, or
        every token filtered out) scores 0.0.
    hashcode (str): model, layer(s), idf, centering, every resolved option and versions.
    alignment (list of dict, only with return_alignment): "prediction_tokens",
        "reference_tokens", "flow" (rows: prediction units, columns: reference units; sums to 1)
        and "cost" (same shape).

Examples:
    >>> metric = evaluate.load("metrics/moverscore")
    >>> results = metric.compute(predictions=["hello there", "general kenobi"],
    ...                          references=["hello there", "general kenobi"])
    >>> print([round(v, 2) for v in results["moverscore"]])
    [1.0, 1.0]
    >>> print(results["hashcode"].split("_")[0])
    moverscore:sentence-transformers/all-MiniLM-L6-v2
    >>> results = metric.compute(predictions=["?!", "hello there"], references=["general kenobi", "hello there"],
    ...                          version="v1")
    >>> print([round(v, 2) for v in results["moverscore"]])
    [0.0, 1.0]
"""

PRESETS = {
    "v2": {
        "variant": "wmd",
        "n_gram": 1,
        "aggregation": "layer",
        "idf": True,
        "stop_words": (),
        "remove_subwords": True,
        "remove_punctuation": True,
        "cost": "euclidean",
        "score_form": "1/(1+wmd)",
    },
    "v1": {
        "variant": "wmd",
        "n_gram": 1,
        "aggregation": "power_means",
        "idf": True,
        "stop_words": (),
        "remove_subwords": True,
        "remove_punctuation": True,
        "cost": "sqeuclidean",
        "score_form": "1-wmd",
    },
}
"""The two public configurations (``version``): ``moverscore_v2.py`` and ``moverscore.py`` of the
authors' release (github.com/AIPHES/emnlp19-moverscore)."""

CHOICES = {
    "variant": ("wmd", "smd"),
    "aggregation": ("layer", "power_means"),
    "cost": ("euclidean", "sqeuclidean"),
    "score_form": ("1/(1+wmd)", "1-wmd"),
}

POWER_MEAN_LAYERS = 5
"""Power means run over the last five layers (Section 3.3, "Aggregation")."""

# Pairs per batch of cost matrices (sorted by unit counts, so there is little padding), and the
# most cost entries a batch holds (32 MiB in float64).
PAIR_BATCH = 128
COST_ELEMENTS = 1 << 22

# The network simplex stops at this many iterations (POT's default, 1e5, can be too few for two
# 512-token texts, and then the plan is not optimal).
EMD_MAX_ITER = 10_000_000


@dataclass(frozen=True)
class Config:
    """A resolved MoverScore configuration: a preset with the user's overrides, checked."""

    version: str
    variant: str
    n_gram: int
    aggregation: str
    idf: bool | dict
    prediction_idf: bool | dict
    stop_words: frozenset
    remove_subwords: bool
    remove_punctuation: bool
    cost: str
    score_form: str


def resolve_config(version: str = "v2", **overrides) -> Config:
    """The preset ``version`` with every override that is not None; errors name the argument."""
    if version not in PRESETS:
        raise ValueError(f"version must be one of {', '.join(PRESETS)}; got {version!r}")
    given = {key: value for key, value in overrides.items() if value is not None}
    values = {**PRESETS[version], **given}
    for key, allowed in CHOICES.items():
        if values[key] not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(map(repr, allowed))}; got {values[key]!r}")
    n_gram = values["n_gram"]
    if isinstance(n_gram, bool) or not isinstance(n_gram, int) or n_gram < 1:
        raise ValueError(f"n_gram must be an int >= 1, got {n_gram!r}")
    if values["variant"] == "smd" and "n_gram" in given:
        raise ValueError("n_gram has no effect with variant='smd' (the sentence is one unit); leave it out")
    for key in ("remove_subwords", "remove_punctuation"):
        if not isinstance(values[key], bool):
            raise TypeError(f"{key} must be True or False, got {values[key]!r}")
    stop_words = values["stop_words"]
    if isinstance(stop_words, str) or not all(isinstance(w, str) for w in stop_words):
        raise TypeError("stop_words must be a list of strings")
    idf = check_idf(values["idf"])
    prediction_idf = check_idf(given.get("prediction_idf", idf))
    return Config(
        version=version,
        variant=values["variant"],
        n_gram=n_gram,
        aggregation=values["aggregation"],
        idf=idf,
        prediction_idf=prediction_idf,
        stop_words=frozenset(stop_words),
        remove_subwords=values["remove_subwords"],
        remove_punctuation=values["remove_punctuation"],
        cost=values["cost"],
        score_form=values["score_form"],
    )


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MoverScore(TextPairMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            homepage="https://github.com/AIPHES/emnlp19-moverscore",
            inputs_description=_KWARGS_DESCRIPTION,
            features=text_pair_features(),
            codebase_urls=["https://github.com/AIPHES/emnlp19-moverscore"],
            reference_urls=["https://aclanthology.org/D19-1053", "https://aclanthology.org/2020.eval4nlp-1.6"],
        )

    def _compute(
        self,
        predictions,
        references,
        version: str = "v2",
        variant: str | None = None,
        n_gram: int | None = None,
        aggregation: str | None = None,
        model_type: str | None = None,
        num_layers: int | None = None,
        idf: bool | dict | None = None,
        prediction_idf: bool | dict | None = None,
        stop_words: list[str] | None = None,
        remove_subwords: bool | None = None,
        remove_punctuation: bool | None = None,
        cost: str | None = None,
        score_form: str | None = None,
        centering: str = "none",
        centering_stats=None,
        batch_size: int = 64,
        device: str | None = None,
        verbose: bool = False,
        max_length: int | None = None,
        return_alignment: bool = False,
    ):
        config = resolve_config(
            version,
            variant=variant,
            n_gram=n_gram,
            aggregation=aggregation,
            idf=idf,
            prediction_idf=prediction_idf,
            stop_words=stop_words,
            remove_subwords=remove_subwords,
            remove_punctuation=remove_punctuation,
            cost=cost,
            score_form=score_form,
        )
        top = -1 if num_layers is None else num_layers
        encoding = {
            "model_type": model_type,
            "num_layers": top,
            "device": device,
            "batch_size": batch_size,
            "max_length": max_length,
            "verbose": verbose,
        }
        if config.aggregation == "power_means":
            data = prepare_power_means(predictions, references, centering=centering, **encoding)
        else:
            data = prepare_pairs(
                predictions, references, centering=centering, centering_stats=centering_stats, **encoding
            )
        keep = kept_tokens(data, config)
        data = with_moverscore_weights(data, config, keep)
        pred, ref = side_units(data, keep, config)
        scores = score_pairs(data, pred, ref, config)
        best_scores, best = best_per_group(scores, data.group, data.n_predictions)
        results = {"moverscore": best_scores.tolist(), "hashcode": hashcode(data, config)}
        if return_alignment:
            results["alignment"] = [alignment(data, pred, ref, int(k), config) for k in best]
        return results


def hashcode(data: PairData, config: Config) -> str:
    layers = data.clouds.layers or (data.encoder.layer,)
    stop = "none"
    if config.stop_words:
        stop = hashlib.sha1("\n".join(sorted(config.stop_words)).encode()).hexdigest()[:10]
    return get_hash(
        "moverscore",
        data.encoder,
        idf=config.idf,
        centering=data.centering,
        stats=data.stats,
        preset=config.version,
        variant=config.variant,
        n_gram=config.n_gram if config.variant == "wmd" else "all",
        aggregation=config.aggregation,
        layers="-".join(map(str, layers)),
        prediction_idf=idf_tag(config.prediction_idf),
        stop_words=stop,
        remove_subwords=config.remove_subwords,
        remove_punctuation=config.remove_punctuation,
        cost=config.cost,
        score_form=config.score_form,
    )


# ---------------------------------------------------------------------------------------------
# Token vectors: one layer (``prepare_pairs``) or the power means of the last five layers


def power_means_layers(top: int) -> tuple[int, ...]:
    """The block outputs Eq. (5) aggregates: the last five up to ``top`` (all, if fewer)."""
    return tuple(range(max(1, top - POWER_MEAN_LAYERS + 1), top + 1))


def power_means(layer_vectors: torch.Tensor) -> torch.Tensor:
    r"""Concatenated power means over layers, Eq. (5) with :math:`p \in \{-\infty, 1, +\infty\}`:

    .. math::

        E(x_i) = \min_l z_{i,l} \oplus \tfrac{1}{L}\textstyle\sum_l z_{i,l} \oplus \max_l z_{i,l}

    (elementwise min, mean, max; Eq. (4) at :math:`p = -\infty, 1, +\infty`). ``layer_vectors``
    has shape (L, n_tokens, D), each layer already L2-normalised; returns (n_tokens, 3 D).
    """
    return torch.cat([layer_vectors.amin(0), layer_vectors.mean(0), layer_vectors.amax(0)], dim=-1)


def prepare_power_means(
    predictions, references, *, model_type, num_layers, device, batch_size, max_length, verbose, centering
) -> PairData:
    """:func:`moverkit._core.prepare_pairs` for ``aggregation="power_means"``: one forward pass
    per distinct text keeps the last five layers; each is centered (``centering``) and
    L2-normalised, then :func:`power_means` gives the token vectors (not normalised again:
    Eq. (1) sums them as they are, as the release does)."""
    texts = call_texts(predictions, references)
    if centering not in CENTERING_MODES:
        raise ValueError(f"centering must be one of {', '.join(CENTERING_MODES)}; got {centering!r}")
    if centering == "corpus":
        raise ValueError(
            "centering='corpus' needs a statistic fitted for one layer; with aggregation='power_means' "
            "use 'none', 'dim', 'sentence' or 'batch'"
        )
    encoder = get_encoder(model_type, num_layers, device)
    layers = power_means_layers(encoder.layer)
    clouds = encode(
        encoder, texts.unique, batch_size=batch_size, max_length=max_length, verbose=verbose, layers=layers
    )
    counts = texts.counts()
    normalised = torch.stack(
        [center(clouds.with_vectors(v), centering, counts=counts).vectors for v in clouds.layer_vectors]
    )
    vectors = power_means(normalised)
    del normalised
    pred_index, ref_index = texts.pair_indices(vectors.device)
    return PairData(
        encoder=encoder,
        clouds=replace(clouds, vectors=vectors, layer_vectors=None),
        pred_weights=token_weights(clouds, False),
        ref_weights=token_weights(clouds, False),
        pred_index=pred_index,
        ref_index=ref_index,
        group=texts.group,
        n_predictions=len(texts.predictions),
        centering=centering,
        stats=None,
        idf=False,
        prediction_idf=False,
    )


# ---------------------------------------------------------------------------------------------
# Weights and filters


def with_moverscore_weights(data: PairData, config: Config, keep: torch.Tensor) -> PairData:
    """``data`` with MoverScore's token weights: IDF fitted on the references (each pair's
    reference one document) for the reference side and, separately, on the predictions (each
    prediction one document) for the prediction side, or the given dicts, or 1; 0 for special
    tokens and for the tokens the filters drop (``keep`` False).

    A text whose kept tokens all have IDF 0 (each occurs in every text of the IDF corpus, as
    with a single pair) would leave an empty distribution; its kept tokens are then weighted
    uniformly, with a warning. (The tables are built here rather than by
    ``prepare_pairs(idf=True, prediction_idf=True)``, which at present reuses the reference table
    for the predictions.)
    """
    ids = data.clouds.token_ids
    ref_table = config.idf
    if ref_table is True:
        ref_table = IdfTable(ids[int(t)] for t in data.ref_index.tolist())
    pred_table = config.prediction_idf
    if pred_table is True:
        first_pair = torch.full((data.n_predictions,), len(data.pred_index), dtype=torch.long)
        first_pair.scatter_reduce_(0, data.group, torch.arange(len(data.group)), reduce="amin")
        pred_table = IdfTable(ids[int(data.pred_index[k])] for k in first_pair.tolist())
    pred_weights = token_weights(data.clouds, pred_table) * keep
    ref_weights = token_weights(data.clouds, ref_table) * keep
    pred_weights, n_pred = _uniform_if_massless(data, pred_weights, keep, data.pred_index)
    ref_weights, n_ref = _uniform_if_massless(data, ref_weights, keep, data.ref_index)
    if n_pred or n_ref:
        warnings.warn(
            f"{n_pred} prediction(s) and {n_ref} reference(s) have IDF 0 on every token kept (each token occurs "
            "in every text the IDF was fitted on, as with a single pair); they are weighted uniformly instead. "
            "Score more pairs in one call, or pass idf=False.",
            stacklevel=3,
        )
    return replace(
        data, pred_weights=pred_weights, ref_weights=ref_weights, idf=config.idf, prediction_idf=config.prediction_idf
    )


def _uniform_if_massless(data: PairData, weights: torch.Tensor, keep: torch.Tensor, used: torch.Tensor):
    """Weight 1 on the kept non-special tokens of every text whose ``weights`` sum to 0 although
    it keeps some token; returns the weights and how many of the texts in ``used`` changed."""
    clouds = data.clouds
    text_of = clouds.text_index()
    candidates = keep & ~clouds.special
    mass = torch.zeros(len(clouds.texts), dtype=weights.dtype, device=weights.device).index_add_(0, text_of, weights)
    n_candidates = torch.zeros_like(mass).index_add_(0, text_of, candidates.to(weights.dtype))
    massless = (mass == 0) & (n_candidates > 0)
    weights = torch.where(massless[text_of] & candidates, torch.ones_like(weights), weights)
    return weights, int(massless[torch.unique(used)].sum())


@lru_cache(maxsize=8)
def _subword_marker(tokenizer) -> tuple[str, bool]:
    """How the tokenizer marks word pieces: ``("##", True)`` for WordPiece (the marker starts a
    continuation), ``("Ġ", False)`` or ``("▁", False)`` for byte-level BPE and SentencePiece (the
    marker starts a word)."""
    vocab = tokenizer.get_vocab()
    for marker, continuation in (("##", True), ("Ġ", False), ("▁", False)):
        if sum(token.startswith(marker) for token in vocab) > len(vocab) // 100:
            return marker, continuation
    return "", False


def dropped_tokens(tokens: list[str], special: list[bool], tokenizer, config: Config) -> list[bool]:
    """Which tokens the filters leave out (special tokens never: they weigh 0 already).

    As the release: a subword piece is a token containing ``##`` (WordPiece); punctuation is a
    token made only of ``string.punctuation``; a stop word is a token in ``stop_words``.
    """
    marker, continuation = _subword_marker(tokenizer)
    if config.remove_subwords and not marker:
        raise ValueError(f"remove_subwords: cannot tell word pieces of {type(tokenizer).__name__}; pass False")
    dropped = []
    first_word = True
    for token, is_special in zip(tokens, special):
        if is_special:
            dropped.append(False)
            continue
        has_marker = token.startswith(marker) if marker else False
        word = token[len(marker) :] if has_marker else token
        subword = has_marker if continuation else (not has_marker and not first_word)
        first_word = False
        dropped.append(
            (config.remove_subwords and subword)
            or (config.remove_punctuation and bool(word) and all(c in string.punctuation for c in word))
            or word in config.stop_words
            or token in config.stop_words
        )
    return dropped


def kept_tokens(data: PairData, config: Config) -> torch.Tensor:
    """Flat mask over all token rows (specials included) of the tokens the filters keep."""
    clouds = data.clouds
    if not (config.remove_subwords or config.remove_punctuation or config.stop_words):
        return torch.ones_like(clouds.special)
    special = clouds.special.cpu().tolist()
    offsets = clouds.offsets.cpu().tolist()
    dropped = []
    for i in range(len(clouds.texts)):
        dropped += dropped_tokens(clouds.tokens(i), special[offsets[i] : offsets[i + 1]], clouds.tokenizer, config)
    return ~torch.tensor(dropped, dtype=torch.bool, device=clouds.special.device)


# ---------------------------------------------------------------------------------------------
# Units (tokens, n-grams or the sentence), costs and exact transport


@dataclass(frozen=True)
class Units:
    """The transport units of every text on one side (prediction or reference), stored flat:
    text ``t`` owns rows ``offsets[t]:offsets[t + 1]``; only units of positive weight are kept.
    Unit ``u`` spans the kept tokens ``first[u]:last[u]`` (indices into ``tokens``)."""

    vectors: torch.Tensor  # (n_units, D), L2-normalised
    weights: torch.Tensor  # (n_units,), float64, > 0
    offsets: torch.Tensor  # (n_texts + 1,)
    first: torch.Tensor  # (n_units,)
    last: torch.Tensor  # (n_units,)
    tokens: torch.Tensor  # (n_kept,) flat token rows of the kept tokens, in text order

    def counts(self, texts: torch.Tensor) -> torch.Tensor:
        return self.offsets[texts + 1] - self.offsets[texts]


def text_units(data: PairData, weights: torch.Tensor, keep: torch.Tensor, texts: torch.Tensor, n: int | None):
    r"""The units of the texts ``texts`` (indices into ``data.clouds``), Eqs. (1)-(2):

    .. math::

        E(x_i^n) = \sum_{k=i}^{i+n-1} \mathrm{idf}(x_k) E(x_k), \qquad
        f_{x_i^n} \propto \sum_{k=i}^{i+n-1} \mathrm{idf}(x_k)

    over windows of ``n`` consecutive kept tokens (``keep``; special tokens stay, with weight 0,
    as in the release), stride 1; a text with fewer than ``n`` kept tokens is one unit, and
    ``n=None`` (the sentence mover) makes every text one unit. Unit embeddings are L2-normalised;
    units of weight 0 are left out (they carry no mass). Each text is done once, not once per pair.
    """
    clouds = data.clouds
    n_texts = len(clouds.texts)
    in_side = torch.zeros(n_texts, dtype=torch.bool, device=keep.device)
    in_side[texts] = True
    text_of = clouds.text_index()
    rows = torch.nonzero(keep & in_side[text_of]).flatten()
    text = text_of[rows]
    w = weights[rows].double()
    v = clouds.vectors[rows]
    n_kept = torch.bincount(text, minlength=n_texts)
    kept_start = torch.cumsum(n_kept, 0) - n_kept
    if n is None:
        has_tokens = n_kept > 0
        first, last = kept_start[has_tokens], (kept_start + n_kept)[has_tokens]
        unit_weights = w.new_zeros(n_texts).index_add_(0, text, w)[has_tokens]
        unit_vectors = v.new_zeros(n_texts, v.shape[1]).index_add_(0, text, w.to(v.dtype)[:, None] * v)[has_tokens]
    else:
        local = torch.arange(len(rows), device=rows.device) - kept_start[text]
        first = torch.nonzero((local + n <= n_kept[text]) | (local == 0)).flatten()
        last = torch.minimum(first + n, (kept_start + n_kept)[text[first]])
        # u = units, k = position in the window (at most n), d = dimension
        window = first[:, None] + torch.arange(n, device=rows.device)[None, :]
        inside = window < last[:, None]
        window = torch.where(inside, window, first[:, None])
        window_weights = w[window] * inside
        unit_weights = window_weights.sum(1)
        unit_vectors = torch.einsum("uk,ukd->ud", window_weights.to(v.dtype), v[window])
    positive = unit_weights > 0
    offsets = torch.zeros(n_texts + 1, dtype=torch.long, device=rows.device)
    torch.cumsum(torch.bincount(text[first][positive], minlength=n_texts), 0, out=offsets[1:])
    return Units(
        vectors=torch.nn.functional.normalize(unit_vectors[positive], dim=-1),
        weights=unit_weights[positive],
        offsets=offsets,
        first=first[positive],
        last=last[positive],
        tokens=rows,
    )


def pad_units(units: Units, texts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The units of ``texts`` padded to one length: vectors (B, L, D) and weights (B, L), zero at padding."""
    counts = units.counts(texts)
    width = max(int(counts.max()) if len(texts) else 0, 1)
    if len(units.weights) == 0:
        dim = units.vectors.shape[1]
        return units.vectors.new_zeros(len(texts), width, dim), units.weights.new_zeros(len(texts), width)
    steps = torch.arange(width, device=counts.device)
    mask = steps[None, :] < counts[:, None]
    index = torch.where(mask, units.offsets[texts][:, None] + steps[None, :], 0)
    return units.vectors[index] * mask[..., None], units.weights[index] * mask


def pairwise_cost(x: torch.Tensor, y: torch.Tensor, cost: str) -> torch.Tensor:
    """Euclidean (or squared Euclidean) distances between the units of each pair, float64:
    (B, n, D), (B, m, D) -> (B, n, m). Float64 keeps the distance of near-identical vectors
    from drowning in the rounding of ``|x|^2 + |y|^2 - 2 x.y``."""
    x, y = x.double(), y.double()
    # b = pairs, n = prediction units, m = reference units, d = dimension
    sq = (x * x).sum(-1)[:, :, None] + (y * y).sum(-1)[:, None, :] - 2 * torch.einsum("bnd,bmd->bnm", x, y)
    sq = sq.clamp_min(0.0)
    return sq if cost == "sqeuclidean" else sq.sqrt()


def pair_batches(n_pred: torch.Tensor, n_ref: torch.Tensor) -> list[torch.Tensor]:
    """Pair indices in batches of similar unit counts (little padding): at most
    :data:`PAIR_BATCH` pairs and :data:`COST_ELEMENTS` cost entries per batch."""
    order = torch.argsort(torch.minimum(n_pred, n_ref), stable=True)
    order = order[torch.argsort(torch.maximum(n_pred, n_ref)[order], stable=True)]
    batches, start, width_p, width_r = [], 0, 1, 1
    for end, k in enumerate(order.tolist()):
        wp, wr = max(width_p, int(n_pred[k])), max(width_r, int(n_ref[k]))
        if end > start and (end - start == PAIR_BATCH or (end - start + 1) * wp * wr > COST_ELEMENTS):
            batches.append(order[start:end])
            start, wp, wr = end, max(1, int(n_pred[k])), max(1, int(n_ref[k]))
        width_p, width_r = wp, wr
    return batches + [order[start:]] if len(order) else batches


def transport(a: np.ndarray, b: np.ndarray, cost: np.ndarray, with_plan: bool = False):
    r"""Exact EMD (POT's network simplex, float64) between weights ``a`` and ``b`` (normalised
    here to sum 1) under ``cost``: ``(wmd, plan)``, the plan only ``with_plan``.

    .. math::

        \mathrm{WMD} = \min_{F \ge 0} \langle C, F \rangle
        \quad \text{s.t.}\quad F 1 = a, \; F^\top 1 = b
    """
    a, b, cost = a / a.sum(), b / b.sum(), np.ascontiguousarray(cost)
    if with_plan:
        plan = ot.emd(a, b, cost, numItermax=EMD_MAX_ITER)
        return float((plan * cost).sum()), plan
    return float(ot.emd2(a, b, cost, numItermax=EMD_MAX_ITER)), None


def to_score(distance: float | None, score_form: str) -> float:
    """``1/(1+d)`` or ``1-d``; 0.0 for a pair with an empty side (documented value)."""
    if distance is None:
        return 0.0
    return 1.0 / (1.0 + distance) if score_form == "1/(1+wmd)" else 1.0 - distance


def side_units(data: PairData, keep: torch.Tensor, config: Config) -> tuple[Units, Units]:
    """The units of the predictions (with their weights) and of the references (with theirs)."""
    n = None if config.variant == "smd" else config.n_gram
    return (
        text_units(data, data.pred_weights, keep, data.pred_index, n),
        text_units(data, data.ref_weights, keep, data.ref_index, n),
    )


def score_pairs(data: PairData, pred: Units, ref: Units, config: Config) -> torch.Tensor:
    """MoverScore of every pair: costs batched (one tensor operation per batch of pairs), then
    one exact solve per pair."""
    n_pred, n_ref = pred.counts(data.pred_index).cpu(), ref.counts(data.ref_index).cpu()
    scores = np.zeros(len(data.pred_index))
    for batch in pair_batches(n_pred, n_ref):
        x, a = pad_units(pred, data.pred_index[batch.to(data.pred_index.device)])
        y, b = pad_units(ref, data.ref_index[batch.to(data.ref_index.device)])
        cost = pairwise_cost(x, y, config.cost).cpu().numpy()
        a, b = a.cpu().numpy(), b.cpu().numpy()
        for row, k in enumerate(batch.tolist()):
            p, r = int(n_pred[k]), int(n_ref[k])
            distance = transport(a[row, :p], b[row, :r], cost[row, :p, :r])[0] if p and r else None
            scores[k] = to_score(distance, config.score_form)
    return torch.from_numpy(scores)


def unit_labels(data: PairData, units: Units, text: int) -> list[str]:
    """Names of the units of ``text``: the kept tokens each spans, joined by spaces."""
    ids, offset = data.clouds.token_ids[text], int(data.clouds.offsets[text])
    rows = units.tokens.tolist()
    span = slice(int(units.offsets[text]), int(units.offsets[text + 1]))
    labels = []
    for i, j in zip(units.first[span].tolist(), units.last[span].tolist()):
        labels.append(" ".join(data.clouds.tokenizer.convert_ids_to_tokens([ids[r - offset] for r in rows[i:j]])))
    return labels


def alignment(data: PairData, pred: Units, ref: Units, pair: int, config: Config) -> dict:
    """Units of one pair (those with positive weight), the optimal flow and the cost matrix."""
    t_pred, t_ref = data.pred_index[pair : pair + 1], data.ref_index[pair : pair + 1]
    if int(pred.counts(t_pred)[0]) == 0 or int(ref.counts(t_ref)[0]) == 0:
        return {"prediction_tokens": [], "reference_tokens": [], "flow": [], "cost": []}
    (x, a), (y, b) = pad_units(pred, t_pred), pad_units(ref, t_ref)
    cost = pairwise_cost(x, y, config.cost)[0].cpu().numpy()
    _, plan = transport(a[0].cpu().numpy(), b[0].cpu().numpy(), cost, with_plan=True)
    return {
        "prediction_tokens": unit_labels(data, pred, int(t_pred[0])),
        "reference_tokens": unit_labels(data, ref, int(t_ref[0])),
        "flow": plan.tolist(),
        "cost": cost.tolist(),
    }
