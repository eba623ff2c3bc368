"""moverkit's metrics as torchmetrics ``Metric`` classes (``pip install "moverkit[torchmetrics]"``),
for a PyTorch Lightning ``validation_step``, a ``MetricCollection`` or a plain loop::

    from moverkit.torchmetrics import CenteredBERTScore

    metric = CenteredBERTScore()
    metric.update(["a cat sat on the mat"], ["the cat sat on the mat"])
    metric.compute()["f1_mean"]

One class per metric, named by its spec's ``class_name`` (:class:`CenteredBERTScore`,
:class:`TWMD`, ...: :func:`metric_class`), all of them :class:`MoverkitMetric`: the arguments are
those of ``moverkit.functional.<metric>``, and ``compute()`` gives the numbers that function gives
for all the pairs at once, whatever the batches and however many processes: ``compute()`` is a
whole-corpus door (:mod:`moverkit.integrations.adapter`), which takes the metric's own defaults and
every setting.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence

import numpy as np
import torch

from moverkit._core.base import check_inputs
from moverkit.integrations import adapter, missing_extra
from moverkit.integrations.registry import REGISTRY, get

try:
    from torchmetrics import Metric
    from torchmetrics.utilities import dim_zero_cat
    from torchmetrics.utilities.distributed import gather_all_tensors
except ModuleNotFoundError as err:
    raise missing_extra(err, "torchmetrics") from None

METRIC_ARGUMENTS = frozenset(
    {"compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn", "distributed_available_fn",
     "sync_on_compute", "compute_with_cache"}
)  # fmt: skip
"""The keyword arguments of torchmetrics' ``Metric`` itself; every other one goes to the moverkit function."""


class MoverkitMetric(Metric):
    """A moverkit metric as a torchmetrics ``Metric``; the subclasses name the metric.

    ``MoverkitMetric(**arguments)``: the arguments of ``moverkit.functional.<metric>`` (its card
    documents them) but ``return_alignment`` and ``return_reference_index``, and torchmetrics'
    own (``compute_on_cpu``, ``dist_sync_on_step``, ``process_group``, ``sync_on_compute``, ...).
    The constructor checks them and loads the encoder once (a call on no pairs), so a bad value
    fails here rather than at the first batch; ``hashcode`` is that call's hashcode.

    ``update(preds, target)``: ``preds`` a string or a list of strings; ``target`` one reference
    or a list of references per prediction (for a single string ``preds``, a string or a list of
    its references). With several references, the best score is kept, as in the function.

    ``compute()``: ``{output: tensor of one score per pair, f"{output}_mean": their mean}`` for
    each output of the function (``precision``, ``recall`` and ``f1``; or the metric's one score,
    e.g. ``twmd``), float64, in the order the pairs were given. With no pairs the tensors are
    empty and the means NaN.

    What the state holds depends on the arguments:

    - where each pair's score is its own (the default of every metric but moverscore: ``corpus``,
      ``sentence``, ``dim`` or no centering, and no IDF over the call), ``update`` scores its pairs
      at once and keeps only the scores: memory grows by 8 bytes per output and pair, and
      ``compute()`` only gathers them;
    - where a score depends on every text (``centering="batch"``, ``idf=True``, and moverscore's
      default IDF, :meth:`moverkit.integrations.registry.Metric.batch_dependence`), ``update`` keeps the texts
      (as UTF-8 bytes) and ``compute()`` scores all of them in one call, as the function would.
      ``keeps_texts`` says which, with the reason.

    Under DDP the states are gathered (``dist_reduce_fx="cat"``) with the rank that scored each
    pair, and put back in the order of a ``DistributedSampler`` without shuffling (pair ``i`` of
    rank ``r`` is pair ``i * world_size + r``), so two processes give the single-process tensors;
    the means do not depend on the order. The sampler's padding (it repeats pairs to even out the
    ranks) is scored like any pair, as in every torchmetrics metric. A process with no pairs gets
    the other processes' scores.

    The kept scores are what the function returned, whatever is done to the metric: ``set_dtype``,
    ``.to(dtype)``, ``.half()`` or ``.double()`` move the states to another device but never change
    their dtypes (float64 scores, integer ranks and lengths, UTF-8 bytes), and ``compute()`` gives
    float64. In a ``MetricCollection`` each metric keeps its own states: torchmetrics' compute
    groups share the states of metrics whose states are equal after the first update, and two
    metrics' scores can be equal by chance (an empty prediction scores 0 under twmd and under
    moverscore), so each metric carries an empty state named after its settings (``settings_<digest>``
    of its hashcode without the versions), which only a metric with the same settings shares.

    ``merge_state(other)`` appends ``other``'s pairs after this metric's (arrival order; torchmetrics'
    default puts the incoming ones first) and refuses a state of other settings. ``plot()`` draws the
    means (one point, or one per result given) within the metric's range.
    """

    is_differentiable = False
    full_state_update = False
    metric: str

    def __init_subclass__(cls, metric: str | None = None, **kwargs):
        """``class TWMD(MoverkitMetric, metric="twmd")``: the direction and the plot range come
        from the metric's spec (:mod:`moverkit.facts.specs`); an unbounded end is left open."""
        super().__init_subclass__(**kwargs)
        if metric is None:
            return
        spec = get(metric).spec
        cls.metric = metric
        cls.higher_is_better = spec.higher_is_better
        cls.plot_lower_bound = spec.low
        cls.plot_upper_bound = spec.high if math.isfinite(spec.high) else None

    def __init__(self, **kwargs):
        if not hasattr(type(self), "metric"):
            classes = ", ".join(metric.class_name for metric in REGISTRY.values())
            raise TypeError(
                f"MoverkitMetric is the base class of moverkit's torchmetrics classes; use one of {classes}"
            )
        torchmetrics_kwargs = {key: kwargs.pop(key) for key in list(kwargs) if key in METRIC_ARGUMENTS}
        super().__init__(**torchmetrics_kwargs)
        self._arguments = adapter.whole_corpus_arguments(self.metric, kwargs, type(self).__name__)
        none = adapter.score(self.metric, [], [], self._arguments)
        self.hashcode = none["hashcode"]
        self.outputs = tuple(key for key in none if key != "hashcode")
        self.keeps_texts = get(self.metric).batch_dependence(self._arguments)
        states = {"ranks": torch.long}
        if self.keeps_texts:
            states.update(pred_bytes=torch.uint8, pred_lengths=torch.long, ref_bytes=torch.uint8)
            states.update(ref_lengths=torch.long, ref_counts=torch.long)
        else:
            states["scores"] = torch.float64  # flat: n_outputs per pair, pair after pair (one 1-D layout to gather)
        # Never appended to: its name keeps a MetricCollection from sharing states across settings (class doc).
        # Named by the hashcode's settings, not its versions: a saved state_dict loads after an upgrade.
        settings = self.hashcode.rsplit("_version=", 1)[0]
        states[f"settings_{hashlib.sha256(settings.encode()).hexdigest()[:16]}"] = torch.float64
        self._state_dtypes = states
        for name in states:
            self.add_state(name, [], dist_reduce_fx="cat")

    def update(self, preds: str | Sequence[str], target: str | Sequence[str] | Sequence[Sequence[str]]) -> None:
        """Add pairs: score them now, or keep their texts (see the class doc)."""
        if isinstance(preds, str):
            preds, target = [preds], [target]
        predictions, references = check_inputs(preds, target)
        if not predictions:
            return
        rank = torch.distributed.get_rank(self.process_group) if self.distributed_available_fn() else 0
        self.ranks.append(torch.full((len(predictions),), rank, dtype=torch.long, device=self.device))
        if self.keeps_texts:
            self._keep(predictions, "pred")
            self._keep([ref for refs in references for ref in refs], "ref")
            self.ref_counts.append(torch.tensor([len(refs) for refs in references], device=self.device))
        else:
            self.scores.append(self._score(predictions, references).reshape(-1))

    def compute(self) -> dict[str, torch.Tensor]:
        """Per-pair scores and their means (see the class doc)."""
        ranks = _cat(self.ranks, torch.long, self.device)
        order = pair_order(ranks)
        if self.keeps_texts:
            predictions = _texts(self.pred_bytes, self.pred_lengths, self.device)
            flat = _texts(self.ref_bytes, self.ref_lengths, self.device)
            bounds = [0, *torch.cumsum(_cat(self.ref_counts, torch.long, self.device), 0).tolist()]
            references = [flat[bounds[i] : bounds[i + 1]] for i in range(len(predictions))]
            scores = self._score([predictions[i] for i in order], [references[i] for i in order])
        else:
            scores = _cat(self.scores, torch.float64, self.device).reshape(len(order), len(self.outputs))[order]
        result = {name: scores[:, k] for k, name in enumerate(self.outputs)}
        result.update({f"{name}_mean": scores[:, k].mean() for k, name in enumerate(self.outputs)})
        return result

    def _wrap_compute(self, compute):
        """torchmetrics squeezes a one-element result to a 0-d tensor; the per-pair scores stay one
        score per pair (shape ``(1,)`` for one pair), so that ``len`` and iteration hold."""
        wrapped = super()._wrap_compute(compute)

        @functools.wraps(compute)
        def one_score_per_pair(*args, **kwargs):
            result = wrapped(*args, **kwargs)
            return {key: value.reshape(-1) if key in self.outputs else value for key, value in result.items()}

        return one_score_per_pair

    def _apply(self, fn, exclude_state=""):
        """A move (``.to(device)``, ``.cuda()``) moves the states; a dtype change (``set_dtype``,
        ``.to(dtype)``, ``.half()``, ``.double()``) leaves them as they are (class doc): torchmetrics
        would cast every state, integer ranks and lengths included, and round the float64 scores."""
        # Results kept by compute() and forward() are scores too: moved, never cast.
        kept = {key: getattr(self, key) for key in ("_computed", "_forward_cache")}
        self._computed = self._forward_cache = None
        this = super()._apply(fn, exclude_state=tuple(self._defaults))
        for name in self._defaults:
            this._defaults[name] = [value.to(this.device) for value in this._defaults[name]]
            setattr(this, name, _moved(getattr(this, name), this.device))
        for key, result in kept.items():
            if result is not None:
                setattr(this, key, {name: value.to(this.device) for name, value in result.items()})
        return this

    def _sync_dist(self, dist_sync_fn=gather_all_tensors, process_group=None) -> None:
        """Gather the states of every process. An empty state is first given its own dtype as an
        empty tensor (torchmetrics stands in an empty float32 one, which gloo and NCCL cannot gather
        beside int64 or uint8 states of the other processes), so a process with no pairs takes part."""
        for name, dtype in self._state_dtypes.items():
            if isinstance(getattr(self, name), list) and not getattr(self, name):
                setattr(self, name, [torch.empty(0, dtype=dtype, device=self.device)])
        super()._sync_dist(dist_sync_fn, process_group)

    def merge_state(self, incoming_state) -> None:
        """Add the pairs of ``incoming_state`` (a metric of this class and settings, or its
        ``metric_state``, lists or gathered tensors) after this metric's own: arrival order (class
        doc). Nothing changes unless the merge can be done; a cached result is dropped."""
        if self.dist_sync_on_step or not isinstance(incoming_state, (dict, type(self))):
            super().merge_state(incoming_state)  # torchmetrics' own error, before anything changes
        state = incoming_state.metric_state if isinstance(incoming_state, Metric) else incoming_state
        if set(state) != set(self._defaults):
            raise ValueError(
                f"{type(self).__name__}.merge_state: the incoming state is of other settings or another metric "
                f"(states {sorted(state)}; this metric's {sorted(self._defaults)})"
            )
        for name in self._defaults:
            setattr(self, name, _as_list(getattr(self, name)) + _as_list(state[name]))
        self._computed = None
        self._update_count += 1

    def plot(self, val=None, ax=None):
        """Plot the means of ``val`` (a result of :meth:`compute`, a list of them, or the metric's
        current result when None) within the metric's range; returns matplotlib's figure and axes."""
        val = self.compute() if val is None else val
        results = [val] if isinstance(val, dict) else list(val)
        means = [{name: result[f"{name}_mean"] for name in self.outputs} for result in results]
        return self._plot(means[0] if isinstance(val, dict) else means, ax)

    def _score(self, predictions: list[str], references: list[list[str]]) -> torch.Tensor:
        """The function's scores of the pairs, shape (n_pairs, n_outputs), float64, on the metric's device."""
        result = adapter.score(self.metric, predictions, references, self._arguments)
        columns = [result[name] for name in self.outputs]
        return torch.tensor(columns, dtype=torch.float64, device=self.device).T

    def _keep(self, texts: list[str], side: str) -> None:
        """Append ``texts`` to the ``{side}_bytes`` and ``{side}_lengths`` states (UTF-8 bytes: a state is a tensor)."""
        encoded = [text.encode("utf-8") for text in texts]
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        getattr(self, f"{side}_bytes").append(torch.from_numpy(data).to(self.device))
        getattr(self, f"{side}_lengths").append(torch.tensor([len(b) for b in encoded], device=self.device))


def pair_order(ranks: torch.Tensor) -> torch.Tensor:
    """The permutation that puts gathered pairs in the order of a ``DistributedSampler`` without
    shuffling: pair ``i`` of rank ``r`` (``ranks`` gives each pair's rank, each rank's pairs in its
    own order) goes to place ``i * world_size + r``. One process: the identity."""
    position = torch.empty_like(ranks)
    for rank in ranks.unique():
        mine = ranks == rank
        position[mine] = torch.arange(int(mine.sum()), device=ranks.device)
    world = int(ranks.max()) + 1 if len(ranks) else 1
    return torch.argsort(position * world + ranks, stable=True)


def _as_list(state) -> list:
    """A state as a list of tensors (a list state, or the tensor DDP's gathering left)."""
    return [state] if isinstance(state, torch.Tensor) else list(state)


def _moved(state, device):
    """A state (a list of tensors, or the tensor DDP's gathering left) on ``device``, dtype kept."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    return [value.to(device) for value in state]


def _cat(state, dtype: torch.dtype, device) -> torch.Tensor:
    """A list state (or the tensor DDP's gathering left) as one tensor; empty when nothing was added."""
    if isinstance(state, list) and not state:
        return torch.empty(0, dtype=dtype, device=device)
    return dim_zero_cat(state)


def _texts(data, lengths, device) -> list[str]:
    """The texts of a ``*_bytes`` state split by its ``*_lengths`` state."""
    raw = _cat(data, torch.uint8, device).cpu().numpy().tobytes()
    bounds = [0, *torch.cumsum(_cat(lengths, torch.long, device), 0).tolist()]
    return [raw[bounds[i] : bounds[i + 1]].decode("utf-8") for i in range(len(bounds) - 1)]


def metric_class(name: str) -> type[MoverkitMetric]:
    """The class of metric ``name``, named by its spec's ``class_name`` (``CenteredBERTScore``), its
    direction, range and outputs read from the spec, as its docstring says."""
    registered = get(name)
    spec = registered.spec
    named = f", named by ``{spec.output_named_by}``" if spec.output_named_by else ""
    doc = (
        f"moverkit's {name} as a torchmetrics ``Metric`` (outputs {', '.join(spec.outputs)}{named}; {spec.direction}): "
        f"the arguments of ``moverkit.functional.{name}``; see :class:`MoverkitMetric`."
    )
    dependence = registered.batch_dependence({})
    if dependence is not None:
        doc += f" By default {dependence}, so it keeps the texts and scores them at ``compute()``."
    namespace = {"__doc__": doc, "__module__": __name__, "__qualname__": spec.class_name}
    return type(spec.class_name, (MoverkitMetric,), namespace, metric=name)


_CLASSES = {registered.class_name: metric_class(name) for name, registered in REGISTRY.items()}
globals().update(_CLASSES)

__all__ = ["MoverkitMetric", *_CLASSES]
