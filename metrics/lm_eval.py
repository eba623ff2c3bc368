"""moverkit's metrics in lm-evaluation-harness (``pip install "moverkit[lm-eval]"``): importing this
module registers each metric with lm-eval's registry, as lm-eval registers corpus BLEU.

For each metric, and each of its outputs (``<metric>`` its main one, ``<metric>_<output>`` the
others: ``centered_bertscore`` is its F1, ``centered_bertscore_precision`` and ``_recall`` beside):

- a per-item function that passes the document's (reference, generation) through, with the
  arguments the task's ``metric_list`` entry gives (any key besides ``metric``, ``aggregation`` and
  ``higher_is_better``, as lm-eval hands them to the per-item function);
- an aggregation of the same name that scores every item of the task in one call of
  ``moverkit.functional.<metric>`` (one encoder pass over the task's distinct texts) and reports
  the mean of its scores, with the metric's direction (``higher_is_better``; False for lazy_emd).
  The outputs of one metric share that call.

In a task YAML (lm-eval's ``!function`` loads a file beside it, here one line,
``from moverkit.lm_eval import twmd``, which also registers the aggregations)::

    metric_list:
      - metric: !function moverkit_metrics.twmd
        aggregation: twmd
        higher_is_better: true
      - metric: chrf
        aggregation: chrf
        higher_is_better: true

or, from Python, ``import moverkit.lm_eval`` before ``lm_eval.simple_evaluate`` and ``metric: twmd``
in the YAML. A task is one call, so the settings that look at every text of a call work here, as in
:mod:`moverkit.lighteval`: ``centering: batch`` centers by the mean of the task's texts (the
paper's batch centering), ``idf: true`` counts document frequencies over the task's references;
their scores then depend on the task's documents, the defaults' do not (moverscore here keeps
``idf=False`` unless given). lm-eval computes no standard error for these aggregations (it
bootstraps only its own listed ones): ``N/A``, as for any custom aggregation. One reference per
document: lm-eval's ``multiple_target`` reduces each per-reference score to whether any is true,
which a similarity cannot be, and is refused with that reason.
"""

from __future__ import annotations

import json
import math

import lm_eval.api.metrics  # noqa: F401  lm-eval's own metrics first: its registries load them only while empty
from lm_eval.api.registry import AGGREGATION_REGISTRY, METRIC_REGISTRY, register_aggregation, register_metric

from moverkit.registry import REGISTRY, get


class PassThrough:
    """The per-item function of one output: ``(reference, generation, arguments)`` of a document,
    its arguments checked by name (:meth:`moverkit.registry.Metric.scoring_arguments`)."""

    def __init__(self, name: str, label: str):
        self.name = name
        self.__name__ = label  # lm-eval names a metric given as a function (``!function``) by it

    def __call__(self, references=None, predictions=None, **arguments) -> tuple:
        owner = f"moverkit.lm_eval {self.__name__}"
        try:
            arguments = get(self.name).scoring_arguments(arguments, owner)
        except TypeError as err:  # lm-eval would take a TypeError for another calling convention
            raise ValueError(str(err)) from None
        if not isinstance(references, list) or not isinstance(predictions, list) or len(predictions) != 1:
            raise ValueError(f"{owner}: lm-eval passes references=[gold] and predictions=[generation]")
        return references[0], predictions[0], arguments


class TaskScore:
    """``moverkit.functional.<name>`` over a task's items, keeping the last call's texts and result:
    the outputs of one metric (precision, recall, F1) aggregate the same items in turn and share one
    call."""

    def __init__(self, name: str):
        self.name = name
        self._last: tuple[str, dict] | None = None

    def __call__(self, items: list, output: str | None) -> float:
        registered = get(self.name)
        references, predictions, arguments = task_items(self.name, items)
        arguments = {**registered.independent_defaults, **arguments}
        key = json.dumps([predictions, references, arguments], sort_keys=True, default=repr)
        if self._last is None or self._last[0] != key:
            self._last = (key, registered.function(predictions, references, **arguments))
        result = self._last[1]
        if output is None:  # the metric's one score, whatever its key (twmd's is its variant)
            (scores,) = (values for k, values in result.items() if k != "hashcode")
        else:
            scores = result[output]
        return math.fsum(scores) / len(scores)


def task_items(name: str, items: list) -> tuple[list, list[str], dict]:
    """The references, generations and arguments of a task's items, or a ValueError: no item, an
    item that is not a passed-through document (lm-eval's ``multiple_target`` makes each one a
    0/1), or two sets of arguments."""
    if not items:
        raise ValueError(f"moverkit.lm_eval {name}: the task has no item to score")
    if not all(isinstance(item, (tuple, list)) and len(item) == 3 for item in items):
        raise ValueError(
            f"moverkit.lm_eval {name}: an item is {items[0]!r}, not a document's (reference, generation, "
            "arguments); with multiple_target, lm-eval keeps only whether any reference scores true, which "
            "a similarity cannot say: give one reference per document"
        )
    arguments = items[0][2]
    if any(item[2] != arguments for item in items):
        raise ValueError(f"moverkit.lm_eval {name}: the task's items carry two sets of arguments")
    return [item[0] for item in items], [item[1] for item in items], dict(arguments)


def _register() -> dict[str, PassThrough]:
    """Every metric's outputs registered (once a process: a name already registered is kept), by
    the name lm-eval knows it under."""
    made = {}
    for name, registered in REGISTRY.items():
        spec = registered.spec
        score = TaskScore(name)
        for output in spec.outputs:
            label = name if output == spec.main else f"{name}_{output}"
            reported = None if len(spec.outputs) == 1 else output

            def aggregate(items, score=score, reported=reported) -> float:
                return score(items, reported)

            aggregate.__name__ = aggregate.__qualname__ = f"{label}_mean"
            if label not in AGGREGATION_REGISTRY:
                register_aggregation(label)(aggregate)
            passed = PassThrough(name, label)
            if label not in METRIC_REGISTRY:
                register_metric(
                    metric=label,
                    higher_is_better=spec.higher_is_better,
                    output_type="generate_until",
                    aggregation=label,
                )(passed)
            made[label] = METRIC_REGISTRY[label]
    return made


_METRICS = _register()
globals().update(_METRICS)

__all__ = ["PassThrough", *_METRICS]
