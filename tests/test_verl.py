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
from moverkit.verl import compute_score, plain, reward_of

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
    with pytest.raises(ValueError, match="column 'ground_truths' at row 0 is None"):
        compute_score(["wmt"], ["a"], [None], [{}])
    with pytest.raises(ValueError, match="2 completions but 1 rows"):
        compute_score(["wmt"] * 2, ["a", "b"], ["a"], [{}] * 2)


def test_omegaconf_arguments_become_plain():
    omegaconf = pytest.importorskip("omegaconf")
    config = omegaconf.OmegaConf.create({"stop_words": ["the"], "nested": {"a": [1, 2]}})
    assert plain(dict(config)) == {"stop_words": ["the"], "nested": {"a": [1, 2]}}
    assert plain({"x": (1, 2)}) == {"x": [1, 2]}


@pytest.mark.integration
@pytest.mark.slow
def test_verls_batch_reward_manager_gives_the_reward_functions_scores(wmt_pairs, tmp_path):
    pytest.importorskip("verl", reason="verl 0.9 caps transformers < 5.11: it cannot install beside the test extra")
    from moverkit.bench.serve import VERL_SCRIPT

    predictions, references = wmt_pairs
    rows = [[f"Translate segment {i}:", p, r] for i, (p, r) in enumerate(zip(predictions[:24], references[:24]))]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", VERL_SCRIPT, "twmd", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["rewards"] == out["expected"] and len(out["rewards"]) == 24 and out["cells"] == 24
    if out["loop"] is not None:  # verl 0.9's reward loop: each response scored in a call of its own
        assert all(tied(a, e) for a, e in zip(out["loop"], out["exact"])) and len(out["loop"]) == 24
