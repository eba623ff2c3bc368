r"""A metric as a reward for reinforcement learning: :func:`reward_function`, for TRL's
``GRPOTrainer`` and ``RLOOTrainer`` (``reward_funcs=[reward]``).

TRL calls a reward function once per step with keyword arguments: ``prompts``, ``completions``,
``completion_ids``, every column of the dataset but the prompt (each row repeated once per
generation, so that row ``i`` belongs to completion ``i``), ``trainer_state``, ``log_extra`` and
``log_metric``; it takes one float per completion and logs each function under its ``__name__``
(``rewards/moverkit_twmd/mean``). Under DDP every process calls it on its own completions and TRL
gathers the rewards afterwards, so a reward here scores what it is given and gathers nothing.

The reward of completion :math:`c` against the references :math:`R` of its row (one or several;
the best one kept, as the metric keeps it) is the metric's output, turned so that higher is better:

.. math::

    r(c, R) = s(c, R) \ \text{(a similarity)}, \qquad r(c, R) = -d(c, R) \ \text{(lazy\_emd, a distance)}

and with ``rescale_with_baseline=True`` (the metric's own argument, :math:`b` the mean score of
unrelated sentence pairs, shipped for the embedded model at the default settings)
:math:`(s - b) / (1 - b)` for a similarity and :math:`1 - d / b` for the distance, so that unrelated
text earns about 0 and a copy of the reference 1 (lazy_emd's about 0.999). Each reward's range,
and what an empty completion earns (before rescaling):

- centered_bertscore (F1), twmd, sbertscore (F1): [-1, 1]; an empty completion 0;
- moverscore: [0, 1]; an empty completion 0;
- lazy_emd: [-2M, 0] with :math:`M = N^{\varepsilon / (\varepsilon + \lambda_c + \lambda_r)}` for
  :math:`N` the product of the two texts' token counts (1.23 for two 512-token texts at the "en"
  preset; :func:`moverkit.functional.lazy_emd.score_bound`); an empty completion -1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from moverkit.facts.specs import SPECS
from moverkit.integrations import adapter
from moverkit.integrations.rows import MissingColumn, reference_row

TRAINER_ARGUMENTS = frozenset({"completion_ids", "trainer_state", "log_extra", "log_metric", "environments"})
"""What TRL passes a reward function beside the dataset's columns."""


class MetricReward:
    """``reward(completions, prompts=None, **columns) -> list[float]``, what
    :func:`reward_function` returns: one float per completion, higher is better (the module doc).
    It holds plain values only (the metric's name, the column, the output and the arguments), so it
    pickles, and scores through ``moverkit.functional.<metric>``, whose encoder loads on the first
    call and stays in the process's model registry (``moverkit.release()`` frees it)."""

    def __init__(self, metric: str, reference_column: str, output: str | None, arguments: dict):
        self.metric = metric
        self.reference_column = reference_column
        self.output = output
        self.arguments = arguments
        self.__name__ = f"moverkit_{adapter.output_label(metric, output)}"

    def __call__(self, completions, prompts=None, **columns) -> list[float]:
        if isinstance(completions, (str, bytes, Mapping)) or not isinstance(completions, Iterable):
            raise TypeError(
                f"{self.__name__}: completions must be a list with one completion per item, "
                f"got {type(completions).__name__}"
            )
        texts = [completion_text(c) for c in completions]
        references = self.references(columns, len(texts))
        values = adapter.output_scores(
            adapter.score(self.metric, texts, references, self.call_arguments()), self.output
        )
        if SPECS[self.metric].higher_is_better:
            return [float(v) for v in values]
        rescaled = self.arguments.get("rescale_with_baseline", False)
        return [1.0 - v if rescaled else -v for v in values]

    def references(self, columns: Mapping, n: int) -> list:
        """The references column, one string or list of strings per completion, or an error naming
        the column (a missing column lists those TRL passed) and the row."""
        if self.reference_column not in columns:
            given = sorted(set(columns) - TRAINER_ARGUMENTS)
            raise MissingColumn(
                f"{self.__name__}: the dataset has no column {self.reference_column!r} for the references; "
                f"its columns besides the prompt are {', '.join(map(repr, given)) or 'none'} "
                "(name the column with reward_function(..., reference_column=NAME))"
            )
        rows = list(columns[self.reference_column])
        if len(rows) != n:
            raise ValueError(f"{n} completions but {len(rows)} rows of column {self.reference_column!r}")
        return [reference_row(row, f"column {self.reference_column!r} at row {i}") for i, row in enumerate(rows)]

    def call_arguments(self) -> dict:
        """The metric's arguments as a call takes them, with where it runs filled in
        (:func:`moverkit.integrations.adapter.call_arguments`: the current CUDA device, else the
        CPU with ``batch_size`` :data:`~moverkit.integrations.adapter.CPU_BATCH_SIZE`)."""
        return adapter.call_arguments(self.arguments)

    def __repr__(self) -> str:
        return (
            f"reward_function({self.metric!r}, reference_column={self.reference_column!r}, "
            f"output={self.output!r}, **{self.arguments!r})"
        )


def completion_text(completion) -> str:
    """The text of one completion: a string as it is; a conversational completion (a list of
    messages) the content of its last assistant message, the text parts of a content list joined.
    Anything else (``None``, a number, no assistant message, no content, a string holding a lone
    surrogate, which no tokenizer takes) is the empty string, which earns the metric's empty
    score (the module doc) instead of stopping the training loop."""
    from moverkit._core.base import check_text

    if isinstance(completion, Sequence) and not isinstance(completion, str):
        said = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
        completion = said[-1].get("content") if said else None
        if isinstance(completion, Sequence) and not isinstance(completion, str):
            parts = [p.get("text") for p in completion if isinstance(p, Mapping) and p.get("type") == "text"]
            completion = "".join(p for p in parts if isinstance(p, str))
    if not isinstance(completion, str):
        return ""
    try:
        return check_text(completion, "completion")
    except ValueError:
        return ""


def reward_function(
    metric: str,
    *,
    reference_column: str = "references",
    output: str | None = None,
    **metric_arguments,
) -> MetricReward:
    """A reward function of ``metric`` for TRL's ``GRPOTrainer`` and ``RLOOTrainer``::

        reward = moverkit.reward_function("centered_bertscore", reference_column="reference")
        trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset)

    ``reward(completions, prompts=None, **columns)`` gives one float per completion, higher is
    better (the module doc gives the formula and the range of each metric): the metric's
    ``output`` (default: its main one, F1 for the BERTScore pair), negated for lazy_emd, for each
    completion against its row's ``reference_column`` (one string or a list of strings, the best
    kept). Completions are strings or conversational (the last assistant message's content). An
    empty or whitespace completion earns the metric's empty score (0, or -1 for lazy_emd), and so
    do ``None`` and other non-text items; ``completions`` that are not a list (``None``, one
    string) and a missing column are errors naming them, at the first call.

    ``metric_arguments`` are those of ``moverkit.functional.<metric>`` (``model_type``,
    ``num_layers``, ``dtype="bfloat16"``, ``settings=PATH`` of a tuned settings file,
    ``rescale_with_baseline=True``, ...). ``device`` defaults to the current CUDA device (each
    DDP process's own), else the CPU, where ``batch_size`` defaults to
    :data:`~moverkit.integrations.adapter.CPU_BATCH_SIZE`. A reward step is a slice of the
    training data, so the reward is a slice door (:mod:`moverkit.integrations.adapter`): it
    scores with the batch-independent defaults (moverscore's IDF off unless a table is given) and
    refuses a setting under which a completion's score would depend on the other completions of
    the step (``centering="batch"``, IDF fitted over the call). Each call leaves the random
    states (Python, numpy, torch) and autograd's mode as they were.
    """
    arguments = adapter.slice_arguments(metric, metric_arguments, "reward_function")
    output = adapter.checked_output(metric, output)
    if not isinstance(reference_column, str):
        raise TypeError(f"reference_column must be a column name (a string), got {reference_column!r}")
    return MetricReward(metric, reference_column, output, arguments)


__all__ = ["MetricReward", "reward_function"]
