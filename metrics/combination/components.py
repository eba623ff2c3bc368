"""The components of a combination (:mod:`moverkit.combination`): moverkit's metrics and sacrebleu's
anchors, each oriented so that higher is better."""

from __future__ import annotations

from moverkit.facts.specs import SPECS, spec

ANCHORS = ("chrF", "BLEU")
"""sacrebleu's components beside moverkit's metrics."""

COMBINED = "combined"
"""The name of a combination's scores beside the metrics' (``moverkit compare``, ``moverkit score``)."""

COMPONENTS = (*sorted(SPECS), *ANCHORS)
"""Every possible component name."""


def orientation(name: str) -> float:
    """``+1`` for a component where higher is better, ``-1`` for a distance (``lazy_emd``)."""
    _check_component(name)
    return 1.0 if name in ANCHORS or spec(name).higher_is_better else -1.0


def _check_component(name) -> None:
    if name not in COMPONENTS:
        raise ValueError(f"unknown component {name!r}; the components are {', '.join(COMPONENTS)}")
