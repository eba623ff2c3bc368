"""moverkit.verl in verl's own environment (issue 67): verl 0.9's trainer configuration, composed by
Hydra from verl's ``ppo_trainer.yaml`` with the overrides docs/generation.md gives, is loaded by
verl's own reward loop (``RewardLoopWorker``: ``load_reward_manager``, the registered ``naive``
manager, ``get_custom_reward_fn`` over ``pkg://moverkit.verl``), and the loop's rewards are
:func:`moverkit.reward_function`'s on the responses as verl decodes them.

verl cannot install beside the test extra (its pins: tests/integrations/test_verl.py), so these
tests skip where verl does not import; ``deploy/verl_environment.sh`` makes verl's environment
(``pip install -e ".[verl]"``) and runs them there (its output is in docs/generation.md)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

verl = pytest.importorskip("verl", reason="verl 0.9 cannot install beside the test extra: deploy/verl_environment.sh")


import moverkit  # noqa: E402
from moverkit._core import embedded_model_path  # noqa: E402
from moverkit.facts.ties import tied  # noqa: E402

DOCS = Path(__file__).parents[2] / "docs" / "generation.md"
DOCUMENTED = [  # docs/generation.md, "verl's reward": its overrides line
    "reward.custom_reward_function.path=pkg://moverkit.verl",
    "reward.custom_reward_function.name=compute_score",
    "+reward.custom_reward_function.reward_kwargs.metric=twmd",
]
LEGACY = [  # verl <= 0.8's keys, which verl 0.9's migrate_legacy_reward_impl carries over
    "custom_reward_function.path=pkg://moverkit.verl",
    "custom_reward_function.name=compute_score",
]


def verl_config(overrides: list[str], file: dict | None = None):
    """verl's ``ppo_trainer`` configuration with ``overrides``, as ``python -m verl.trainer.main_ppo``
    composes it, and a configuration ``file``'s values merged over it; the policy is the embedded
    model (its tokenizer decodes the responses)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    folder = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(folder), version_base=None):
        config = compose("ppo_trainer", overrides=[*overrides, f"actor_rollout_ref.model.path={embedded_model_path()}"])
    if file is not None:
        with open_dict(config):
            config = OmegaConf.merge(config, file)
    return config


def documented_file() -> dict:
    """The configuration docs/generation.md gives ("The configuration verl 0.9 loads:"), as YAML."""
    import yaml

    block = DOCS.read_text(encoding="utf-8").split("The configuration verl 0.9 loads:", 1)[1].split("```", 2)[1]
    return yaml.safe_load(block)


def loop_rewards(config, responses: list[str], truths: list) -> tuple[list[float], list[str]]:
    """The rewards verl 0.9's reward loop gives ``responses`` (``RewardLoopWorker.compute_score_batch``,
    one ``compute_score`` call per response from its event loop), laid out as verl's rollout lays
    them out (:func:`benchmarks.serve.verl_rollout`), and the responses as it decoded them."""
    from verl.experimental.reward_loop import RewardLoopWorker

    from benchmarks.serve import verl_decoded, verl_rollout

    worker = RewardLoopWorker(config)
    rows = [[f"Translate segment {i}:", response, truth] for i, (response, truth) in enumerate(zip(responses, truths))]
    data = verl_rollout(worker.input_tokenizer, rows)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    return [out["reward_score"] for out in outputs], verl_decoded(worker.input_tokenizer, data)[1]


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["documented file", "documented overrides", "legacy keys migrated"])
def test_verls_reward_loop_loads_the_documented_config_and_gives_the_reward_functions_rewards(kind, wmt_pairs):
    if kind == "documented file":
        file = documented_file()
        config, metric = verl_config([], file), file["reward"]["custom_reward_function"]["reward_kwargs"]
        arguments = {key: value for key, value in metric.items() if key != "metric"}
        metric = metric["metric"]
    elif kind == "documented overrides":
        config, metric, arguments = verl_config(DOCUMENTED), "twmd", {}
    else:
        from verl.experimental.reward_loop import migrate_legacy_reward_impl

        config = migrate_legacy_reward_impl(verl_config(LEGACY))
        metric, arguments = "centered_bertscore", {}  # compute_score's default metric
    assert config.reward.reward_manager.name == "naive"  # verl 0.9's default manager
    predictions, references = (list(side[:24]) for side in wmt_pairs)
    rewards, decoded = loop_rewards(config, predictions, references)
    expected = moverkit.reward_function(metric, **arguments)(decoded, references=references)
    assert len(rewards) == 24 and all(tied(a, e) for a, e in zip(rewards, expected)), (rewards, expected)


@pytest.mark.integration
def test_a_none_or_number_ground_truth_gets_its_documented_reward_in_verls_loop(caplog):
    config = verl_config(DOCUMENTED)
    with caplog.at_level(logging.WARNING):
        rewards, _ = loop_rewards(config, ["the cat sat on the mat", "42", "forty two"], [None, 42, "the cat sat"])
    assert rewards[0] == 0.0  # an empty reference: twmd's empty score, with a warning; the step goes on
    assert rewards[1] == pytest.approx(moverkit.reward_function("twmd")(["42"], references=["42"])[0])
    assert any("ground truth" in record.getMessage() for record in caplog.records)


@pytest.mark.integration
def test_verl_09_has_no_batch_manager_and_the_documented_file_does_not_name_it():
    config = verl_config([*DOCUMENTED, "reward.reward_manager.name=batch"])
    from verl.experimental.reward_loop import RewardLoopWorker

    with pytest.raises(ValueError, match="Unknown reward manager: batch"):
        RewardLoopWorker(config)
    assert documented_file()["reward"]["reward_manager"]["name"] != "batch"
