"""What every moverkit evaluate module shares: input features and input checking."""

from __future__ import annotations

import abc

import datasets
import evaluate

from .inputs import check_inputs


def text_pair_features() -> list[datasets.Features]:
    """The two input layouts: one reference string per prediction, or a list of them."""
    return [
        datasets.Features(
            {
                "predictions": datasets.Value("string", id="sequence"),
                "references": datasets.Sequence(datasets.Value("string", id="sequence"), id="references"),
            }
        ),
        datasets.Features(
            {
                "predictions": datasets.Value("string", id="sequence"),
                "references": datasets.Value("string", id="sequence"),
            }
        ),
    ]


class TextPairMetric(evaluate.Metric, metaclass=abc.ABCMeta):
    """An ``evaluate.Metric`` that checks its inputs before evaluate stores them.

    evaluate's own feature encoding turns ``None`` into an unnamed ``TypeError`` and silently casts
    numbers to strings; checking first gives errors that name the argument and the item.
    It is abstract so that ``evaluate.load``, which takes the first concrete Metric class in a
    module's namespace, picks the module's own class and not this imported base.
    """

    @abc.abstractmethod
    def _info(self): ...

    @abc.abstractmethod
    def _compute(self, predictions, references): ...

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (checked first) for a later ``compute``."""
        _, grouped = check_inputs(predictions, references)
        if any(not isinstance(ref, str) for ref in references):
            # One layout per batch for evaluate: a lone string among lists becomes a list of one
            # (evaluate would otherwise split it into characters).
            references = grouped
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and its reference(s) (checked first) for a later ``compute``."""
        check_inputs([prediction], [reference])
        return super().add(prediction=prediction, reference=reference, **kwargs)
