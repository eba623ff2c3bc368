"""The one opening of every metric function: :func:`metric_function`.

A metric function is written with its own arguments only, and a ``call`` parameter::

    @metric_function()
    def twmd(call: MetricCall, *, variant="twmd", ...) -> dict:
        ...

The decorator gives it its public signature: ``predictions`` and ``references``, its own keyword
arguments, then the shared ones (the keyword parameters of
:func:`~moverkit._core.call.opening.open_call`, with their defaults), then ``settings``. The metric is
the one of the function's name. A caller's texts and shared arguments are checked by keyword
into the :class:`~moverkit._core.call.opening.MetricCall` that ``call`` receives, and ``settings=PATH`` is
:func:`~moverkit.formats.settings.score_with_settings`'s. This is the one wrapper of a metric function and
the one place its signature is written. ``inspect.signature``, ``help()``, evaluate's
``_compute``, settings files and the CLI read the public signature; static type checkers see the
wrapper's ``**kwargs``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from moverkit._core.call import MetricCall, Opening, open_call
from moverkit.facts.specs import SPECS

_OPENING = inspect.signature(open_call).parameters
INPUTS = (_OPENING["predictions"], _OPENING["references"])
"""``predictions`` and ``references``, the positional arguments of every metric."""
SHARED = tuple(p for p in _OPENING.values() if p.kind is inspect.Parameter.KEYWORD_ONLY)
"""The shared arguments, in the order every signature lists them: ``open_call``'s keyword-only
parameters, which are they and nothing else (what a metric says of itself is an ``Opening``)."""

SETTINGS = inspect.Parameter("settings", inspect.Parameter.KEYWORD_ONLY, default=None)
"""The last parameter of every metric: a settings file (:mod:`moverkit.formats.settings`)."""

TOKEN_ONLY = frozenset({"num_layers", "max_length", "long_texts"})
"""Shared arguments a sentence-level metric does not take: it encodes whole sentences with a
sentence-transformers model (its own layer and limit)."""


def metric_function(*, languages: Callable | None = None):
    """Decorate ``moverkit.functional.<metric>``, the function named as its metric (see the module
    doc). Its spec (:class:`~moverkit.facts.specs.MetricSpec`) gives its default ``centering``, and
    ``languages`` (the languages its ``lang`` takes), with the spec's ``level`` and ``default_layer``
    (:class:`~moverkit.facts.specs.MetricSpec`), go to
    :func:`~moverkit._core.call.opening.open_call` as its :class:`~moverkit._core.call.opening.Opening`.
    A ``"sentence"`` metric takes none of :data:`TOKEN_ONLY`."""

    def decorate(function):
        metric = function.__name__
        level, centering = SPECS[metric].level, SPECS[metric].centering
        opening = Opening(metric, level, languages, SPECS[metric].default_layer)
        signature = inspect.signature(function)
        own = [p for p in signature.parameters.values() if p.name != "call"]
        shared = [
            p.replace(default=centering) if p.name == "centering" else p
            for p in SHARED
            if level == "token" or p.name not in TOKEN_ONLY
        ]
        names = {p.name for p in shared}

        def front_door(predictions, references, **given) -> MetricCall:
            """The metric's call on ``predictions`` and ``references``, opened as the metric opens
            it (its default centering, its level, languages and default layer; every shared
            argument of ``given`` checked): the one way into a call of this metric, for the
            function itself and for a caller that scores the call's chunks in its own way
            (``moverkit.integrations.mbr``'s blocks of cosines)."""
            unknown = sorted(given.keys() - names)
            if unknown:
                raise TypeError(f"{metric}() got unexpected keyword arguments for its call: {', '.join(unknown)}")
            return open_call(opening, predictions, references, **{"centering": centering, **given})

        @functools.wraps(function)
        def opened(predictions, references, *, settings=None, **kwargs):
            if "call" in kwargs:  # the decorator's own parameter, not an argument of the metric
                raise TypeError(f"{metric}() got an unexpected keyword argument 'call'")
            if settings is not None:
                from moverkit.formats.settings import score_with_settings

                return score_with_settings(opened, metric, settings, predictions, references, kwargs)
            call = front_door(predictions, references, **{name: kwargs.pop(name) for name in names & kwargs.keys()})
            with call.running():  # the environment the opening read, for the whole call
                return function(call, **kwargs)

        opened.__signature__ = signature.replace(parameters=[*INPUTS, *own, *shared, SETTINGS])
        opened.open_call = front_door
        return opened

    return decorate


__all__ = ["INPUTS", "SETTINGS", "SHARED", "TOKEN_ONLY", "metric_function"]
