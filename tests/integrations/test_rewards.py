"""moverkit.reward_function (issue 53): a metric as a reward for TRL's trainers. Each reward is the
metric's function on the same pairs (negated for lazy_emd), takes plain and conversational
completions, earns a defined score for hostile completions, leaves the random states and
autograd's mode as they were, and runs in TRL's GRPOTrainer."""

from __future__ import annotations

import pickle
import random
import warnings

import numpy as np
import pytest
import torch

import moverkit
from moverkit import functional
from moverkit.facts.specs import SPECS

COMPLETIONS = ["the cat sat on the mat", "stocks fell sharply on monday", "he went home"]
REFERENCES = ["a cat was sitting on the mat", ["shares dropped on monday", "the market fell"], "he went home early"]


def quiet(reward, *args, **kwargs):
    """The reward's call with moverkit's warnings ignored (an empty or truncated completion warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", moverkit.MoverkitWarning)
        return reward(*args, **kwargs)


@pytest.mark.parametrize("name", moverkit.METRICS)
def test_the_reward_is_the_metric_on_the_same_pairs(name):
    reward = moverkit.reward_function(name)
    expected = getattr(functional, name)(COMPLETIONS, REFERENCES, **reward.call_arguments())[SPECS[name].main]
    sign = 1.0 if SPECS[name].higher_is_better else -1.0
    got = reward(completions=COMPLETIONS, prompts=["p"] * 3, references=REFERENCES, trainer_state=None)
    assert got == [sign * v for v in expected]
    assert all(isinstance(v, float) for v in got)
    assert reward.__name__ == f"moverkit_{name}"


def test_rescaled_rewards_are_higher_is_better_for_the_distance_too():
    reward = moverkit.reward_function("lazy_emd", rescale_with_baseline=True)
    distances = functional.lazy_emd(COMPLETIONS, REFERENCES, rescale_with_baseline=True)["lazy_emd"]
    assert reward(COMPLETIONS, references=REFERENCES) == [1.0 - d for d in distances]
    copy = reward(["a cat was sitting on the mat"], references=["a cat was sitting on the mat"])[0]
    assert copy > 0.99  # a copy of the reference earns about 1, unrelated text about 0


def test_an_output_other_than_the_main_one_is_named():
    reward = moverkit.reward_function("centered_bertscore", output="recall", reference_column="solution")
    assert reward.__name__ == "moverkit_centered_bertscore_recall"
    assert reward(COMPLETIONS, solution=REFERENCES) == functional.centered_bertscore(COMPLETIONS, REFERENCES)["recall"]
    with pytest.raises(ValueError, match="no output 'f2'"):
        moverkit.reward_function("centered_bertscore", output="f2")
    trwmd = moverkit.reward_function("twmd", variant="trwmd")  # the one score, under its variant's key
    assert (
        trwmd(COMPLETIONS, references=REFERENCES) == functional.twmd(COMPLETIONS, REFERENCES, variant="trwmd")["trwmd"]
    )


def test_conversational_completions_take_the_last_assistant_message():
    reward = moverkit.reward_function("twmd")
    conversations = [
        [{"role": "assistant", "content": "the cat sat on the mat"}],
        [
            {"role": "assistant", "content": "draft"},
            {"role": "user", "content": "again"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "stocks fell "}, {"type": "text", "text": "sharply on monday"}],
            },
        ],
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": "he went home"}],
    ]
    assert reward(conversations, references=REFERENCES) == reward(COMPLETIONS, references=REFERENCES)


@pytest.mark.slow
@pytest.mark.parametrize("name", moverkit.METRICS)
def test_hostile_completions_earn_a_defined_finite_score(name):
    reward = moverkit.reward_function(name)
    empty = -SPECS[name].empty if name == "lazy_emd" else SPECS[name].empty
    hostile = [
        "",
        "   \n\t",
        None,
        12,
        [{"role": "user", "content": "no assistant"}],
        [{"role": "assistant", "content": None}],
        "broken \ud800 surrogate",
        "word " * 2000,  # 10,000 characters: truncated at the model's limit
        "🐈 sat 在垫子上 на коврике 🙂",
        "🙂🙂🙂",
    ]
    got = quiet(reward, hostile, references=["a cat sat on the mat"] * len(hostile))
    assert len(got) == len(hostile) and all(isinstance(v, float) and np.isfinite(v) for v in got)
    assert got[:7] == [empty] * 7  # empty, whitespace, None, a number, no assistant content, a lone surrogate


def test_one_and_a_thousand_completions_and_batches_that_are_not_lists(tiny_model_path):
    reward = moverkit.reward_function("twmd", model_type=tiny_model_path, centering="none")
    assert reward(["a cat"], references=["a cat"]) == [pytest.approx(1.0)]
    assert reward([], references=[]) == []
    thousand = quiet(reward, [f"completion {i} " * (i % 8) for i in range(1000)], references=["a cat"] * 1000)
    assert len(thousand) == 1000 and all(isinstance(v, float) and np.isfinite(v) for v in thousand)
    odd = quiet(reward, [b"bytes", {"content": "a dict"}, ["a", "list"], float("nan")], references=["a cat"] * 4)
    assert odd == [0.0] * 4  # not text: the empty score
    references = ["word " * 2000, "🐈 sat 在垫子上 на коврике 🙂", "🙂🙂🙂", ""]  # hostile references
    assert np.isfinite(quiet(reward, ["a cat sat"] * 4, references=references)).all()
    for batch in (None, "one string", {"completion": "a"}):
        with pytest.raises(TypeError, match="completions must be a list with one completion per item"):
            reward(batch, references=["a"])


def test_a_missing_column_is_named_at_the_first_call():
    reward = moverkit.reward_function("twmd", reference_column="solution")
    with pytest.raises(KeyError, match="no column 'solution'.*'answer'") as caught:
        reward(["a"], prompts=["p"], answer=["a"], trainer_state=None, log_extra=None, completion_ids=[[1]])
    assert "trainer_state" not in str(caught.value)
    with pytest.raises(ValueError, match="column 'solution' at row 1 is None"):
        reward(["a", "b"], solution=["a", None])
    with pytest.raises(ValueError, match="2 completions but 1 rows"):
        reward(["a", "b"], solution=["a"])


def test_settings_that_depend_on_the_batch_are_refused():
    with pytest.raises(ValueError, match="centering='batch'.*other pairs of its slice"):
        moverkit.reward_function("twmd", centering="batch")
    with pytest.raises(ValueError, match="idf=True"):
        moverkit.reward_function("centered_bertscore", idf=True)
    with pytest.raises(TypeError, match="unknown argument 'temprature'"):
        moverkit.reward_function("twmd", temprature=0.1)
    with pytest.raises(TypeError, match="return_alignment"):
        moverkit.reward_function("twmd", return_alignment=True)
    assert moverkit.reward_function("moverscore").arguments == {"idf": False}


@pytest.mark.parametrize("grad", [True, False])
def test_a_call_leaves_the_random_states_and_autograd_as_they_were(grad):
    reward = moverkit.reward_function("sbertscore")
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    states = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    with torch.set_grad_enabled(grad):
        reward(COMPLETIONS, references=REFERENCES)
        assert torch.is_grad_enabled() is grad
    assert random.getstate() == states[0]
    assert (np.random.get_state()[1] == states[1]).all()
    assert torch.equal(torch.get_rng_state(), states[2])


def test_the_reward_pickles_and_runs_on_the_trainers_device():
    reward = pickle.loads(pickle.dumps(moverkit.reward_function("twmd", reference_column="ref", temperature=0.1)))
    assert (reward.__name__, reward.arguments) == ("moverkit_twmd", {"temperature": 0.1})
    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert reward.call_arguments()["device"] == expected
    assert moverkit.reward_function("twmd", device="cpu").call_arguments()["device"] == "cpu"
    # On a CPU a reward's encoder batches 16 texts (less padding), unless told otherwise.
    assert moverkit.reward_function("twmd", device="cpu").call_arguments()["batch_size"] == 16
    assert moverkit.reward_function("twmd", device="cpu", batch_size=64).call_arguments()["batch_size"] == 64


@pytest.mark.integration
def test_grpo_trainer_runs_two_steps_with_a_moverkit_reward(tmp_path, tiny_causal_lm):
    trl = pytest.importorskip("trl")
    from datasets import Dataset

    model, tokenizer = tiny_causal_lm(64)
    dataset = Dataset.from_dict(
        {
            "prompt": ["translate: die katze", "translate: der hund"] * 2,
            "reference": [["the cat"], ["the dog", "a dog"]] * 2,
        }
    )
    reward = moverkit.reward_function("twmd", reference_column="reference")
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", moverkit.MoverkitWarning)  # a random policy writes empty completions
        trainer.train()
    logged = [h["rewards/moverkit_twmd/mean"] for h in trainer.state.log_history if "rewards/moverkit_twmd/mean" in h]
    assert len(logged) == 2 and all(np.isfinite(logged))
