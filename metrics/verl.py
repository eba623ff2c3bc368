"""A metric as verl's reward: :func:`compute_score`, for verl's ``BatchRewardManager`` (and, one
response at a time, for the per-sample managers of verl 0.9's reward loop).

verl's ``BatchRewardManager`` (``reward_model.reward_manager=batch``, verl up to 0.8; verl 0.9 still
ships it as ``verl.workers.reward_manager.BatchRewardManager``) decodes a batch's responses and
calls its ``compute_score`` once per batch with keyword arguments: ``data_sources``,
``solution_strs``, ``ground_truths`` (each row's ``reward_model.ground_truth``), ``extra_infos``,
and the reward's own arguments (``custom_reward_function.reward_kwargs``, which verl's
``get_custom_reward_fn`` binds, and ``reward_model.reward_kwargs``, which the manager passes on);
it takes one float per response. In a verl configuration::

    reward_model:
      reward_manager: batch
    custom_reward_function:           # verl 0.9: reward.custom_reward_function
      path: pkg://moverkit.verl       # verl >= 0.7; else the file: python -c "import moverkit.verl as m; print(m.__file__)"
      name: compute_score
      reward_kwargs:
        metric: twmd                  # any moverkit metric (default: centered_bertscore)
        temperature: 0.1              # and any argument of moverkit.functional.twmd

Each response's score is :func:`moverkit.reward_function`'s of the metric and arguments, with the
row's ground truth as its references (one string or a list of strings, the best kept): higher is
better (lazy_emd's distance negated), an empty or non-text response earns the metric's empty score,
settings under which a score would depend on the batch are refused. The reward is made once per
process and settings, and its encoder loads on the first call and stays in moverkit's model registry,
so each of verl's reward workers loads one encoder whatever the number of steps.
``data_sources`` and ``extra_infos`` are not read: every row is scored by the one metric (route by
data source in a function of your own that calls this one).

verl 0.9's trainer scores through its reward loop, whose managers (``naive``, ``remote``, ...) call
``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)`` once per
response; :func:`compute_score` takes that call too and gives the one response's score, the same
number, at the cost of one call of the metric per response (no batching across responses: for
many responses, the batch manager or the server of :mod:`moverkit.serve`).

verl itself is not needed to import this module. verl 0.9 caps transformers below 5.11 (and
huggingface-hub below 2), so ``moverkit[verl]`` belongs in an environment of its own.
"""

from __future__ import annotations

import json

from moverkit.rewards import MetricReward

_REWARDS: dict[str, MetricReward] = {}
"""The rewards this process made, by their settings (JSON): one encoder per process and model."""


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
    reward = reward_of(metric, output, plain(metric_arguments))
    scores = reward(list(solution_strs), ground_truths=list(ground_truths))
    return scores[0] if one else scores


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
    """The reward of these settings, made on first use in this process and kept."""
    from moverkit.rewards import reward_function

    key = json.dumps([metric, output, arguments], sort_keys=True, default=repr)
    if key not in _REWARDS:
        _REWARDS[key] = reward_function(metric, reference_column="ground_truths", output=output, **arguments)
    return _REWARDS[key]


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
