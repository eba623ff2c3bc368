r"""MoverScore (Zhao et al., 2019, Section 3): word mover (n-grams) and sentence mover distances on
contextual embeddings.

With prediction units :math:`x_i` (weights :math:`f_x`, summing to 1), reference units :math:`y_j`
(weights :math:`f_y`) and the Euclidean distance between L2-normalised unit embeddings as cost:

.. math::

    \mathrm{WMD} = \min_{F \ge 0} \sum_{ij} F_{ij} \lVert E(x_i) - E(y_j) \rVert
    \quad \text{s.t.}\quad F 1 = f_x, \; F^\top 1 = f_y

    \mathrm{moverscore} = \frac{1}{1 + \mathrm{WMD}} \;(\text{v2})
    \quad\text{or}\quad 1 - \mathrm{WMD} \;(\text{v1, the paper})

An n-gram's embedding is the IDF-weighted sum of its tokens' embeddings and its weight the sum of
their IDFs (Eqs. 1-2); the sentence mover (``variant="smd"``) makes the whole text one unit. Token
vectors come from one layer or from the power means of the last five (Eq. 5). Every EMD is solved
exactly (POT's network simplex, float64).

References
----------
.. [1] W. Zhao, M. Peyrard, F. Liu, Y. Gao, C. M. Meyer, S. Eger. MoverScore: Text Generation
   Evaluating with Contextualized Embeddings and Earth Mover Distance. EMNLP-IJCNLP 2019.
.. [2] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with Batch
   Centering and Tempered Word Mover Distance. Eval4NLP 2020 (MoverScore-b: ``centering="batch"``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass

import numpy as np
import torch

from moverkit._core import PairData, check_idf, checks, prepare_pairs
from moverkit._core.base import offsets_from, pad, pair_buckets
from moverkit._core.call import (
    MetricCall,
    PairOptions,
    PreparedChunk,
    TokenDrop,
    check_aggregated_centering,
    chunks,
)
from moverkit._core.encoding import idf_tag, warn_zero_weights, zero_weight_texts
from moverkit.functional.signature import metric_function
from moverkit.ot import exact_transport

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

COST_ELEMENTS = 1 << 22
"""Entries of one padded batch of cost matrices (pairs x prediction units x reference units; 32 MiB in float64)."""
COST_WAVE_ELEMENTS = 1 << 25
"""Entries of the cost matrices of the batches copied to the host at once (256 MiB in float64)."""


@dataclass(frozen=True)
class Config:
    """A resolved MoverScore configuration: a preset with the user's overrides, checked."""

    version: str
    variant: str
    n_gram: int
    aggregation: str
    idf: bool | Mapping
    prediction_idf: bool | Mapping
    stop_words: frozenset
    remove_subwords: bool
    remove_punctuation: bool
    cost: str
    score_form: str


def resolve_config(version: str = "v2", **overrides) -> Config:
    """The preset ``version`` with every override that is not None; errors name the argument
    (a wrong type is a ``TypeError``, a wrong value a ``ValueError``)."""
    checks.one_of("version", version, tuple(PRESETS))
    given = {key: value for key, value in overrides.items() if value is not None}
    values = {**PRESETS[version], **given}
    for key, allowed in CHOICES.items():
        checks.one_of(key, values[key], allowed)
    n_gram = checks.positive_int("n_gram", values["n_gram"])
    if values["variant"] == "smd" and "n_gram" in given:
        raise ValueError("n_gram has no effect with variant='smd' (the sentence is one unit); leave it out")
    for key in ("remove_subwords", "remove_punctuation"):
        checks.boolean(key, values[key])
    stop_words = values["stop_words"]
    if isinstance(stop_words, str) or not all(isinstance(w, str) for w in stop_words):
        raise TypeError("stop_words must be a list of strings")
    idf = check_idf(values["idf"])
    prediction_idf = check_idf(given.get("prediction_idf", idf), "prediction_idf")
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


@metric_function()  # num_layers=None: the last layer, as the releases (its spec's default_layer)
def moverscore(
    call: MetricCall,
    *,
    version: str = "v2",
    variant: str | None = None,
    n_gram: int | None = None,
    aggregation: str | None = None,
    idf: bool | Mapping | None = None,
    prediction_idf: bool | Mapping | None = None,
    stop_words: list[str] | None = None,
    remove_subwords: bool | None = None,
    remove_punctuation: bool | None = None,
    cost: str | None = None,
    score_form: str | None = None,
) -> dict:
    """MoverScore of every prediction against its best reference (the highest score), and the
    ``hashcode``; with ``return_alignment``, the units, optimal plan and cost matrix of each
    prediction and its best reference. The arguments are those of
    ``moverkit.load("moverscore").compute``. With ``rescale_with_baseline``, each score s becomes
    (s - b) / (1 - b), b the mean score of unrelated sentence pairs (:func:`~moverkit._core.call.baseline.rescale`)."""
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
    over_layers = config.aggregation == "power_means"
    if over_layers:
        check_aggregated_centering(call.centering)  # before anything is loaded, as any argument
    # A batch mean over several layers (v1's power means) is taken within one call: such a call is
    # never cut into chunks; the chunks of v1 hold its five layers of vectors.
    chunked = chunks(
        call,
        idf=config.idf,
        prediction_idf=config.prediction_idf,
        one_chunk=over_layers and call.centering.mode == "batch",
        vectors_per_token=POWER_MEAN_LAYERS if over_layers else 1,
    )
    with closing(chunked) as parts:
        return call.close([_scores(chunk, config) for chunk in parts])


def _scores(chunk: PreparedChunk, config: Config) -> dict:
    """The result of one chunk of a call (:func:`~moverkit._core.call.streaming.chunks`)."""
    data = chunk.pairs(pair_options(config))
    pred, ref = side_units(data, config)
    results, best = chunk.results(
        score_pairs(data, pred, ref, config),
        ("moverscore",),
        data,
        hash_params=hash_params(data, config),
    )
    if chunk.return_alignment:
        results["alignment"] = [alignment(data, pred, ref, int(k), config) for k in best]
    return results


def pair_options(config: Config) -> PairOptions:
    """What ``config`` asks of the pairs (:func:`~moverkit._core.call.pairs.pair_data`): its IDF on
    each side, its token filters (as the release: a subword piece is a token containing ``##``
    in WordPiece; punctuation a token made only of ``string.punctuation``; a stop word a token in
    ``stop_words``), and the power means over the last layers (v1, Eq. 5)."""
    filtering = config.remove_subwords or config.remove_punctuation or bool(config.stop_words)
    drop = TokenDrop(config.remove_subwords, config.remove_punctuation, tuple(config.stop_words))
    over_layers = config.aggregation == "power_means"
    return PairOptions(
        idf=config.idf,
        prediction_idf=config.prediction_idf,
        drop=drop if filtering else None,
        layers=POWER_MEAN_LAYERS if over_layers else None,
        layer_aggregation="power_means" if over_layers else None,
    )


def prepare(predictions, references, request, centering, config: Config, **source) -> PairData:
    """:func:`~moverkit._core.prepare_pairs` as ``config`` asks (:func:`pair_options`), outside a
    metric call: ``source`` is the ``encoder`` and ``clouds`` tuning passes (:mod:`moverkit.tuning`)."""
    return prepare_pairs(predictions, references, request, centering, pair_options(config), **source)


def hash_params(data: PairData, config: Config) -> dict:
    """The hashcode's parts of moverscore's own (:func:`~moverkit._core.get_hash`): the resolved
    configuration, the layers used and the stop list's digest."""
    stop = "none"
    if config.stop_words:
        stop = hashlib.sha1("\n".join(sorted(config.stop_words)).encode()).hexdigest()[:10]
    return dict(
        preset=config.version,
        variant=config.variant,
        n_gram=config.n_gram if config.variant == "wmd" else "all",
        aggregation=config.aggregation,
        layers="-".join(map(str, data.layers)),
        prediction_idf=idf_tag(config.prediction_idf),
        stop_words=stop,
        remove_subwords=config.remove_subwords,
        remove_punctuation=config.remove_punctuation,
        cost=config.cost,
        score_form=config.score_form,
    )


# ---------------------------------------------------------------------------------------------
# Weights


def uniform_if_massless(data: PairData, weights: torch.Tensor, used: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weight 1 on the kept non-special tokens of every text whose ``weights`` sum to 0 although
    it keeps some token (each of its tokens has IDF 0: it occurs in every text the IDF was fitted
    on, as with a single pair), instead of an empty distribution; returns the weights and how many
    of the texts in ``used`` changed (on the device)."""
    text_of = data.clouds.text_index()
    candidates = data.kept & ~data.clouds.special
    massless = zero_weight_texts(data.clouds, weights, candidates)
    weights = torch.where(massless[text_of] & candidates, torch.ones_like(weights), weights)
    return weights, massless[torch.unique(used)].sum()


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

    def pad(self, texts: torch.Tensor, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The units of ``texts`` padded to one length (``width`` if given, the longest text's, read
        from the device, if not): vectors (B, L, D) and weights (B, L), zero at padding."""
        _, vectors, weights = pad(self.offsets, texts, self.vectors, self.weights, width=width)
        return vectors, weights


def text_units(data: PairData, weights: torch.Tensor, texts: torch.Tensor, n: int | None) -> Units:
    r"""The units of the texts ``texts`` (indices into ``data.clouds``), Eqs. (1)-(2):

    .. math::

        E(x_i^n) = \sum_{k=i}^{i+n-1} \mathrm{idf}(x_k) E(x_k), \qquad
        f_{x_i^n} \propto \sum_{k=i}^{i+n-1} \mathrm{idf}(x_k)

    over windows of ``n`` consecutive kept tokens (``data.kept``; special tokens stay, with
    weight 0, as in the release), stride 1; a text with fewer than ``n`` kept tokens is one unit,
    and ``n=None`` (the sentence mover) makes every text one unit. Unit embeddings are
    L2-normalised; units of weight 0 are left out (they carry no mass). Each text is done once,
    not once per pair.
    """
    clouds, keep = data.clouds, data.kept
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
    offsets = offsets_from(torch.bincount(text[first][positive], minlength=n_texts))
    return Units(
        vectors=torch.nn.functional.normalize(unit_vectors[positive], dim=-1),
        weights=unit_weights[positive],
        offsets=offsets,
        first=first[positive],
        last=last[positive],
        tokens=rows,
    )


def side_units(data: PairData, config: Config) -> tuple[Units, Units]:
    """The units of the predictions (with their weights) and of the references (with theirs).

    A text whose kept tokens all weigh 0 would leave an empty distribution; its kept tokens are
    weighted uniformly instead (:func:`uniform_if_massless`), with a warning.
    """
    pred_weights, n_pred = uniform_if_massless(data, data.pred_weights, data.pred_index)
    ref_weights, n_ref = uniform_if_massless(data, data.ref_weights, data.ref_index)
    warn_zero_weights(*torch.stack([n_pred, n_ref]).tolist(), "they are weighted uniformly instead")
    n = None if config.variant == "smd" else config.n_gram
    return (
        text_units(data, pred_weights, data.pred_index, n),
        text_units(data, ref_weights, data.ref_index, n),
    )


def pairwise_cost(x: torch.Tensor, y: torch.Tensor, cost: str) -> torch.Tensor:
    """Euclidean (or squared Euclidean) distances between the units of each pair, float64:
    (B, n, D), (B, m, D) -> (B, n, m). Float64 keeps the distance of near-identical vectors
    from drowning in the rounding of ``|x|^2 + |y|^2 - 2 x.y``."""
    x, y = x.double(), y.double()
    # b = pairs, n = prediction units, m = reference units, d = dimension
    sq = (x * x).sum(-1)[:, :, None] + (y * y).sum(-1)[:, None, :] - 2 * torch.einsum("bnd,bmd->bnm", x, y)
    sq = sq.clamp_min(0.0)
    return sq if cost == "sqeuclidean" else sq.sqrt()


def to_score(distance: float | None, score_form: str) -> float:
    """``1/(1+d)`` or ``1-d``; 0.0 for a pair with an empty side (documented value)."""
    if distance is None:
        return 0.0
    return 1.0 / (1.0 + distance) if score_form == "1/(1+wmd)" else 1.0 - distance


def score_pairs(data: PairData, pred: Units, ref: Units, config: Config) -> torch.Tensor:
    """MoverScore of every pair: costs batched (one tensor operation per bucket of pairs of
    similar unit counts, :data:`COST_ELEMENTS` entries at most), then one exact solve per pair.

    The host waits for the device once for the unit counts, then once per :data:`COST_WAVE_ELEMENTS`
    entries of cost matrices (one wave, one copy, up to about 100,000 WMT17 pairs), never per pair
    or batch.

    A pair whose two sides are the same text *with the same unit weights* is the identity coupling
    of cost 0, so it scores exactly 1 (computed, its distance would be about 1e-8: the rounding of the
    expanded squared distance, clamped here). Where IDF weighs the two sides differently (v2's
    default: predictions by IDF over the predictions, references over the references), the
    distributions differ and the pair scores what the exact EMD gives, as the release does (the 9
    identical WMT17 pairs: 0.945-0.990)."""
    on = data.pred_index.device
    counts = torch.stack(
        [pred.counts(data.pred_index), ref.counts(data.ref_index), data.pred_index == data.ref_index]
    ).cpu()
    n_pred, n_ref, same = counts.tolist()
    scores = np.zeros(len(data.pred_index))
    batches = list(pair_buckets(counts[0], counts[1], COST_ELEMENTS))
    # The batches' pairs on the device in one copy, which does not wait for the device's queue.
    order = torch.cat(batches).to(on, non_blocking=True) if batches else None
    start, wave, entries = 0, [], 0
    for batch in batches:
        pairs = batch.tolist()
        widths = max(max(n_pred[k] for k in pairs), 1), max(max(n_ref[k] for k in pairs), 1)
        on_device = order[start : start + len(pairs)]
        start += len(pairs)
        x, a = pred.pad(data.pred_index[on_device], widths[0])
        y, b = ref.pad(data.ref_index[on_device], widths[1])
        wave.append((pairs, widths, pairwise_cost(x, y, config.cost), a, b))
        entries += wave[-1][2].numel()
        if entries >= COST_WAVE_ELEMENTS:
            _exact_scores(wave, n_pred, n_ref, same, config.score_form, scores)
            wave, entries = [], 0
    if wave:
        _exact_scores(wave, n_pred, n_ref, same, config.score_form, scores)
    return torch.from_numpy(scores)


def _exact_scores(wave: list[tuple], n_pred: list, n_ref: list, same: list, score_form: str, scores: np.ndarray):
    """The exact EMD of each pair of the batches of ``wave`` (pairs, widths, costs, weights), their
    costs and weights copied to the host at once, into ``scores``."""
    host = torch.cat([t.flatten() for _, _, cost, a, b in wave for t in (cost, a, b)]).cpu().numpy()
    offset = 0
    for pairs, (wp, wr), *_ in wave:
        parts = []
        for shape in ((len(pairs), wp, wr), (len(pairs), wp), (len(pairs), wr)):
            size = int(np.prod(shape))
            parts.append(host[offset : offset + size].reshape(shape))
            offset += size
        cost, a, b = parts
        for row, k in enumerate(pairs):
            p, r = n_pred[k], n_ref[k]
            if not (p and r):
                distance = None
            elif same[k] and np.array_equal(a[row, :p], b[row, :r]):
                distance = 0.0
            else:
                distance = exact_transport(a[row, :p], b[row, :r], cost[row, :p, :r])[0]
            scores[k] = to_score(distance, score_form)


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
    """Units of one pair (those with positive weight), the optimal plan and the cost matrix."""
    t_pred, t_ref = data.pred_index[pair : pair + 1], data.ref_index[pair : pair + 1]
    if int(pred.counts(t_pred)[0]) == 0 or int(ref.counts(t_ref)[0]) == 0:
        return {"prediction_tokens": [], "reference_tokens": [], "plan": [], "cost": []}
    (x, a), (y, b) = pred.pad(t_pred), ref.pad(t_ref)
    cost = pairwise_cost(x, y, config.cost)[0].cpu().numpy()
    _, plan = exact_transport(a[0].cpu().numpy(), b[0].cpu().numpy(), cost, with_plan=True)
    return {
        "prediction_tokens": unit_labels(data, pred, int(t_pred[0])),
        "reference_tokens": unit_labels(data, ref, int(t_ref[0])),
        "plan": plan.tolist(),
        "cost": cost.tolist(),
    }
