"""Fitting rescaling baselines (Zhang et al., 2020, Section 4 "Baseline rescaling"): the mean
score of random pairs of unrelated texts, bert-score's method, for any of the five metrics, model,
layer, centering and setting. Reading, writing and applying them is :mod:`moverkit._core.call.baseline`;
fitting scores pairs with the metric itself, so it lives above the metrics, not in the core.

The shipped baselines (``metrics/baselines/``) were fitted with :func:`fit_baseline` on the
references then the system outputs of ``data/wmt17_seg_da_to_en.tsv`` (5,600 lines, one text per
line, 1,000 pairs, seed 0): every layer of centered_bertscore under each centering, and the
default layer and settings of the four other metrics.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from moverkit.facts.specs import SPECS

EXTRA_OUTPUTS = ("hashcode", "alignment", "reference_index")
"""Result keys that are not scores."""

MAX_PAIRS = 1_000_000
"""The most random pairs a baseline is fitted on: bert-score's own baselines average 1M pairs (the
default here is 1,000). The pairs are drawn before any scoring, so ``--pairs 1000000000000`` ran
unbounded (building a list of 10^12 pairs) instead of failing."""


def random_pairs(texts: Sequence[str], n_pairs: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n_pairs`` pairs of two different texts drawn at random from ``texts`` (bert-score's
    baselines pair sentences of a corpus at random, so they are unrelated)."""
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or not 1 <= n_pairs <= MAX_PAIRS:
        raise ValueError(
            f"the number of pairs must be an int >= 1 and <= {MAX_PAIRS:,} (moverkit.baselines.MAX_PAIRS), got {n_pairs!r}"
        )
    texts = [t for t in dict.fromkeys(texts) if t.strip()]
    if len(texts) < 2:
        raise ValueError("fit a baseline on at least 2 distinct non-empty texts")
    rng = random.Random(seed)
    pairs = [rng.sample(texts, 2) for _ in range(n_pairs)]
    return [p for p, _ in pairs], [r for _, r in pairs]


def fit_baseline(
    texts: Sequence[str],
    *,
    metric: str = "centered_bertscore",
    model_type: str | None = None,
    layers: Sequence[int] | None = None,
    centering: str | None = None,
    centering_stats=None,
    options: Mapping | None = None,
    n_pairs: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
    device: str | None = None,
) -> list[tuple]:
    """The baseline of ``metric``: the mean of each of its scores over ``n_pairs`` random pairs of
    ``texts`` at each of ``layers``, one row per layer.

    ``layers``: default every layer (0 to the last) for the token-level metrics; sbertscore, which
    has none, takes no ``layers`` (its row is layer -1). ``centering``: default ``"none"`` for
    centered_bertscore (bert-score's baselines are uncentered), the metric's own default for the
    others; ``"corpus"`` without ``centering_stats`` uses the statistic shipped for the model.
    ``options``: any other argument of the metric (``{"variant": "trwmd"}``, ``{"idf": True}``,
    ``{"version": "v1"}``, ``{"lang": "de", "model_type": ...}``), as the calls to rescale will pass it.

    Rows are ``(layer, P, R, F)`` for centered_bertscore (bert-score's format, as before) and
    ``(layer, *means, settings)`` for the others, ``settings`` the
    :func:`~moverkit._core.call.baseline.settings_key` of the scores (so that a file is never applied
    to a call under other settings); write them with :func:`~moverkit._core.call.baseline.baseline_csv`
    and :func:`baseline_columns`."""

    from moverkit._core.call import settings_key
    from moverkit.integrations.registry import REGISTRY

    if metric not in REGISTRY:
        raise ValueError(f"metric must be one of {', '.join(REGISTRY)}; got {metric!r}")
    function = REGISTRY[metric].function
    call = dict(options or {})
    accepted = set(REGISTRY[metric].defaults)
    own = {"model_type", "num_layers", "centering", "centering_stats", "batch_size", "device"}
    for key in call:
        if key not in accepted:
            raise ValueError(f"options: {metric} takes no argument {key!r}")
        if key in own or key in ("rescale_with_baseline", "baseline_path", "return_alignment"):
            raise ValueError(f"options: {key!r} is set by fit_baseline's own argument or cannot be fitted")
    call.update(model_type=model_type, batch_size=batch_size, device=device)
    bert_score_rows = SPECS[metric].baseline_form == "bert-score"  # LAYER,P,R,F of uncentered scores
    centering = fitted_centering(metric, centering)
    if centering is not None:
        call["centering"] = centering
    if centering_stats is not None:
        call["centering_stats"] = centering_stats
    predictions, references = random_pairs(texts, n_pairs, seed)
    layers = fitted_layers(metric, model_type, layers, device)
    rows = []
    for layer in layers:
        layer_call = call if layer is None else {**call, "num_layers": layer}
        result = function(predictions, references, **layer_call)
        keys = [key for key in result if key not in EXTRA_OUTPUTS]
        means = [sum(result[key]) / len(result[key]) for key in keys]
        resolved = -1 if layer is None else int(layer)
        if bert_score_rows:
            rows.append((resolved, *means))
        else:
            rows.append((resolved, *means, settings_key(result["hashcode"])))
    return rows


def fitted_centering(metric: str, centering: str | None) -> str | None:
    """The centering a baseline of ``metric`` is fitted under: ``centering`` when given, else
    ``"none"`` for a metric whose files are bert-score's (its spec's ``baseline_form``: bert-score's
    baselines are of uncentered scores), else ``None``, the metric's own default."""
    if centering is None and SPECS[metric].baseline_form == "bert-score":
        return "none"
    return centering


def fitted_layers(metric: str, model_type, layers, device) -> list[int | None]:
    """The layers to fit: ``layers``, or every layer of the model (0 to the last); ``[None]`` for
    a metric of sentence vectors (which refuses ``layers``)."""
    if SPECS[metric].level == "sentence":  # no layers: the baseline row is layer -1
        if layers is not None:
            raise ValueError(f"{metric} scores sentence vectors: it has no layers to fit (leave layers out)")
        return [None]
    if layers is None:
        from moverkit._core.encoding import get_encoder

        n_layers = int(get_encoder(model_type, num_layers=-1, device=device).layer)
        return list(range(n_layers + 1))
    repeated = sorted({int(layer) for layer in layers if list(map(int, layers)).count(int(layer)) > 1})
    if repeated:  # the file would hold the layer twice, and reading it refuses that
        raise ValueError(f"layers: {', '.join(map(str, repeated))} given more than once")
    return [int(layer) for layer in layers]


def baseline_columns(metric: str, options: Mapping | None = None) -> tuple[str, ...]:
    """The value columns of ``metric``'s baseline file under ``options`` (``P, R, F``; ``TWMD``,
    ``TRWMD``, ...; ``MOVERSCORE``; ``LAZY_EMD``): those of its outputs, or of the one output its
    spec's ``output_named_by`` argument names (twmd's variant; left out, the default's, ``main``)."""
    from moverkit._core.call import score_columns

    spec = SPECS[metric]
    if spec.output_named_by is not None:
        return score_columns(((options or {}).get(spec.output_named_by, spec.main),))
    return score_columns(spec.outputs)
