# Copyright 2026 The moverkit authors.
# Licensed under the Apache License, Version 2.0.
"""Tempered Word Mover Distance (TWMD, TRWMD) and its family (SBERT, Wordset-CKA) on centered token vectors."""

import dataclasses
import math
import numbers

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
"""

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

Token vectors are centered first (Section 5; batch centering is the paper's best, and the default)
and scaled to unit length. Only word tokens take part: the tokenizer's [CLS]/[SEP] are left out.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the texts to score.
    references (list of str, or list of list of str): one reference per prediction, or a list of
        references per prediction; each prediction is then scored against each of its references
        and the best score is kept.
    variant (str, default "twmd"): the member of the family: "twmd" (tempered WMD, Sinkhorn),
        "trwmd" (tempered relaxed WMD, closed form), "sbert" (cosine of mean-pooled token vectors)
        or "cka" (Wordset-CKA). The result key is the variant's name.
    temperature (float, optional): T > 0 of twmd and trwmd (ignored by sbert and cka). Default:
        the paper's values tuned on WMT15-16 (Section 6.2): twmd 0.02 with centering "none" or
        "dim", 0.10 with a mean centering ("sentence", "batch", "corpus"); trwmd 0.02 / 0.15.
    sinkhorn_iterations (int, default 1): Sinkhorn steps of twmd (Eq. 6); the paper recommends 1.
        Many steps converge to the entropic optimal transport plan. Ignored by the other variants.
    normalize (bool, default True): divide by sqrt(C(X1, X1) C(X2, X2)) (Eq. 1), so that a text
        scores 1 against itself; False returns the raw C(X1, X2).
    model_type (str, optional): a Hugging Face model id or local path. Default: the embedded
        sentence-transformers/all-MiniLM-L6-v2 (installed with moverkit, no download).
    num_layers (int, optional): the layer whose token vectors are used (k = output of the k-th
        block, negative counts from the top). Default: a tuned layer for known models, else the last.
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
        prediction and of its best reference, their cosine similarity matrix and the transport plan.

Returns:
    twmd | trwmd | sbert | cka (list of float): per prediction, the score of the chosen variant;
        higher is better. Normalized: 1 for identical texts; sbert in [-1, 1], cka in [0, 1]; twmd
        in [-1, 1] in practice (Eq. 1 does not bound it); trwmd can pass 1 slightly (Eq. 7 holds
        an entropy term; at most 1.0008 on WMT17). An empty (or whitespace-only) prediction or
        reference, or a text whose vectors centering turns to zero (one token, "sentence"), scores 0.0.
    hashcode (str): model, layer, centering, variant, its parameters and versions.
    alignment (list of dict, only with return_alignment): "prediction_tokens", "reference_tokens",
        "similarity" and "plan" (rows: prediction tokens; columns: reference tokens). The plan
        sums to 1: twmd's after its Sinkhorn steps, trwmd's closed-form optimum (each reference
        token's 1/L1 spread by a softmax), sbert's uniform coupling; None for cka.

Examples:
    >>> metric = evaluate.load("metrics/twmd")
    >>> results = metric.compute(predictions=["hello there", "general kenobi"],
    ...                          references=["hello there", "general kenobi"])
    >>> print([round(v, 2) for v in results["twmd"]])
    [1.0, 1.0]
    >>> results = metric.compute(predictions=["the cat sat on the mat"],
    ...                          references=["a cat was sitting on the mat"], variant="trwmd")
    >>> print(sorted(results), results["trwmd"][0] < 1.0)
    ['hashcode', 'trwmd'] True
"""

VARIANTS = ("twmd", "trwmd", "sbert", "cka")

# Chen et al. (2020), Section 6.2: temperatures tuned on WMT15-16 (RoBERTa), without centering and
# with batch centering. Centering by a mean (batch, corpus, sentence) moves the cosines from about
# [0.3, 1] to about [-0.3, 1]; "dim" changes them very little (paper, Section 5 and Table 1).
DEFAULT_TEMPERATURES = {
    "twmd": {"uncentered": 0.02, "centered": 0.10},
    "trwmd": {"uncentered": 0.02, "centered": 0.15},
}
MEAN_CENTERINGS = ("sentence", "batch", "corpus")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class TWMD(TextPairMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            homepage="https://aclanthology.org/2020.eval4nlp-1.6",
            inputs_description=_KWARGS_DESCRIPTION,
            features=text_pair_features(),
            codebase_urls=["https://github.com/PythonOT/POT"],
            reference_urls=["https://aclanthology.org/2020.eval4nlp-1.6", "https://arxiv.org/abs/1306.0895"],
        )

    def _compute(
        self,
        predictions,
        references,
        variant: str = "twmd",
        temperature: float | None = None,
        sinkhorn_iterations: int = 1,
        normalize: bool = True,
        model_type: str | None = None,
        num_layers: int | None = None,
        batch_size: int = 64,
        device: str | None = None,
        verbose: bool = False,
        centering: str = "batch",
        centering_stats=None,
        max_length: int | None = None,
        return_alignment: bool = False,
    ):
        params = resolve_params(variant, temperature, sinkhorn_iterations, normalize, centering)
        data = prepare_pairs(
            predictions,
            references,
            model_type=model_type,
            num_layers=num_layers,
            device=device,
            batch_size=batch_size,
            max_length=max_length,
            verbose=verbose,
            centering=centering,
            centering_stats=centering_stats,
        )
        scores = pair_values(data, params)
        if normalize:
            scores = normalized(scores, self_values(data, params), data.ref_index, data.pred_index)
        best, which = best_per_group(scores, data.group, data.n_predictions)
        results = {
            variant: best.tolist(),
            "hashcode": get_hash("twmd", data.encoder, idf=False, centering=centering, stats=data.stats, **params),
        }
        if return_alignment:
            results["alignment"] = [alignment(data, int(k), params) for k in which]
        return results


def resolve_params(variant, temperature, sinkhorn_iterations, normalize, centering) -> dict:
    """The variant's parameters, checked and with defaults filled in, in hashcode order.

    A variant lists only the parameters it uses: twmd (temperature, Sinkhorn steps), trwmd
    (temperature), sbert and cka (neither). ``temperature=None`` takes :data:`DEFAULT_TEMPERATURES`
    for the centering mode.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    iterations = sinkhorn_iterations
    if isinstance(iterations, bool) or not isinstance(iterations, numbers.Integral) or iterations < 1:
        raise ValueError(f"sinkhorn_iterations must be an int >= 1, got {sinkhorn_iterations!r}")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, numbers.Real)
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise ValueError(
            f"temperature must be a finite number > 0 (or None for the paper's default), got {temperature!r}"
        )
    if not isinstance(normalize, bool):
        raise TypeError(f"normalize must be True or False, got {normalize!r}")
    params = {"variant": variant}
    if variant in DEFAULT_TEMPERATURES:
        if temperature is None:
            temperature = DEFAULT_TEMPERATURES[variant]["centered" if centering in MEAN_CENTERINGS else "uncentered"]
        params["temperature"] = float(temperature)
    if variant == "twmd":
        params["sinkhorn_iterations"] = int(iterations)
    params["normalize"] = normalize
    return params


def pair_values(data, params) -> torch.Tensor:
    """C(reference, prediction) of every pair, float64, shape (n_pairs,)."""
    values = torch.zeros(len(data.pred_index), dtype=torch.float64, device=data.pred_index.device)
    for batch in data.batches():
        pred, ref = data.pad_pairs(batch)
        values[batch] = family_value(similarity(ref, pred), ref.mask, pred.mask, params)
    return values


def self_values(data, params) -> torch.Tensor:
    """C(X, X) of every text that takes part, by the same procedure as the pairs (Eq. 1), indexed
    like ``data.clouds``; texts taking no part keep 0."""
    texts = torch.unique(torch.cat([data.pred_index, data.ref_index]))
    as_pairs = dataclasses.replace(data, pred_index=texts, ref_index=texts, group=torch.arange(len(texts)))
    values = torch.zeros(len(data.clouds.texts), dtype=torch.float64, device=texts.device)
    values[texts] = pair_values(as_pairs, params)
    return values


def normalized(cross: torch.Tensor, own: torch.Tensor, ref_index: torch.Tensor, pred_index: torch.Tensor):
    r"""Eq. (1): :math:`C(X_1, X_2) / \sqrt{C(X_1, X_1) C(X_2, X_2)}`; 0 where a self-similarity is
    not positive (an empty text, or vectors that centering turned to zero)."""
    denominator = own[ref_index].clamp_min(0) * own[pred_index].clamp_min(0)
    return torch.where(denominator > 0, cross / denominator.sqrt().clamp_min(1e-300), 0.0)


def similarity(ref, pred) -> torch.Tensor:
    """Token similarities s_ij = <x1_i, x2_j> of padded clouds (cosines: the vectors are unit)."""
    # b = pairs, r = reference tokens (X1, rows), p = prediction tokens (X2, columns), d = dimension
    return torch.einsum("brd,bpd->brp", ref.vectors, pred.vectors)


def family_value(sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, params: dict) -> torch.Tensor:
    """C(X1, X2) of the variant ``params["variant"]`` for a padded batch, float64, shape (B,); 0
    where a side is empty (sums run in float64).

    ``sim`` (B, L1, L2) holds s_ij, zero at padding; ``rows`` (B, L1) and ``cols`` (B, L2) mark the
    real tokens of X1 (reference) and X2 (prediction).
    """
    variant = params["variant"]
    if variant == "twmd":
        log_plan = sinkhorn_log_plan(sim, rows, cols, params["temperature"], params["sinkhorn_iterations"])
        return (log_plan.exp() * sim).sum((1, 2), dtype=torch.float64)
    if variant == "trwmd":
        return trwmd_value(sim, rows, cols, params["temperature"])
    n_rows, n_cols = rows.sum(1), cols.sum(1)
    if variant == "sbert":
        return sim.sum((1, 2), dtype=torch.float64) / (n_rows * n_cols).clamp_min(1)
    return sim.square().sum((1, 2), dtype=torch.float64)


def sinkhorn_log_plan(
    sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, temperature: float, iterations: int
) -> torch.Tensor:
    r"""Log of the TWMD transport plan after ``iterations`` Sinkhorn steps (Eq. 5, 6).

    .. math::

        \max_\pi \sum_{ij} \pi_{ij} s_{ij} - T \sum_{ij} \pi_{ij} \log \pi_{ij}
        \quad\text{s.t.}\quad \textstyle\sum_i \pi_{ij} = 1/L_2,\ \sum_j \pi_{ij} = 1/L_1

    Its solution is :math:`\pi = \operatorname{diag}(u)\, K \operatorname{diag}(v)` with the kernel
    :math:`K_{ij} = \exp(+s_{ij}/T)`, which favours similar tokens, as this maximisation of
    similarity needs (the paper's Eq. (6) starts from :math:`\exp(-\langle x_1^i, x_2^j\rangle/T)`,
    the sign of Cuturi's cost minimisation, which would favour dissimilar tokens). Each step scales
    the columns to sum to :math:`1/L_2`, then the rows to :math:`1/L_1` (Eq. 6), in the log domain:

    .. math::

        \log \xi = \log \pi - \operatorname{LSE}_i \log \pi - \log L_2,\qquad
        \log \pi \leftarrow \log \xi - \operatorname{LSE}_j \log \xi - \log L_1,\qquad
        \log \pi^{(0)} = s / T

    Written on the log-plan itself (each half step a ``log_softmax``), every value stays in
    :math:`[-\infty, 0]` after the first half step, so nothing over- or underflows and the last
    marginals hold to rounding at any T, in float32 too (scaling potentials :math:`\log u, \log v`
    grow like :math:`1/T` and lose float32 precision at tiny T). This is POT's ``sinkhorn_log``
    batched over padded pairs of different sizes, which POT does not offer. Padding gets
    :math:`-\infty`; a pair with an empty side gets an all-zero plan.
    """
    dead = ~(rows[:, :, None] & cols[:, None, :])
    log_a = -rows.sum(1).clamp_min(1).to(sim.dtype).log()[:, None, None]
    log_b = -cols.sum(1).clamp_min(1).to(sim.dtype).log()[:, None, None]
    log_plan = (sim / temperature).masked_fill(dead, -math.inf)
    for _ in range(iterations):
        log_plan = torch.log_softmax(log_plan, dim=1).add_(log_b).masked_fill_(dead, -math.inf)
        log_plan = torch.log_softmax(log_plan, dim=2).add_(log_a).masked_fill_(dead, -math.inf)
    return log_plan


def trwmd_value(sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, temperature: float) -> torch.Tensor:
    r"""TRWMD, Eq. (7): :math:`C = \frac{T}{L_1} \sum_i \log \sum_j \exp(s_{ij}/T)`.

    It is the optimum of Eq. (4) with the entropy term, less the constant :math:`T \log L_1`,
    reached by :math:`\pi^*_{ij} = \operatorname{softmax}_j(s_{ij}/T)/L_1`; as
    :math:`T \to 0` it tends to :math:`\frac{1}{L_1}\sum_i \max_j s_{ij}`, BERTScore's recall (Eq. 3),
    from above by at most :math:`T \log L_2`.
    """
    lse = torch.logsumexp((sim / temperature).masked_fill(~cols[:, None, :], -math.inf), dim=2)
    n_rows = rows.sum(1)
    keep = rows & (cols.sum(1) > 0)[:, None]
    return temperature * torch.where(keep, lse, 0.0).sum(1, dtype=torch.float64) / n_rows.clamp_min(1)


def transport_plan(sim: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, params: dict) -> torch.Tensor | None:
    """The plan behind C for a padded batch, (B, L1, L2), summing to 1 per pair (None for cka)."""
    variant = params["variant"]
    if variant == "twmd":
        return sinkhorn_log_plan(sim, rows, cols, params["temperature"], params["sinkhorn_iterations"]).exp()
    live = rows[:, :, None] & cols[:, None, :]
    if variant == "trwmd":
        logits = (sim / params["temperature"]).masked_fill(~live, -math.inf)
        plan = torch.softmax(logits, dim=2).nan_to_num(0.0)
        return plan / rows.sum(1).clamp_min(1)[:, None, None]
    if variant == "sbert":
        return live / (rows.sum(1) * cols.sum(1)).clamp_min(1)[:, None, None]
    return None


def alignment(data, pair: int, params: dict) -> dict:
    """Tokens of a pair (special tokens left out), cosine matrix and plan, rows = prediction tokens."""
    pred, ref = data.pad_pairs(torch.tensor([pair], device=data.pred_index.device))
    n_ref, n_pred = int(ref.mask.sum()), int(pred.mask.sum())
    sim = similarity(ref, pred)
    plan = transport_plan(sim, ref.mask, pred.mask, params)
    return {
        "prediction_tokens": data.clouds.scored_tokens(int(data.pred_index[pair])),
        "reference_tokens": data.clouds.scored_tokens(int(data.ref_index[pair])),
        "similarity": sim[0, :n_ref, :n_pred].T.cpu().double().tolist(),
        "plan": None if plan is None else plan[0, :n_ref, :n_pred].T.cpu().double().tolist(),
    }
