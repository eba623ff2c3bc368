"""moverkit's metrics as lighteval metrics (``pip install "moverkit[lighteval]"``), batched: a task's
samples are scored in one ``moverkit.functional`` call (one encoder pass over the task's distinct
texts), not one call per sample. In a custom-tasks file::

    from moverkit.lighteval import centered_bertscore, twmd

    LightevalTaskConfig(..., metrics=[centered_bertscore, twmd])

Each object is one ``SampleLevelMetric`` with ``batched_compute=True``, averaged over the corpus,
with its direction: ``twmd``, ``moverscore`` and ``lazy_emd`` their one score;
``centered_bertscore`` and ``sbertscore`` their F1 (named ``<name>_f1``), with
``centered_bertscore_precision``, ``centered_bertscore_recall`` (and sbertscore's) beside. They
are separate metrics, not one grouping as lighteval's own ``bert_score``, because lighteval 0.13's
batched path takes one name per metric (``lighteval.metrics.apply_metric`` indexes its outputs by
``metric.metric_name``, which a grouping's list of names cannot be: ``TypeError: unhashable type:
'list'``). The outputs of one metric share one scorer, which keeps the last task's texts and result
(until the next task), so precision, recall and F1 together still cost one call.

``metrics(name, **arguments)`` makes the metrics of every output with other arguments (those of
``moverkit.functional.<name>``), sharing one scorer; ``metric(name, output, **arguments)`` one of
them; ``metric_name=`` names them apart when one task holds two of one name.

Two doors in one metric (:mod:`moverkit.integrations.adapter`). lighteval's batched path scores a
task in one call, a whole-corpus door: the metric's own defaults and every setting, the numbers of
``moverkit.load(name).compute`` on the task's texts. ``centering="batch"`` centers by the mean of
the task's texts (the paper's batch centering), ``idf=True`` counts document frequencies over the
task's references, and so does moverscore's default (``idf=None``): those scores depend on the
task's samples; ``idf=False`` weighs every token 1 (the releases' ``defaultdict(lambda: 1.)``).
lighteval's per-sample path (``compute_sample(doc=..., model_response=...)``) scores one sample,
a slice door: the batch-independent defaults (moverscore's IDF off), and a batch-dependent setting
refused with the message every slice door gives.
"""

from __future__ import annotations

import numpy as np

from moverkit.integrations import adapter, missing_extra
from moverkit.integrations.registry import REGISTRY

try:
    from lighteval.metrics.metrics_sample import SampleLevelComputation
    from lighteval.metrics.utils.metric_utils import Metric, SampleLevelMetric
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc, SamplingMethod
    from lighteval.utils.utils import as_list
except ModuleNotFoundError as err:
    raise missing_extra(err, "lighteval") from None


class TaskScorer:
    """``moverkit.functional.<name>(**arguments)`` over a task's samples: the outputs of one metric
    (precision, recall, F1), each its own lighteval metric, ask for the same samples in turn and
    share one call (:class:`~moverkit.integrations.adapter.LastCall`). A task is a whole-corpus
    call (the metric's own defaults, every setting); one sample is a slice (:meth:`one_sample`)."""

    def __init__(self, name: str, arguments: dict):
        self.name = name
        self.arguments = arguments
        self.last_call = adapter.LastCall(name)

    def __call__(self, docs: list[Doc], responses: list[ModelResponse]) -> dict:
        return self.last_call(*_sample_texts(self.name, docs, responses), self.arguments)

    def one_sample(self, doc: Doc, response: ModelResponse) -> dict:
        """The result of one sample alone: a slice door's call (the batch-independent defaults; a
        batch-dependent setting refused with the slice doors' message)."""
        arguments = adapter.slice_arguments(self.name, self.arguments, OWNER)
        return adapter.score(self.name, *_sample_texts(self.name, [doc], [response]), arguments)


OWNER = "moverkit.lighteval"


class MoverkitSampleScore(SampleLevelComputation):
    """One output of a :class:`TaskScorer`: for each sample, its first prediction
    (``as_list(model_response.final_text)[0]``, the whole string when ``final_text`` is one) scored
    against its gold references (``doc.get_golds()``; the best over several is kept).

    ``compute(docs=..., responses=...)`` (lighteval's batched path) gives the list of the task's
    scores; ``compute(doc=..., model_response=...)`` the one sample's score."""

    def __init__(self, scorer: TaskScorer, output: str | None):
        self.scorer = scorer
        self.output = output  # None: the metric's one score, whatever its key (twmd's is its variant)

    def compute(
        self,
        doc: Doc | None = None,
        model_response: ModelResponse | None = None,
        docs: list[Doc] | None = None,
        responses: list[ModelResponse] | None = None,
        **kwargs,
    ) -> list[float] | float:
        if docs is not None:
            return adapter.output_scores(self.scorer(docs, responses), self.output)
        return adapter.output_scores(self.scorer.one_sample(doc, model_response), self.output)[0]


def _sample_texts(name: str, docs: list[Doc], responses: list[ModelResponse]) -> tuple[tuple, tuple]:
    """Each sample's first prediction and its golds, or a ValueError naming the sample whose response
    or golds are empty (lighteval's ``final_text`` may be a list of responses or one string)."""
    if len(docs) != len(responses):
        raise ValueError(f"moverkit.lighteval {name}: {len(docs)} docs but {len(responses)} responses")
    predictions, references = [], []
    for i, (doc, response) in enumerate(zip(docs, responses)):
        where = f"moverkit.lighteval {name}: sample {i} (task {doc.task_name!r}, id {doc.id!r})"
        texts = as_list(response.final_text)
        if not texts:
            raise ValueError(f"{where} has an empty response (final_text {response.final_text!r}): nothing to score")
        try:
            golds = as_list(doc.get_golds())
        except (TypeError, IndexError):  # gold_index None, or past the choices
            golds = []
        if not golds:
            raise ValueError(f"{where} has no gold reference (gold_index {doc.gold_index!r})")
        predictions.append(texts[0])
        references.append(tuple(golds))
    return tuple(predictions), tuple(references)


def metrics(name: str, *, metric_name: str | None = None, **arguments) -> list[Metric]:
    """The batched lighteval metrics of every output of moverkit metric ``name`` under
    ``arguments`` (those of ``moverkit.functional.<name>``, checked by name here and by value at the
    first task), one per output, in the order of the spec's outputs, sharing one :class:`TaskScorer`:
    in one task they cost one call. Named ``<metric_name>`` for a metric of one score and
    ``<metric_name>_<output>`` for precision, recall and F1; ``metric_name`` is ``name`` unless
    given. lighteval keeps one score per name in a task, so two metrics of one name with other
    arguments in the same task need a ``metric_name`` each."""
    arguments = adapter.whole_corpus_arguments(name, arguments, f"{OWNER}.metric({name!r})")
    scorer = TaskScorer(name, arguments)
    base = name if metric_name is None else metric_name
    return [
        SampleLevelMetric(
            metric_name=base if output is None else f"{base}_{output}",  # None: one score, whatever its key
            sample_level_fn=MoverkitSampleScore(scorer, output),
            category=SamplingMethod.GENERATIVE,
            corpus_level_fn=np.mean,
            higher_is_better=REGISTRY[name].spec.higher_is_better,
            batched_compute=True,
        )
        for _, output in adapter.labelled_outputs(name)
    ]


def metric(name: str, output: str | None = None, *, metric_name: str | None = None, **arguments) -> Metric:
    """The batched lighteval metric of ``output`` (default: the metric's main score) of moverkit
    metric ``name`` under ``arguments``: one of :func:`metrics` (its names and checks). Several
    outputs of one metric made by separate calls do not share a scorer: take :func:`metrics`."""
    made = metrics(name, metric_name=metric_name, **arguments)
    output = adapter.checked_output(name, output)
    return made[0 if output is None else REGISTRY[name].spec.outputs.index(output)]


def _default_metrics() -> dict[str, Metric]:
    """Every metric's outputs at its defaults, by the name this module exports
    (:func:`~moverkit.integrations.adapter.output_label`): ``<metric>`` for the main output,
    ``<metric>_<output>`` for the others (``centered_bertscore_precision``)."""
    exported = {}
    for name in REGISTRY:
        for (label, _), made in zip(adapter.labelled_outputs(name), metrics(name)):
            exported[label] = made
    return exported


_DEFAULT_METRICS = _default_metrics()
globals().update(_DEFAULT_METRICS)

__all__ = ["MoverkitSampleScore", "metric", "metrics", *_DEFAULT_METRICS]
