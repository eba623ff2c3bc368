"""moverkit's metrics as lighteval metrics (``pip install "moverkit[lighteval]"``), in the shape of
lighteval's own ``Metrics.bert_score``: a ``SampleLevelMetricGrouping`` of precision, recall and F1
for centered_bertscore and sbertscore, a ``SampleLevelMetric`` for twmd, moverscore and lazy_emd,
each averaged over the corpus, each with its direction. In a custom-tasks file::

    from moverkit.lighteval import centered_bertscore, twmd

    LightevalTaskConfig(..., metrics=[centered_bertscore, twmd])

and ``metric(name, **arguments)`` makes one with other arguments (those of
``moverkit.functional.<name>``). docs/lighteval_tasks.py is a whole custom-tasks file.

lighteval scores one sample at a time, so a setting that needs every text of the corpus
(``centering="batch"``, IDF over the call's texts) is refused: pass ``centering="corpus"`` and an
IDF dict fitted on a corpus instead. For that reason ``moverscore`` here is MoverScore v2 with
``idf=False`` (the releases' ``defaultdict(lambda: 1.)``, every token weighing 1), not its
default IDF over the call's references, which one pair would reduce to zero weights.
"""

from __future__ import annotations

import numpy as np
from lighteval.metrics.metrics_sample import SampleLevelComputation
from lighteval.metrics.utils.metric_utils import Metric, SampleLevelMetric, SampleLevelMetricGrouping
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.requests import Doc, SamplingMethod

from moverkit.registry import get

__all__ = ["MoverkitSampleScore", "centered_bertscore", "lazy_emd", "metric", "moverscore", "sbertscore", "twmd"]


class MoverkitSampleScore(SampleLevelComputation):
    """Scores a sample's first prediction (``model_response.final_text[0]``) against its gold
    references (``doc.get_golds()``; the best score over several is kept) with
    ``moverkit.functional.<name>(**arguments)``: a dict of the grouping's names for a metric with
    several outputs, the one score otherwise (whatever its key, e.g. twmd's ``variant``)."""

    def __init__(self, name: str, metric_names: list[str] | None = None, **arguments):
        self.name = name
        self.metric_names = metric_names
        self.arguments = arguments

    def compute(self, doc: Doc, model_response: ModelResponse, **kwargs) -> dict[str, float] | float:
        function = get(self.name).function
        prediction = model_response.final_text[0]
        result = function([prediction], [list(doc.get_golds())], **self.arguments)
        result.pop("hashcode")
        if self.metric_names is None:
            (scores,) = result.values()
            return scores[0]
        spec = get(self.name).spec
        return {name: result[output][0] for name, output in zip(self.metric_names, spec.outputs)}


def metric(name: str, **arguments) -> Metric:
    """The lighteval metric of moverkit metric ``name`` with ``arguments`` (those of
    ``moverkit.functional.<name>``, checked by name here and by value at the first sample). A
    metric with precision, recall and F1 is a grouping named ``<name>_precision``, ``<name>_recall``,
    ``<name>_f1``; the others are named ``<name>``. A setting whose scores depend on other samples
    is refused (see the module doc)."""
    entry = get(name)
    spec = entry.spec
    arguments = entry.scoring_arguments(arguments, f"moverkit.lighteval.metric({name!r})")
    reason = entry.batch_dependence(arguments)
    if reason:
        raise ValueError(
            f"moverkit.lighteval.metric({name!r}): {reason}, but lighteval scores one sample at a time; pass "
            "centering='corpus' (or 'none') and idf=False or an IDF dict fitted on a corpus"
        )
    if len(spec.outputs) == 1:
        return SampleLevelMetric(
            metric_name=name,
            sample_level_fn=MoverkitSampleScore(name, **arguments),
            category=SamplingMethod.GENERATIVE,
            corpus_level_fn=np.mean,
            higher_is_better=spec.higher_is_better,
        )
    names = [f"{name}_{output}" for output in spec.outputs]
    return SampleLevelMetricGrouping(
        metric_name=names,
        sample_level_fn=MoverkitSampleScore(name, names, **arguments),
        category=SamplingMethod.GENERATIVE,
        corpus_level_fn=dict.fromkeys(names, np.mean),
        higher_is_better=dict.fromkeys(names, spec.higher_is_better),
    )


centered_bertscore = metric("centered_bertscore")
sbertscore = metric("sbertscore")
twmd = metric("twmd")
moverscore = metric("moverscore", idf=False)
lazy_emd = metric("lazy_emd")
