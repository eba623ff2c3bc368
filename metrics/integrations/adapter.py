"""One policy for every door, and the one adapter that applies it (issue 68): the defaults a door
takes, the arguments it passes, the output it reports, where its call runs, and the call itself.

Two kinds of doors:

- **Whole-corpus doors** score every text of an evaluation in one call: the function, the evaluate
  module (``moverkit.load``), ``moverkit score``, torchmetrics' ``compute()``, lm-eval's
  aggregation and lighteval's batched path. They take the metric's own defaults, batch-dependent
  ones included (moverscore's IDF fitted over the call's texts), and every setting: the call is
  the corpus (:func:`whole_corpus_arguments`).
- **Slice doors** score slices of a corpus: a ``moverkit.map_scores`` or Ray batch, a reward step
  (``moverkit.reward_function``, ``moverkit.verl``), a server batch (``moverkit.serve``), an MBR
  selection and one lighteval sample. A pair's score there must not depend on the slice it lands
  in, so they apply the batch-independent defaults
  (:attr:`moverkit.integrations.registry.Metric.independent_defaults`: moverscore without IDF
  unless a table is given) and refuse a batch-dependent setting given explicitly or by a settings
  file (``centering="batch"``, ``idf=True`` without a table) with one message, :func:`refusal`,
  before any model loads (:func:`slice_arguments`).

The hashcode of a result says which defaults applied (moverscore's ``_idf_`` or ``_no-idf_``), so
a number from a slice door is never taken for the whole-corpus door's.

The function, the evaluate module and ``moverkit score`` are the metric itself; every other door
checks its arguments here (:meth:`moverkit.integrations.registry.Metric.scoring_arguments`),
chooses and names its outputs here (:func:`checked_output`, :func:`output_label`,
:func:`labelled_outputs`, :func:`output_scores`), checks them by value before it starts something
expensive (:func:`check_values`: a server's replicas, an lm-eval task's generation), places a
slice's call here (:func:`call_arguments`) and calls the metric through :func:`score`, which leaves
the random states as it found them; the outputs of one metric that a framework reports as separate
metrics share one call (:class:`LastCall`), and what a door builds per setting (a reward, a
request's checked arguments) is built once and kept (:func:`kept`).
``tests/integrations/test_adapter.py`` holds all of it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

from moverkit.facts.specs import SPECS

SLICES = "a map or Ray batch, a reward step, a server batch, an MBR selection, one lighteval sample"
"""What the slice doors score, as the refusal names them."""


def whole_corpus_arguments(metric: str, arguments: Mapping, door: str) -> dict:
    """``arguments`` of a whole-corpus door (``door`` names it in an error), checked by name
    (:meth:`moverkit.integrations.registry.Metric.scoring_arguments`): the metric's own defaults apply."""
    from moverkit.integrations.registry import get

    return get(metric).scoring_arguments(arguments, door)


def slice_arguments(metric: str, arguments: Mapping, door: str, also: Collection[str] = ()) -> dict:
    """``arguments`` of a slice door, checked by name (``also``: what the door takes beside the
    scores, :meth:`~moverkit.integrations.registry.Metric.scoring_arguments`), with the batch-independent
    defaults where neither the caller nor its settings file sets the argument; a batch-dependent
    setting is the ``ValueError`` of :func:`refusal`. The settings file is read here, before any
    model loads."""
    from moverkit.integrations.registry import get

    registered = get(metric)
    given = registered.scoring_arguments(arguments, door, also)
    taken = given.keys() | registered.settings_arguments(given).keys()
    resolved = {key: value for key, value in registered.independent_defaults.items() if key not in taken} | given
    dependence = registered.batch_dependence(resolved)
    if dependence is not None:
        raise ValueError(refusal(metric, dependence))
    return resolved


def refusal(metric: str, dependence: str) -> str:
    """The one message of every slice door for a batch-dependent setting (``dependence``, from
    :meth:`moverkit.integrations.registry.Metric.batch_dependence`)."""
    return (
        f"{metric}: {dependence}, so a pair's score would depend on the other pairs of its slice ({SLICES}); "
        "use centering='corpus' (the statistic shipped for the embedded model, or "
        "centering_stats=moverkit.fit_centering(texts)) or a per-text mode ('none', 'dim', 'sentence'), and "
        "idf=False or an IDF table; or score the whole corpus in one call (the function, moverkit.load, "
        "moverkit score), which takes every setting"
    )


def checked_output(metric: str, output: str | None) -> str | None:
    """``output`` of ``metric`` checked against its outputs: by default its main one; ``None`` for
    a metric of one score, whatever its key (twmd's is its variant, which a settings file may set)."""
    spec = SPECS[metric]
    if output is not None and output not in spec.outputs:
        raise ValueError(f"{metric} has no output {output!r}; its outputs are {', '.join(spec.outputs)}")
    if len(spec.outputs) == 1:
        return None
    return spec.main if output is None else output


def output_label(metric: str, output: str | None) -> str:
    """The name a door gives ``output`` of ``metric``: the metric's own name for its main (or one)
    score, ``<metric>_<output>`` for another (``centered_bertscore_recall``)."""
    return metric if output in (None, SPECS[metric].main) else f"{metric}_{output}"


def labelled_outputs(metric: str) -> list[tuple[str, str | None]]:
    """Each output of ``metric``, in its spec's order, as a door that reports every output as a
    metric of its own (lighteval, lm-eval) names and reads it: its :func:`output_label` and its
    :func:`checked_output` (``None`` for a metric of one score)."""
    return [(output_label(metric, output), checked_output(metric, output)) for output in SPECS[metric].outputs]


def output_scores(result: Mapping, output: str | None) -> list:
    """The scores of ``output`` (a :func:`checked_output`) in a metric's ``result``; for ``None``,
    its one score."""
    if output is not None:
        return result[output]
    (scores,) = (value for key, value in result.items() if key != "hashcode")
    return scores


CPU_BATCH_SIZE = 16
"""Texts a batch of a slice door's encoder holds on a CPU unless ``batch_size`` says otherwise (the
metrics' default is 64). A CPU's forward pass costs what its batch is padded to, and a GRPO step's
completions vary in length: 16 prompts x 8 completions of WMT17 length, 3,417 tokens, were padded
to 5,396 in batches of 64 and to 3,844 in batches of 16, which took a centered_bertscore reward
from 1.08x a loaded ``BERTScorer``'s time to 0.77x (docs/generation.md). A slice door's call is the
metric called with ``batch_size=16``, to the bit; it differs from the metric's default batching in
the last digits only (a text's vectors depend on its batch's shapes at rounding level)."""


def call_arguments(arguments: Mapping, rank: int | None = None) -> dict:
    """``arguments`` of a slice door's call with where it runs filled in where not given:
    ``device`` GPU ``rank mod n_gpus`` for worker ``rank`` (``datasets.map(with_rank=True)``),
    else the current CUDA device (under accelerate and DDP, the process's own GPU), else the CPU;
    and on a CPU, ``batch_size`` :data:`CPU_BATCH_SIZE`."""
    import torch

    arguments = dict(arguments)
    if "device" not in arguments:
        if not torch.cuda.is_available():
            arguments["device"] = "cpu"
        elif rank is not None:
            arguments["device"] = f"cuda:{rank % torch.cuda.device_count()}"
        else:
            arguments["device"] = f"cuda:{torch.cuda.current_device()}"
    device = arguments["device"]
    on_cpu = not isinstance(device, int) and torch.device(device).type == "cpu"
    if on_cpu and "batch_size" not in arguments:
        arguments["batch_size"] = CPU_BATCH_SIZE
    return arguments


def check_values(metric: str, arguments: Mapping) -> None:
    """``arguments`` (checked by name, by the door) checked by value, by ``moverkit.functional.<metric>``
    itself on no pairs, stopped where it would get its encoder
    (:func:`~moverkit._core.encoding.models.arguments_only`): the function's own checks and
    messages (``temperature=-1``, a model that is not there, a layer the model lacks, a device
    this machine lacks), in milliseconds and without a model's weights in memory. A door that
    starts something expensive (a server's replicas, a task's generation) calls it first. The stop
    is this call's own: other threads' calls meanwhile load and score as ever."""
    from moverkit._core.encoding import ArgumentsChecked, arguments_only

    try:
        with arguments_only():
            score(metric, [], [], arguments)
    except ArgumentsChecked:
        pass


def score(metric: str, predictions: list, references: list, arguments: Mapping) -> dict:
    """``moverkit.functional.<metric>`` on the pairs under ``arguments`` (checked by the door), the
    random states (Python's, numpy's, torch's) left as they were, as a training loop that seeded
    them counts on: the one call every door makes."""
    from moverkit._core.base import kept_random_state
    from moverkit.integrations.registry import get

    with kept_random_state():
        return get(metric).function(predictions, references, **arguments)


class LastCall:
    """:func:`score` of ``metric`` that keeps its last result: the outputs of one metric
    (precision, recall, F1), which lighteval and lm-eval report as separate metrics, ask for the
    same task's pairs in turn and share one call. A call on other pairs or arguments replaces it."""

    def __init__(self, metric: str):
        self.metric = metric
        self._last: tuple[str, dict] | None = None

    def __call__(self, predictions, references, arguments: Mapping) -> dict:
        key = json.dumps([predictions, references, arguments], sort_keys=True, default=repr)
        if self._last is None or self._last[0] != key:
            self._last = (key, score(self.metric, predictions, references, arguments))
        return self._last[1]


KEPT = 64
"""What a process keeps of what doors build per setting (:func:`kept`): the last 64 settings used."""
_KEPT: dict[tuple, object] = {}
_KEPT_LOCK = threading.Lock()
Built = TypeVar("Built")


def kept(key: tuple, build: Callable[[], Built]) -> Built:
    """What ``build()`` makes for ``key`` (plain values: the door, the metric and its settings as
    JSON), made once and kept while it is among the :data:`KEPT` last used in this process: a door
    called per step or per request with one setting (verl's reward, a server's requests' arguments)
    builds and checks it once, and a process that sees many settings holds a bounded number. A
    ``build`` that raises keeps nothing."""
    with _KEPT_LOCK:
        if key in _KEPT:
            _KEPT[key] = _KEPT.pop(key)  # the most recently used last: the first is the one to drop
            return _KEPT[key]
    made = build()
    with _KEPT_LOCK:
        _KEPT[key] = made
        if len(_KEPT) > KEPT:
            del _KEPT[next(iter(_KEPT))]
    return made
