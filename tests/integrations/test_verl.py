"""moverkit.verl (issue 62): ``compute_score`` for verl's ``BatchRewardManager``. One reward per
response, the reward function's, its reward made once per process and settings.

verl itself does not install beside the test extra: verl 0.9.1 caps transformers below 5.11 and
huggingface-hub below 2 (the test extra runs transformers 5.24 and huggingface-hub 2), and pins
packaging 25 (twine 7 needs 26.1) and, through hydra-core, antlr4-python3-runtime 4.9.3 (lighteval's
latex2sympy2-extended needs 4.13.2). So the run of verl's own manager on a ``DataProto`` is skipped
where verl does not import; ``moverkit bench serve --verl-python PY`` runs the same script from an
environment of its own (docs/generation.md gives its result)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import moverkit
from moverkit.facts.ties import tied
from moverkit.integrations.verl import compute_score, plain, reward_of

COMPLETIONS = ["the cat sat on the mat", "stocks fell sharply on monday", None]
TRUTHS = ["a cat was sitting on the mat", ["shares dropped on monday", "the market fell"], "he went home"]


@pytest.mark.parametrize("name", ["twmd", "lazy_emd"])
def test_compute_score_is_the_reward_function_on_the_same_pairs(name):
    got = compute_score(["wmt"] * 3, COMPLETIONS, TRUTHS, [{}] * 3, metric=name)
    expected = moverkit.reward_function(name)(COMPLETIONS, references=TRUTHS)
    assert got == expected and len(got) == 3 and all(isinstance(v, float) for v in got)
    assert got[2] == (
        0.0 if name == "twmd" else -1.0
    )  # a non-text response earns the empty score, negated for a distance


def test_the_reward_is_made_once_per_process_and_settings():
    assert reward_of("twmd", None, {"temperature": 0.1}) is reward_of("twmd", None, {"temperature": 0.1})
    assert reward_of("twmd", None, {"temperature": 0.2}) is not reward_of("twmd", None, {"temperature": 0.1})


def test_verl_09s_per_sample_call_gets_the_one_responses_score():
    # verl 0.9's reward loop (naive, remote managers) calls once per response, by these names
    one = compute_score(
        data_source="wmt", solution_str=COMPLETIONS[1], ground_truth=TRUTHS[1], extra_info={}, metric="twmd"
    )
    assert one == moverkit.reward_function("twmd")([COMPLETIONS[1]], references=[TRUTHS[1]])[0]
    assert isinstance(one, float)


def test_what_verl_can_get_wrong_is_named():
    with pytest.raises(TypeError, match="a batch .* or one response"):
        compute_score(["wmt"], ["a"], ["a"], [{}], solution_str="a")
    with pytest.raises(ValueError, match="centering='batch'"):
        compute_score(["wmt"], ["a"], ["a"], [{}], metric="twmd", centering="batch")
    with pytest.raises(ValueError, match="2 completions but 1 rows"):
        compute_score(["wmt"] * 2, ["a", "b"], ["a"], [{}] * 2)


def _verl_09_reward_loop(reward_kwargs: dict, rows: list[tuple]) -> list:
    """What verl 0.9.1's reward loop does with a custom reward function, in its shape (no verl code):
    ``get_custom_reward_fn`` binds ``reward_kwargs`` (an OmegaConf ``DictConfig`` there) with
    ``partial(_call_with_kwargs, raw_fn, reward_kwargs)``, the call's kwargs updated by them; the
    ``naive`` manager's ``run_single`` calls it once per response, by keyword, in the event loop's
    default thread pool (``loop.run_in_executor(None, lambda: compute_score(data_source=...,
    solution_str=..., ground_truth=..., extra_info=...))``), and ``compute_score_batch`` gathers one
    task per response."""
    import asyncio
    from functools import partial

    def call_with_kwargs(raw_fn, extra_kwargs, *args, **kwargs):
        return raw_fn(*args, **{**kwargs, **extra_kwargs})

    function = partial(call_with_kwargs, compute_score, dict(reward_kwargs))

    async def run_single(loop, data_source, response, ground_truth):
        extra_info = {"num_turns": None, "rollout_reward_scores": {}}
        return await loop.run_in_executor(
            None,
            lambda: function(
                data_source=data_source, solution_str=response, ground_truth=ground_truth, extra_info=extra_info
            ),
        )

    async def batch():
        loop = asyncio.get_running_loop()
        return await asyncio.gather(*(run_single(loop, *row) for row in rows))

    return asyncio.run(batch())


def test_verl_09s_reward_loop_gets_each_responses_reward_from_its_threads():
    omegaconf = pytest.importorskip("omegaconf")
    reward_kwargs = omegaconf.OmegaConf.create({"metric": "twmd", "temperature": 0.05})
    rows = [("wmt", c, t) for c, t in zip(COMPLETIONS * 3, TRUTHS * 3)]
    got = _verl_09_reward_loop(reward_kwargs, rows)
    reward = moverkit.reward_function("twmd", temperature=0.05)
    expected = [reward([c], references=[t])[0] for _, c, t in rows]  # one call per response, as verl calls
    assert got == expected and all(isinstance(v, float) for v in got)


def test_a_number_or_none_ground_truth_gets_its_documented_reward(caplog):
    from moverkit.integrations import verl

    rows = [
        ("gsm8k", "42", 42),
        ("gsm8k", "the answer is 0.5", 0.5),
        ("wmt", "a cat", None),
        ("wmt", "a cat", {"x": 1}),
    ]
    verl._WARNED.clear()
    with caplog.at_level("WARNING", logger="moverkit.verl"):
        got = _verl_09_reward_loop({"metric": "twmd"}, rows)
        batch = compute_score(["x"] * 4, [r[1] for r in rows], [r[2] for r in rows], [{}] * 4, metric="twmd")
    reward = moverkit.reward_function("twmd")
    assert got[0] == reward(["42"], references=["42"])[0] and got[1] == reward([rows[1][1]], references=["0.5"])[0]
    assert got[2] == got[3] == 0.0  # scored against an empty reference: the metric's empty score
    assert batch[2:] == [0.0, 0.0] and all(tied(a, b) for a, b in zip(batch, got))
    logged = [r.getMessage() for r in caplog.records if r.name == "moverkit.verl"]
    assert len(logged) == 2 and "a ground truth is None" in logged[0] and "is dict" in logged[1]
    assert compute_score(data_source="x", solution_str="a", ground_truth=None, extra_info={}, metric="lazy_emd") == -1.0


def test_omegaconf_arguments_become_plain():
    omegaconf = pytest.importorskip("omegaconf")
    config = omegaconf.OmegaConf.create({"stop_words": ["the"], "nested": {"a": [1, 2]}})
    assert plain(dict(config)) == {"stop_words": ["the"], "nested": {"a": [1, 2]}}
    assert plain({"x": (1, 2)}) == {"x": [1, 2]}


@pytest.mark.integration
@pytest.mark.slow
def test_verls_batch_reward_manager_gives_the_reward_functions_scores(wmt_pairs, tmp_path):
    pytest.importorskip("verl", reason="verl 0.9 caps transformers < 5.11: it cannot install beside the test extra")
    from benchmarks._shared import child_environment
    from benchmarks.serve import VERL_SCRIPT

    predictions, references = wmt_pairs
    rows = [[f"Translate segment {i}:", p, r] for i, (p, r) in enumerate(zip(predictions[:24], references[:24]))]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", VERL_SCRIPT, "twmd", str(path)], capture_output=True, text=True, env=child_environment()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["rewards"] == out["expected"] and len(out["rewards"]) == 24 and out["cells"] == 24
    if out["loop"] is not None:  # verl 0.9's reward loop: each response scored in a call of its own
        assert all(tied(a, e) for a, e in zip(out["loop"], out["exact"])) and len(out["loop"]) == 24
