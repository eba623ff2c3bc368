"""A calibrated combination of metrics: one score from several moverkit metrics and sacrebleu's chrF
and BLEU, with its normalization statistics and weights fitted on human judgments.

Components are the metrics of :data:`moverkit.METRICS` (each judged on its main output,
:attr:`moverkit.facts.specs.MetricSpec.main`) and :data:`ANCHORS`. Each is **oriented** so that higher
is better: ``o_m = x_m`` for a similarity, ``o_m = -x_m`` for a distance (``lazy_emd``).

Segment level (one score per prediction), fitted on segments with human scores ``h_i``::

    z_im = (o_im - mean_m) / std_m                 mean_m, std_m (ddof 0): of the training segments
    w    = argmin_{w >= 0} || (h - mean(h)) - Z w ||^2     (non-negative least squares)
    combined_i = sum_m w_m z_im

System level (one score per system's corpus), on test sets ``t`` (a language pair: one set of
references and the systems translating it), with ``s_tjm`` the component's system score of system
``j`` (a moverkit metric's: the mean of its oriented segment scores; chrF's and BLEU's: sacrebleu's
corpus score) and ``H_tj`` the human system score. Every component is z-normalized **within each
test set** (centred and scaled by that set's own systems, std with ddof 0; a component constant on
a test set scores 0 there), and the human scores alike::

    z_tjm = (s_tjm - mean_j s_tjm) / std_j s_tjm
    system score_tj = sum_m w_m z_tjm                 (:func:`system_scores`: all systems of one test set)
    e     = (1/M, ..., 1/M)                           equal weights of the M components
    v     = argmin_{v >= 0} || Z_H - Z v ||^2,  v <- v / sum(v)      (non-negative least squares)
    w(a)  = (1 - a) e + a v,   a in ALPHAS = (0, .25, .5, .75, 1)

The shipped default is equal weights, ``a = 0``. The fit moves towards NNLS only as far as
leaving one test set out shows it helps: for each ``a``, each training test set is scored by
``w(a)`` with ``v`` fitted on the other training sets, and ``a`` is the one whose held-out system
pairs are ordered as the humans order them most often (:func:`moverkit.judgments.correlation.pairwise`,
pooled over the sets); a tie goes to the smaller ``a``. The reason: weights fitted on about 48
WMT17 systems did not transfer. On WMT18 to-English (386 system pairs, checked outside this
repository), twmd + chrF fitted by NNLS ordered 93.5% of the pairs, chrF alone 94.0%, and the same
two z-normalized with equal weights, unfitted, 95.1%. Equal weights of z-scores need no data; the
fit must earn every step away from them on test sets it did not see.

A system score means something only beside another system's on the same references: only
differences within a test set are defined, so no offset is fitted. :func:`system_score` scores one
system alone (``combined``'s ``"system"``): ``sum_m w_m s_m / std_m``, with ``std_m`` the pooled
within-test-set std of the training sets, ``sqrt( sum_tj (s_tjm - mean_j s_tjm)^2 / (N - T) )``
(N systems, T sets), standing in for the std of the test set it belongs to.

The weights are non-negative because every component is oriented higher-is-better: a negative
weight would use a metric against its meaning. Metrics are strongly collinear, and unconstrained
least squares then gives them large opposite-signed weights that fit the training pairs' noise and
do not transfer to a new language pair. A component that does not help gets weight 0.

Tokenization: chrF is sacrebleu's default (``CHRF()``, character n-grams, whitespace ignored);
BLEU is sacrebleu's default ``13a`` tokenization at both levels (``BLEU(effective_order=True)`` for
a sentence, ``BLEU()`` for a corpus; ``force=True``, so already tokenized text such as WMT's
distributed files passes without sacrebleu's warning): text is tokenized the same way at fitting
and at scoring time.

A :class:`Combination` is saved as a JSON object (:data:`FORMAT`, :data:`VERSION`) with a
:attr:`Combination.digest` of everything that changes a score; :func:`combined` scores texts
with one.

The package, one module per job: :mod:`~moverkit.combination.components` (the names and their
orientation), :mod:`~moverkit.combination.file` (:class:`Combination`, its checks and its file),
:mod:`~moverkit.combination.fitting` (both levels' fits), :mod:`~moverkit.combination.scoring`
(component scores and combined scores of texts) and :mod:`~moverkit.combination.crossval`
(leaving one group or test set out).
"""

from __future__ import annotations

from moverkit.combination.components import ANCHORS, COMBINED, COMPONENTS, orientation
from moverkit.combination.crossval import Fold, leave_one_group_out, leave_one_test_set_out
from moverkit.combination.file import (
    FORMAT,
    MAGNITUDE_LIMIT,
    STD_LIMITS,
    VERSION,
    Combination,
    SegmentLevel,
    SystemLevel,
    load,
)
from moverkit.combination.fitting import ALPHAS, SystemFit, fit, fit_segment, fit_system
from moverkit.combination.scoring import (
    anchor,
    combined,
    component_scores,
    corpus_features,
    segment_scores,
    system_score,
    system_scores,
)

__all__ = [
    "ALPHAS",
    "ANCHORS",
    "COMBINED",
    "COMPONENTS",
    "FORMAT",
    "MAGNITUDE_LIMIT",
    "STD_LIMITS",
    "VERSION",
    "Combination",
    "Fold",
    "SegmentLevel",
    "SystemFit",
    "SystemLevel",
    "anchor",
    "combined",
    "component_scores",
    "corpus_features",
    "fit",
    "fit_segment",
    "fit_system",
    "leave_one_group_out",
    "leave_one_test_set_out",
    "load",
    "orientation",
    "segment_scores",
    "system_score",
    "system_scores",
]
