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
    from ._core.centering import fit_centering
    from ._core.registry import release

__version__ = "0.1.0"

_HERE = Path(__file__).resolve().parent

METRICS = tuple(sorted(p.parent.name for p in _HERE.glob("*/*.py") if p.stem == p.parent.name))
"""Names of the bundled metric modules: every folder ``<name>/`` holding ``<name>.py``."""


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


def map_scores(metric, predictions: str = "prediction", references: str = "reference", **compute_kwargs):
    """A function for ``datasets.Dataset.map(..., batched=True)`` that adds the metric's
    per-example scores as columns (``hashcode``, one string per call, is kept on the function as
    ``.hashcode`` instead: ``map`` needs one value per row)::

        score = moverkit.map_scores(metric, "hyp", "ref", centering="corpus", centering_stats=stats)
        ds = ds.map(score, batched=True, batch_size=256)

    Each map batch is one ``compute`` call, so ``centering="batch"`` would take the mean of each
    map batch; use ``"corpus"`` (a statistic fitted once) for scores that do not depend on batching.
    """

    def score(batch):
        result = metric.compute(predictions=batch[predictions], references=batch[references], **compute_kwargs)
        score.hashcode = result["hashcode"]
        return {key: value for key, value in result.items() if isinstance(value, list)}

    score.hashcode = None
    return score


# The functions themselves (their signatures and docs), imported on first use so that
# ``import moverkit`` stays light (no torch, no transformers): ``fit_centering`` fits the ``corpus``
# centering statistic of token or sentence vectors; ``release`` frees every loaded model.
_LAZY = {"fit_centering": "._core.centering", "release": "._core.registry"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["METRICS", "__version__", "fit_centering", "load", "map_scores", "module_path", "release"]
