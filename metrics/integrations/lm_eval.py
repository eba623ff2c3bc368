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

In a task YAML (lm-eval's ``!function`` loads a file beside it, which makes the metric with its
arguments, ``twmd = moverkit.lm_eval.metric("twmd", temperature=0.1)``, and registers the
aggregations)::

    metric_list:
      - metric: !function moverkit_metrics.twmd
        aggregation: twmd
        higher_is_better: true
      - metric: chrf
        aggregation: chrf
        higher_is_better: true

or, from Python, ``import moverkit.lm_eval`` before ``lm_eval.simple_evaluate`` and ``metric: twmd``
in the YAML. :func:`metric` checks its arguments by name and by value (the function's own checks,
:func:`moverkit.integrations.adapter.check_values`) when lm-eval loads the task, before any
generation; arguments written beside ``metric:`` in the YAML reach the per-item function only once
lm-eval has generated every answer (it stores them unread until then), so they are checked there,
at the first document. :data:`TASKS` is the example task's folder, shipped in the wheel, for
``lm_eval --include_path``. A task is one call, so the aggregation is a whole-corpus door
(:mod:`moverkit.integrations.adapter`), as the evaluate module and :mod:`moverkit.lighteval`'s
batched path are: it takes the metric's own defaults and every setting, the numbers of
``moverkit.load(name).compute`` on the task's texts. ``centering: batch`` centers by the mean of
the task's texts (the paper's batch centering), ``idf: true`` counts document frequencies over the
task's references, and so does moverscore's default (``idf=None``; its hashcode says ``idf``):
those scores depend on the task's documents; ``idf: false`` weighs every token 1. lm-eval
computes no standard error for these aggregations (it bootstraps only its own listed ones):
``N/A``, as for any custom aggregation. One reference per document: lm-eval's ``multiple_target``
reduces each per-reference score to whether any is true, which a similarity cannot be, and is
refused with that reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from moverkit.integrations import adapter, missing_extra
from moverkit.integrations.registry import REGISTRY

try:
    import lm_eval.api.metrics  # noqa: F401  lm-eval's own metrics first: its registries load them only while empty
    from lm_eval.api.registry import AGGREGATION_REGISTRY, METRIC_REGISTRY, register_aggregation, register_metric
except ModuleNotFoundError as err:
    raise missing_extra(err, "lm-eval") from None

TASKS = Path(__file__).resolve().parents[1] / "examples" / "lm_eval_task"
"""The example task's folder (WMT16 German-English with twmd, centered_bertscore and chrF), shipped in
the wheel: ``lm_eval ... --include_path "$(python -c 'import moverkit.lm_eval as m; print(m.TASKS)')"``."""


class PassThrough:
    """The per-item function of one output: ``(reference, generation, arguments)`` of a document,
    its arguments (those :func:`metric` bound, and those of the task's entry) checked by name
    (:meth:`moverkit.integrations.registry.Metric.scoring_arguments`) and, once per set, by value."""

    def __init__(self, name: str, label: str, bound: dict | None = None):
        self.name = name
        self.__name__ = label  # lm-eval names a metric given as a function (``!function``) by it
        self.bound = dict(bound or {})
        self._checked: set[str] = set()

    def __call__(self, references=None, predictions=None, **arguments) -> tuple:
        owner = f"moverkit.lm_eval {self.__name__}"
        twice = sorted(set(arguments) & set(self.bound))
        if twice:
            raise ValueError(
                f"{owner}: {twice[0]!r} is given by the task's entry and by the metric it names; give it once"
            )
        try:
            arguments = adapter.whole_corpus_arguments(self.name, {**self.bound, **arguments}, owner)
            key = json.dumps(arguments, sort_keys=True, default=repr)
            if key not in self._checked:
                adapter.check_values(self.name, arguments)
                self._checked.add(key)
        except TypeError as err:  # lm-eval would take a TypeError for another calling convention
            raise ValueError(str(err)) from None
        if not isinstance(references, list) or not isinstance(predictions, list) or len(predictions) != 1:
            raise ValueError(f"{owner}: lm-eval passes references=[gold] and predictions=[generation]")
        return references[0], predictions[0], arguments


class TaskScore:
    """``moverkit.functional.<name>`` over a task's items, reported as the mean of one output: the
    outputs of one metric (precision, recall, F1) aggregate the same items in turn and share one
    call (:class:`~moverkit.integrations.adapter.LastCall`)."""

    def __init__(self, name: str):
        self.name = name
        self.last_call = adapter.LastCall(name)

    def __call__(self, items: list, output: str | None) -> float:
        references, predictions, arguments = task_items(self.name, items)
        scores = adapter.output_scores(self.last_call(predictions, references, arguments), output)
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


def metric(name: str, output: str | None = None, **arguments) -> PassThrough:
    """The per-item function of ``name``'s ``output`` (default: its main one) with ``arguments``
    (those of ``moverkit.functional.<name>``) bound, for a task's ``!function`` file::

        twmd = moverkit.lm_eval.metric("twmd", temperature=0.1)

    The arguments are checked here, by name and by value, as the function checks them: lm-eval
    imports the file when it loads the task, so a wrong argument stops the run before any
    generation. The entry's ``aggregation:`` is the output's registered name (``twmd``,
    ``centered_bertscore_recall``), which scores the task's items with the bound arguments."""
    from moverkit.integrations.registry import get

    get(name)  # an unknown metric named
    label = adapter.output_label(name, adapter.checked_output(name, output))
    owner = f"moverkit.lm_eval.metric({name!r})"
    bound = adapter.whole_corpus_arguments(name, arguments, owner)
    adapter.check_values(name, bound)
    passed = PassThrough(name, label, bound)
    passed._checked.add(json.dumps(bound, sort_keys=True, default=repr))
    return passed


def _register() -> dict[str, PassThrough]:
    """Every metric's outputs registered (once a process: a name already registered is kept), by
    the name lm-eval knows it under."""
    made = {}
    for name, registered in REGISTRY.items():
        score = TaskScore(name)
        for label, reported in adapter.labelled_outputs(name):

            def aggregate(items, score=score, reported=reported) -> float:
                return score(items, reported)

            aggregate.__name__ = aggregate.__qualname__ = f"{label}_mean"
            if label not in AGGREGATION_REGISTRY:
                register_aggregation(label)(aggregate)
            passed = PassThrough(name, label)
            if label not in METRIC_REGISTRY:
                register_metric(
                    metric=label,
                    higher_is_better=registered.spec.higher_is_better,
                    output_type="generate_until",
                    aggregation=label,
                )(passed)
            made[label] = METRIC_REGISTRY[label]
    return made


_METRICS = _register()
globals().update(_METRICS)

__all__ = ["TASKS", "PassThrough", "metric", *_METRICS]
