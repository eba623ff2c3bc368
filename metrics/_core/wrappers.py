"""What moverkit's classes for other libraries (:mod:`moverkit.torchmetrics`, :mod:`moverkit.lighteval`)
share: each metric's facts and function, looked up in one place; the check of the scoring arguments
they pass on; and whether those arguments make a pair's score depend on the other pairs of the call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

from moverkit.specs import SPECS, MetricSpec

CLASS_NAMES = {
    "centered_bertscore": "CenteredBERTScore",
    "lazy_emd": "LazyEMD",
    "moverscore": "MoverScore",
    "sbertscore": "SBERTScore",
    "twmd": "TWMD",
}
"""The name of each metric's class, in torchmetrics' style (``BERTScore``, ``CHRFScore``)."""

NOT_PASSED_ON = ("predictions", "references", "return_alignment", "return_reference_index")
"""Arguments of ``moverkit.functional.<metric>`` a wrapper does not take: the texts come from the
library (``update``, a lighteval ``Doc``), and the alignment and the reference index are no scores."""


def metric_parts(name: str) -> tuple[MetricSpec, Callable]:
    """The spec (:mod:`moverkit.specs`) and ``moverkit.functional`` function of metric ``name``."""
    from moverkit import functional

    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown metric {name!r}; choose one of {', '.join(SPECS)}")
    return spec, getattr(functional, name)


def scoring_arguments(name: str, arguments: Mapping, owner: str) -> dict:
    """``arguments`` as ``moverkit.functional.<name>`` takes them, or a ``TypeError`` naming the
    argument that it does not take (or that ``owner``, the wrapper's name, does not pass on)."""
    _, function = metric_parts(name)
    accepted = set(inspect.signature(function).parameters) - set(NOT_PASSED_ON)
    for key in arguments:
        if key in NOT_PASSED_ON:
            raise TypeError(f"{owner} does not take {key}: it scores the texts it is given and keeps scores only")
        if key not in accepted:
            raise TypeError(
                f"{owner} got an unknown argument {key!r}; it takes those of moverkit.functional.{name}: "
                f"{', '.join(sorted(accepted))}"
            )
    return dict(arguments)


def batch_dependence(name: str, arguments: Mapping) -> str | None:
    """Why a pair's score under ``arguments`` depends on the other pairs of the call, or None when
    it does not (each pair could then be scored on its own, in any batch, with the same result).

    Two settings look at every text of a call: ``centering="batch"`` (the mean vector of the
    call's texts) and ``idf=True`` (document frequencies over the call's references; moverscore's
    ``idf=None``, its presets' default, is ``True``, and so is its ``prediction_idf``, which follows
    ``idf`` when left out). A settings file's arguments count as if passed."""
    _, function = metric_parts(name)
    defaults = {key: p.default for key, p in inspect.signature(function).parameters.items()}
    resolved = {**defaults, **arguments}
    if resolved.get("settings") is not None:
        from moverkit.settings import load_settings

        resolved.update(load_settings(resolved["settings"], name).arguments)
    if resolved.get("centering") == "batch":
        return "centering='batch' centers by the mean vector of every text of the call"
    if "prediction_idf" in resolved and resolved["prediction_idf"] is None:
        resolved["prediction_idf"] = resolved.get("idf")
    for key in ("idf", "prediction_idf"):
        if key in resolved and not (resolved[key] is False or isinstance(resolved[key], Mapping)):
            shown = "None (the preset's True)" if resolved[key] is None else repr(resolved[key])
            return f"{key}={shown} weighs tokens by their document frequency over the texts of the call"
    return None
