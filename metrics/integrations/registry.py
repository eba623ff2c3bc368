"""Every metric once, as one object: its facts, its function, its defaults and how fine-tuning
differentiates it.

:data:`REGISTRY` maps each metric's name to a :class:`Metric`. Everything that lists or dispatches
on metrics reads it: the CLI's choices, tuning, fine-tuning
(:attr:`Metric.differentiable`), the benchmarks, the classes for torchmetrics and lighteval, the
checks of a metric name. Its names are those of :data:`moverkit.facts.specs.SPECS`, the light table of the
metrics' facts that code which must not load torch (``import moverkit``, the CLI's argument parser)
reads instead; the evaluate modules are ``moverkit.load(name)`` of the same names.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from moverkit import functional
from moverkit.facts.specs import SPECS, MetricSpec
from moverkit.formats.settings import load_settings, settable_arguments

NOT_PASSED_ON = ("predictions", "references", "return_alignment", "return_reference_index")
"""Arguments of a metric's function that the classes for other libraries do not take: the texts
come from the library (``update``, a lighteval ``Doc``), and the alignment and the reference index
are no scores."""


@dataclass(frozen=True)
class Metric:
    """One metric: ``spec`` (its facts: outputs, direction, range, reference points, its class
    name), ``function`` (``moverkit.functional.<name>``) and ``differentiable`` (``(data, params) ->
    scores`` with autograd through the encoder, for :mod:`moverkit.finetune`: the function the
    spec names, :func:`differentiable_of`; ``None`` where the metric has none)."""

    spec: MetricSpec
    function: Callable
    differentiable: Callable | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def independent_defaults(self) -> dict[str, object]:
        """Defaults under which a pair scores the same whatever the other pairs of its call, where the
        function's differ: IDF off unless a table is given, for a metric whose default fits IDF over
        the call's references (moverscore's ``idf=None``, its presets' True). The doors that score
        slices of a corpus score with these (:mod:`moverkit.integrations.adapter`)."""
        return {"idf": False} if self.defaults.get("idf", False) is not False else {}

    @property
    def class_name(self) -> str:
        """Its class in torchmetrics' style (``moverkit.torchmetrics``), as ``CenteredBERTScore``."""
        return self.spec.class_name

    @property
    def defaults(self) -> dict[str, object]:
        """Every argument of :attr:`function` but the inputs, with its default."""
        parameters = inspect.signature(self.function).parameters
        return {key: p.default for key, p in parameters.items() if key not in ("predictions", "references")}

    @property
    def settable(self) -> dict[str, object]:
        """The arguments a settings file may set (:func:`moverkit.formats.settings.settable_arguments`)."""
        return settable_arguments(self.function)

    def scoring_arguments(self, arguments: Mapping, owner: str, also: Collection[str] = ()) -> dict:
        """``arguments`` as :attr:`function` takes them, or a ``TypeError`` naming the argument that
        it does not take (or that ``owner``, a wrapper's name, does not pass on: those of
        :data:`NOT_PASSED_ON` but the ones ``also`` names, which ``moverkit.map_scores`` keeps per row)."""
        accepted = set(self.defaults) - (set(NOT_PASSED_ON) - set(also))
        for key in arguments:
            if key not in accepted and key in NOT_PASSED_ON:
                raise TypeError(f"{owner} does not take {key}: it scores the texts it is given and keeps scores only")
            if key not in accepted:
                raise TypeError(
                    f"{owner} got an unknown argument {key!r}; it takes those of moverkit.functional.{self.name}: "
                    f"{', '.join(sorted(accepted))}"
                )
        return dict(arguments)

    def settings_arguments(self, arguments: Mapping) -> dict:
        """The arguments the settings file of ``arguments`` sets (``settings=PATH``), read and checked;
        none without one."""
        if arguments.get("settings") is None:
            return {}
        return dict(load_settings(arguments["settings"], self.name, self.function).arguments)

    def batch_dependence(self, arguments: Mapping) -> str | None:
        """Why a pair's score under ``arguments`` depends on the other pairs of the call, or None when
        it does not (each pair could then be scored on its own, in any batch, with the same result).

        Two settings look at every text of a call: ``centering="batch"`` (the mean vector of the
        call's texts) and ``idf=True`` (document frequencies over the call's references; moverscore's
        ``idf=None``, its presets' default, is ``True``, and so is its ``prediction_idf``, which
        follows ``idf`` when left out). A settings file's arguments count as if passed."""
        resolved = {**self.defaults, **arguments, **self.settings_arguments(arguments)}
        if resolved.get("centering") == "batch":
            return "centering='batch' centers by the mean vector of every text of the call"
        if "prediction_idf" in resolved and resolved["prediction_idf"] is None:
            resolved["prediction_idf"] = resolved.get("idf")
        for key in ("idf", "prediction_idf"):
            if key in resolved and not (resolved[key] is False or isinstance(resolved[key], Mapping)):
                shown = "None (the preset's True)" if resolved[key] is None else repr(resolved[key])
                return f"{key}={shown} weighs tokens by their document frequency over the texts of the call"
        return None


def differentiable_of(spec: MetricSpec) -> Callable | None:
    """The function of ``moverkit.functional.<name>`` that the spec names as its differentiable
    scorer (:attr:`MetricSpec.differentiable`), or None."""
    if spec.differentiable is None:
        return None
    return getattr(importlib.import_module(f"{functional.__name__}.{spec.name}"), spec.differentiable)


REGISTRY: dict[str, Metric] = {
    name: Metric(spec, getattr(functional, name), differentiable_of(spec)) for name, spec in SPECS.items()
}
"""Every metric, by name (the names of :data:`moverkit.facts.specs.SPECS`, in its order)."""


def get(name: str) -> Metric:
    """The :class:`Metric` named ``name``; an unknown name is a ``ValueError`` listing the metrics."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ValueError(f"unknown metric {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]
