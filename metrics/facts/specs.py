"""The facts of each metric, once: what it outputs, which way is better, its range, and the values
it promises for identical and for empty texts.

Tests (the contract over all five metrics), the benchmarks (which output a metric is judged on,
and its direction), the demos (the direction beside every score) and the comparison of systems all
read these, so that a fact is stated in one place. Each value is the one the metric's card
documents under "Output values" for its default settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricSpec:
    """What one metric promises, for its default settings.

    ``outputs``: the per-example keys of its result; ``main``: the output it is judged on (its
    headline correlation row); ``higher_is_better``: False for a distance; ``low``/``high``: the
    documented range of ``main``; ``best``: the best value, which a text against itself scores
    exactly wherever the metric's definition gives it (the BERTScore family, twmd's C(X, X)
    normalization, moverscore with one IDF table for both sides); ``identical``: what a text
    against itself scores, the mean over WMT17 references scored against themselves (``best``,
    but for lazy_emd, whose entropic plan costs a little above 0 on a text against itself);
    ``empty``: the score of a pair with an empty (or whitespace-only) side. Two measured reference
    points put a score in context (embedded model, default settings, :data:`REFERENCE_POINTS_SOURCE`):
    ``unrelated``, the mean score of random pairs of unrelated sentences (bert-score's baseline
    pairs), and ``translation``, the mean score of a machine translation against its human
    reference. With ``rescale_with_baseline=True`` (every metric), a score maps by
    :attr:`rescaling`: :meth:`rescaled_reference_points`, :attr:`rescaled_low`, :attr:`rescaled_high`.

    How it computes: ``level``, ``"token"`` (contextual token vectors of one layer) or
    ``"sentence"`` (a sentence-transformers model's sentence vectors, no layer); ``matcher``,
    ``"greedy"`` (each unit to its most similar unit of the other side, over cosines of unit
    vectors: exact MBR scores it in one block of cosines per source, and reference aggregation
    applies) or ``"transport"`` (an optimal transport plan); ``default_layer``, the layer
    ``num_layers=None`` takes: ``None`` for the model's entry in the layer table, ``-1`` for the
    last (MoverScore's release); ``class_name``, its class in torchmetrics' style
    (``moverkit.torchmetrics``, as ``BERTScore``); ``baseline_form``, its rescaling baseline files:
    ``"bert-score"`` (bert-score's own files, which it reads as they are: rows ``LAYER,P,R,F`` of
    uncentered scores, so fitted with ``centering="none"`` unless told otherwise, and shipped under
    bert-score's names, ``<model>.<centering>.csv``) or ``"keyed"`` (each row also names the settings
    it was fitted under; shipped as ``<metric>.<model>.<centering>.csv``); ``output_named_by``, the
    argument whose value names the metric's one output (twmd's ``variant``: ``variant="trwmd"``
    scores ``trwmd``, and its baseline column is ``TRWMD``), ``None`` where the outputs are always
    ``outputs``; ``differentiable``, the function of its module ``moverkit.functional.<name>`` that
    scores prepared pairs with autograd through the encoder, what fine-tuning trains on
    (:attr:`moverkit.integrations.registry.Metric.differentiable`), ``None`` where it has none;
    ``centering``, its default centering mode, the ``centering`` its function takes when left out
    (``"corpus"``: the statistic shipped for the model, Chen et al.'s Section 5; ``"none"``);
    ``exact_transport``, whether its plan is an exact optimal transport, one linear program per pair
    solved on the CPU (POT's EMD: moverscore), rather than matching or an entropic or tempered plan
    computed in batches on the call's device."""

    name: str
    outputs: tuple[str, ...]
    main: str
    higher_is_better: bool
    low: float
    high: float
    best: float
    identical: float
    empty: float
    unrelated: float
    translation: float
    class_name: str = ""
    level: str = "token"
    matcher: str = "transport"
    default_layer: int | None = None
    baseline_form: str = "keyed"
    output_named_by: str | None = None
    differentiable: str | None = None
    centering: str = "none"
    exact_transport: bool = False

    @property
    def direction(self) -> str:
        """``"higher is better"`` or ``"lower is better"``: what a reader needs beside a score."""
        return "higher is better" if self.higher_is_better else "lower is better"

    def reference_points(self) -> dict[str, float]:
        """``{"identical texts": ..., "a machine translation": ..., "unrelated texts": ...}``, best first."""
        return {
            "identical texts": self.identical,
            "a machine translation": self.translation,
            "unrelated texts": self.unrelated,
        }

    def better(self, a: float, b: float) -> bool:
        """Whether score ``a`` is strictly better than ``b``."""
        return a > b if self.higher_is_better else a < b

    @property
    def rescaling(self) -> str:
        """What ``rescale_with_baseline=True`` does to a score ``s``, with ``b`` the mean score of
        unrelated sentence pairs (the baseline file's value): ``"(s - b) / (1 - b)"`` for a
        similarity (the best value 1 stays 1, unrelated texts go to about 0), ``"s / b"`` for a
        distance (the best value 0 stays 0, unrelated texts go to about 1; lower is still closer)."""
        return "(s - b) / (1 - b)" if self.higher_is_better else "s / b"

    def rescaled(self, score: float, baseline: float | None = None) -> float:
        """``score`` as :attr:`rescaling` maps it; ``baseline`` defaults to :attr:`unrelated`, the
        shipped baseline of the default settings (to the 3 decimals stated here)."""
        b = self.unrelated if baseline is None else baseline
        if not self.higher_is_better:
            return score / b
        return (score - b) / (1 - b)

    def rescaled_reference_points(self) -> dict[str, float]:
        """:meth:`reference_points` after rescaling with the shipped baseline: the best value stays
        (identical texts keep it but for lazy_emd's), unrelated texts score 0 (1 for a distance) by
        construction."""
        return {name: self.rescaled(value) for name, value in self.reference_points().items()}

    @property
    def rescaled_low(self) -> float:
        """The low end of the rescaled range with the shipped baseline: below -1 for a similarity
        in [-1, 1] (a pair less alike than unrelated text is negative; bert-score's rescaled scores
        can be negative too), -b / (1 - b) for one in [0, 1], 0 for a distance."""
        return self.rescaled(self.low)

    @property
    def rescaled_high(self) -> float:
        """The high end of the rescaled range: 1 for a similarity, unbounded for lazy_emd."""
        return self.rescaled(self.high)


REFERENCE_POINTS_SOURCE = (
    "embedded model, default settings; unrelated: mean of 1,000 random pairs of WMT17 to-English sentences "
    "(the rescaling baselines' pairs, seed 0); a machine translation: mean of the 2,800 WMT17 segment-level "
    "DA system translations against their references; identical texts: mean of the 2,191 distinct references "
    "scored against themselves"
)
"""Where :attr:`MetricSpec.unrelated`, :attr:`MetricSpec.translation` and :attr:`MetricSpec.identical` come from."""

SIMILARITY = {"higher_is_better": True, "high": 1.0, "best": 1.0, "identical": 1.0, "empty": 0.0}
"""What the four similarities share: higher is better, at most 1, 1 for identical texts, 0 for an empty one."""

SPECS = {
    spec.name: spec
    for spec in (
        MetricSpec(
            "centered_bertscore", ("precision", "recall", "f1"), "f1", low=-1.0, unrelated=0.138, translation=0.739,
            class_name="CenteredBERTScore", matcher="greedy", baseline_form="bert-score", centering="corpus",
            **SIMILARITY,
        ),
        MetricSpec(
            "lazy_emd",
            outputs=("lazy_emd",),
            main="lazy_emd",
            higher_is_better=False,
            low=0.0,
            high=math.inf,  # bounded per pair by moverkit.functional.lazy_emd.score_bound
            best=0.0,
            identical=0.000181,  # the entropic plan's cost (REFERENCE_POINTS_SOURCE)
            empty=1.0,
            unrelated=0.188,
            translation=0.126,
            class_name="LazyEMD",
        ),
        MetricSpec(
            "moverscore", ("moverscore",), "moverscore", low=0.0, unrelated=0.429, translation=0.603,
            class_name="MoverScore", default_layer=-1, exact_transport=True, **SIMILARITY,
        ),  # low: v2's 1/(1 + wmd); v1's 1 - wmd reaches -3
        MetricSpec(
            "sbertscore", ("precision", "recall", "f1"), "f1", low=-1.0, unrelated=0.057, translation=0.768,
            class_name="SBERTScore", level="sentence", matcher="greedy", **SIMILARITY,
        ),
        MetricSpec(
            "twmd", ("twmd",), "twmd", low=-1.0, unrelated=0.034, translation=0.638, class_name="TWMD",
            output_named_by="variant", differentiable="differentiable_similarity", centering="corpus", **SIMILARITY,
        ),
    )
}  # fmt: skip
"""Every bundled metric's :class:`MetricSpec`, by name (the names of :data:`moverkit.METRICS`)."""


def spec(name: str) -> MetricSpec:
    """The :class:`MetricSpec` of metric ``name``; an unknown name is an error listing the metrics."""
    if name not in SPECS:
        raise ValueError(f"unknown metric {name!r}; choose one of {', '.join(SPECS)}")
    return SPECS[name]
