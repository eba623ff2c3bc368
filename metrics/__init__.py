"""moverkit: embedding- and optimal-transport-based metrics for text generation.

Each metric is a Hugging Face ``evaluate`` module bundled with the package::

    import moverkit
    metric = moverkit.load("centered_bertscore")
    metric.compute(predictions=["a cat sat"], references=["the cat sat"])
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moverkit._core.base import MoverkitWarning
    from moverkit._core.call import set_memory_budget, temporary_memory_budget
    from moverkit._core.centering import fit_centering
    from moverkit._core.encoding import release, set_cache
    from moverkit.comparison import compare
    from moverkit.integrations.dataset_map import map_scores
    from moverkit.integrations.mbr import mbr_select
    from moverkit.integrations.rewards import reward_function

from moverkit.facts.specs import SPECS
from moverkit.facts.version import __version__

_HERE = Path(__file__).resolve().parent

# The paths 0.4.0 moved into moverkit.integrations (moverkit.registry, evaluate_modules,
# dataset_map, rewards, mbr) import for one more release from _moved/, a folder on this package's
# path: each warns (DeprecationWarning, naming its new path) and is the very module of the new path.
# A plain path entry, no import hook; the folder goes in 0.5.0 with the old paths.
__path__.append(str(_HERE / "_moved"))

METRICS = tuple(SPECS)
"""The metrics' names, those of the registry (:data:`moverkit.integrations.registry.REGISTRY`, read
here from its light table :data:`moverkit.facts.specs.SPECS`, so that ``import moverkit`` loads no
torch); each has its bundled evaluate module, ``<name>/<name>.py``."""


def module_path(name: str) -> Path:
    """Folder of the bundled evaluate module ``name`` (what ``evaluate.load`` takes)."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; choose one of {', '.join(METRICS)}")
    return _HERE / name


def load(name: str, **kwargs):
    """Load the bundled evaluate module ``name`` offline: ``evaluate.load(<its folder>, **kwargs)``.

    ``kwargs`` go to ``evaluate.load`` (``experiment_id``, ``num_process``, ``process_id``, ...).
    The encoder itself loads on the first ``compute`` and is kept for the whole process.
    """
    import evaluate

    return evaluate.load(str(module_path(name)), **kwargs)


def means(result: dict) -> dict:
    """The corpus mean of every per-example score of a ``compute`` result, one float per key:
    ``{"precision": 0.91, "recall": 0.90, "f1": 0.90}``. What a training loop logs
    (``compute_metrics`` of a ``transformers`` Trainer returns it as is): ``hashcode`` and
    ``alignment`` are left out, and so is a key with no examples (rather than a NaN)."""
    import math

    return {
        key: math.fsum(values) / len(values)
        for key, values in result.items()
        if isinstance(values, list) and values and all(isinstance(v, (int, float)) for v in values)
    }


# The functions themselves (their signatures and docs), imported on first use so that
# ``import moverkit`` stays light (no torch, no transformers): ``fit_centering`` fits the ``corpus``
# centering statistic of token or sentence vectors; ``release`` frees every loaded model;
# ``set_memory_budget`` bounds the token vectors one call holds (larger calls run in chunks), for the
# process, and ``temporary_memory_budget`` for the calls of a ``with`` block in this thread;
# ``set_cache`` turns on (or off) the cache of token clouds (and sentence vectors) across calls, emptied by ``release``;
# ``MoverkitWarning`` is the class of every warning moverkit gives; ``compare`` compares systems
# with bootstrap intervals and paired significance (moverkit.comparison); ``map_scores`` makes a
# ``datasets.Dataset.map`` function of a metric (moverkit.integrations.dataset_map);
# ``reward_function`` makes a reward of a metric for TRL's trainers (moverkit.integrations.rewards);
# ``mbr_select`` chooses among candidates by minimum Bayes risk (moverkit.integrations.mbr).
_LAZY = {
    "fit_centering": "._core.centering",
    "release": "._core.encoding",
    "set_memory_budget": "._core.call",
    "temporary_memory_budget": "._core.call",
    "set_cache": "._core.encoding",
    "MoverkitWarning": "._core.base",
    "compare": ".comparison",
    "map_scores": ".integrations.dataset_map",
    "reward_function": ".integrations.rewards",
    "mbr_select": ".integrations.mbr",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METRICS",
    "MoverkitWarning",
    "__version__",
    "compare",
    "fit_centering",
    "load",
    "map_scores",
    "mbr_select",
    "means",
    "module_path",
    "release",
    "reward_function",
    "set_cache",
    "set_memory_budget",
    "temporary_memory_budget",
]
