"""A metric as verl's reward: :func:`compute_score`, a ``custom_reward_function`` for verl 0.9's
reward loop (one response per call) and for the batch manager of verl up to 0.8 (a batch per call).

**verl 0.9** scores through its reward loop (``verl/experimental/reward_loop/``), whose managers are
registered by name: ``naive`` (the default), ``dapo``, ``remote``, ``gdpo`` and ``limited``; ``batch``
is not one of them (``reward_model.reward_manager: batch`` raises ``Unknown reward manager: batch``).
Each calls the custom function once per response, in a worker thread, as
``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **reward_kwargs)``
(``verl/experimental/reward_loop/reward_manager/naive.py``; ``reward_kwargs`` are bound by
``get_custom_reward_fn`` in ``verl/trainer/ppo/reward.py``, and win over the call's). In its
configuration::

    reward:
      reward_manager:
        name: naive                   # verl 0.9's default; dapo and limited call the same way
      custom_reward_function:
        path: pkg://moverkit.verl     # a module by name (verl >= 0.7)
        name: compute_score
        reward_kwargs:
          metric: twmd                # any moverkit metric (default: centered_bertscore)
          temperature: 0.1            # and any argument of moverkit.functional.twmd

**verl up to 0.8** (``reward_model.reward_manager: batch``, ``custom_reward_function`` at the top
level): its ``BatchRewardManager`` decodes a batch's responses and calls ``compute_score`` once per
batch with ``data_sources``, ``solution_strs``, ``ground_truths`` and ``extra_infos``; it takes one
float per response. :func:`compute_score` takes both calls.

Each response's score is :func:`moverkit.reward_function`'s of the metric and arguments, with the
row's ground truth as its references (one string or a list of strings, the best kept): higher is
better (lazy_emd's distance negated), an empty or non-text response earns the metric's empty score.
A ground truth that is a number (GSM8K-style data sets store ``42``) is scored as its text
(``"42"``); one that is ``None`` or not text (a dict, a NaN) is scored as an empty reference, so the
response earns the metric's empty score (0; -1 for lazy_emd), and a warning is logged once per
process: one malformed row does not stop the step, and its reward says it was not scored.

A batch of responses is a slice of the rollout, so the reward is a slice door
(:mod:`moverkit.integrations.adapter`): moverscore's IDF is off unless a table is given, and
settings under which a score would depend on the batch are refused, with the message every slice
door gives. The reward is made once per process and settings (kept among the last
:data:`~moverkit.integrations.adapter.KEPT` settings a process used), and its encoder loads on the
first call and stays in moverkit's model registry, so each of verl's reward workers loads one encoder
whatever the number of steps. verl 0.9's managers call from several threads at once; the calls of
one process take turns (a lock), so the encoder loads once and a call's random states are its own.
A call per response costs one call of the metric per response: for many responses, post them to the
server of :mod:`moverkit.serve` from a ``compute_score`` of your own, where the loop's concurrent
calls are batched. ``data_source`` and ``extra_info`` are not read: every row is scored by the one
metric (route by data source in a function of your own that calls this one).

verl itself is not needed to import this module. verl 0.9 caps transformers below 5.11 (and
huggingface-hub below 2), so ``moverkit[verl]`` belongs in an environment of its own.
"""

from __future__ import annotations

import json
import logging
import math
import threading

from moverkit.integrations import adapter
from moverkit.integrations.rewards import MetricReward, reward_function

logger = logging.getLogger("moverkit.verl")
"""Named by the path verl's configurations give (``pkg://moverkit.verl``)."""
_TURN = threading.Lock()
"""The calls of this process take turns (verl 0.9's managers call from a thread pool)."""


def compute_score(
    data_sources=None,
    solution_strs=None,
    ground_truths=None,
    extra_infos=None,
    *,
    metric: str = "centered_bertscore",
    output: str | None = None,
    **metric_arguments,
) -> list[float] | float:
    """One float per response of ``solution_strs``: ``metric``'s reward of it against its row of
    ``ground_truths`` (the module doc). ``output`` and ``metric_arguments`` are those of
    :func:`moverkit.reward_function`. Called as verl's per-sample managers call it
    (``solution_str=``, ``ground_truth=``, with ``data_source`` and ``extra_info``), the one
    response's float."""
    one = {key: metric_arguments.pop(key) for key in PER_SAMPLE if key in metric_arguments}
    if one:
        if solution_strs is not None or "solution_str" not in one or "ground_truth" not in one:
            raise TypeError(
                "moverkit.verl.compute_score takes a batch (solution_strs, ground_truths) or one response "
                f"(solution_str, ground_truth), not {', '.join(sorted(one))} beside it"
            )
        solution_strs, ground_truths = [one["solution_str"]], [one["ground_truth"]]
    if solution_strs is None or ground_truths is None:
        raise TypeError("moverkit.verl.compute_score needs solution_strs and ground_truths")
    truths = [truth_text(truth, i) for i, truth in enumerate(ground_truths)]
    with _TURN:
        reward = reward_of(metric, output, plain(metric_arguments))
        scores = reward(list(solution_strs), ground_truths=truths)
    return scores[0] if one else scores


def truth_text(value, row: int = 0):
    """A row's ground truth as references: text, or a list of texts, as it is; a number as its text
    (``42`` is ``"42"``); ``None`` or anything else not text as an empty reference (the metric's
    empty score), logged once per process."""
    value = plain(value.tolist() if hasattr(value, "tolist") and not isinstance(value, str) else value)
    if isinstance(value, list):
        return [truth_text(item, row) for item in value] or ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    kind = "None" if value is None else type(value).__name__
    if kind not in _WARNED:
        _WARNED.add(kind)
        logger.warning(
            "moverkit.verl: a ground truth is %s (row %d of a call), not text: its response is scored against "
            "an empty reference and earns the metric's empty score; later ones are not logged",
            kind,
            row,
        )
    return ""


_WARNED: set[str] = set()


PER_SAMPLE = (
    "data_source",
    "solution_str",
    "ground_truth",
    "extra_info",
    "reward_router_address",
    "reward_model_tokenizer",
)
"""What verl's per-sample managers pass (verl 0.9's reward loop); the last two only where a reward
model is served beside, and are not read."""


def reward_of(metric: str, output: str | None, arguments: dict) -> MetricReward:
    """The reward of these settings, made on first use in this process and kept
    (:func:`moverkit.integrations.adapter.kept`): one encoder per process and model."""
    key = ("moverkit.verl", metric, output, json.dumps(arguments, sort_keys=True, default=repr))
    return adapter.kept(
        key, lambda: reward_function(metric, reference_column="ground_truths", output=output, **arguments)
    )


def plain(value):
    """``value`` with OmegaConf's containers (verl's configuration hands ``reward_kwargs`` over as
    one) made plain dicts and lists, recursively."""
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


__all__ = ["compute_score"]
