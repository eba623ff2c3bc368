"""One number through every door (issue 66 item 4, issue 68): the same six WMT17 pairs through
every front door give the same scores, and the same hashcode where the door shows one, under the
one policy of :mod:`moverkit.integrations.adapter`:

- the whole-corpus doors (the function, the evaluate module, ``moverkit score``, torchmetrics'
  ``compute()``, lighteval's batched path, lm-eval's aggregation) give the function's numbers at
  the metric's own defaults;
- the slice doors (``map_scores`` at map batches of 6 and of 2, Ray's scorer, a reward, verl's
  ``compute_score``, the server's batch, MBR's utility matrix, lighteval's per-sample path) give
  the function's numbers at the batch-independent defaults (``Metric.independent_defaults``),
  whatever the slice, and say so in the hashcode; they refuse a batch-dependent setting, given or
  from a settings file, with one message, before any model loads.

moverscore is the metric whose default depends on the call (IDF fitted over the call's texts):
before issue 68, ``map_scores`` at map batches of 2 and 6 moved its scores by 0.0129 and lm-eval's
aggregation gave other numbers than the evaluate module. twmd's defaults depend on no batch.
Scores equal to the bit where the door runs the function's own call (the same pairs and encoder
batches), else within moverkit's tie tolerance (a text's vectors move with its batch's shapes at
rounding level); the CLI writes 6 decimals.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass

import numpy as np
import pytest
import torch

import moverkit
from moverkit.facts.specs import SPECS
from moverkit.integrations import adapter
from moverkit.integrations.registry import REGISTRY

METRICS = ("moverscore", "twmd")
TOLERANCE = 1e-6
"""Where a door's encoder batches differ from the function's call (moverkit.facts.ties' tolerance)."""


@dataclass(frozen=True)
class Seen:
    """What a door gives for the pairs: per-pair scores (or only their mean, lm-eval's) and its
    hashcode where it shows one."""

    scores: list[float] | None = None
    mean: float | None = None
    hashcode: str | None = None


# ---------------------------------------------------------------------------------------------
# The doors, each called as its users call it


def function_door(name, predictions, references):
    result = REGISTRY[name].function(predictions, references)
    return Seen(result[SPECS[name].main], hashcode=result["hashcode"])


def evaluate_door(name, predictions, references):
    result = moverkit.load(name).compute(predictions=predictions, references=references)
    return Seen(result[SPECS[name].main], hashcode=result["hashcode"])


def cli_door(name, predictions, references):
    from moverkit.cli import main

    folder = tempfile.mkdtemp(prefix="door")
    try:
        paths = {key: f"{folder}/{key}.txt" for key in ("hyp", "ref")}
        for key, texts in (("hyp", predictions), ("ref", references)):
            with open(paths[key], "w", encoding="utf-8") as file:
                file.write("\n".join(texts) + "\n")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            argv = ["score", "--metric", name, "--predictions", paths["hyp"], "--references", paths["ref"]]
            assert main([*argv, "--out", f"{folder}/out.jsonl"]) == 0
        with open(f"{folder}/out.jsonl", encoding="utf-8") as file:
            scores = [json.loads(line)[SPECS[name].main] for line in file]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    (hashcode,) = [line.split("\t", 1)[1] for line in printed.getvalue().splitlines() if line.startswith("hashcode\t")]
    return Seen(scores, hashcode=hashcode)


def torchmetrics_door(name, predictions, references):
    from moverkit.integrations import torchmetrics

    metric = getattr(torchmetrics, REGISTRY[name].class_name)()
    metric.update(predictions, references)
    return Seen(metric.compute()[SPECS[name].main].tolist(), hashcode=metric.hashcode)


def _lighteval_objects(predictions, references):
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    docs = [Doc(query=f"q{i}", choices=[r], gold_index=0, task_name="t", id=str(i)) for i, r in enumerate(references)]
    return docs, [ModelResponse(text=[p]) for p in predictions]


def lighteval_door(name, predictions, references):
    pytest.importorskip("lighteval")
    from moverkit.integrations import lighteval

    docs, responses = _lighteval_objects(predictions, references)
    metric = getattr(lighteval, name)  # the module's metric of the main output, as a tasks file imports it
    return Seen(metric.compute_sample(docs=docs, responses=responses)[metric.metric_name])


def lm_eval_door(name, predictions, references):
    pytest.importorskip("lm_eval")
    from lm_eval.api.registry import get_aggregation

    from moverkit.integrations import lm_eval as moverkit_lm_eval

    items = [getattr(moverkit_lm_eval, name)(references=[r], predictions=[p]) for p, r in zip(predictions, references)]
    return Seen(mean=get_aggregation(name)(items))


def map_door(batch_size):
    def door(name, predictions, references):
        datasets = pytest.importorskip("datasets")
        score = moverkit.map_scores(name, "hyp", "ref")
        dataset = datasets.Dataset.from_dict({"hyp": predictions, "ref": references})
        mapped = dataset.map(score, batched=True, batch_size=batch_size, load_from_cache_file=False)
        return Seen(list(mapped[SPECS[name].main]), hashcode=score.hashcode)

    return door


def ray_door(name, predictions, references):
    from moverkit.integrations.ray import RayScorer

    scorer = RayScorer(name, "hyp", "ref")
    out = scorer({"hyp": np.asarray(predictions), "ref": np.asarray(references)})  # a batch as map_batches hands it
    return Seen(out[SPECS[name].main].tolist(), hashcode=scorer.hashcode)


def reward_door(name, predictions, references):
    return Seen(moverkit.reward_function(name)(predictions, references=references))


def verl_door(name, predictions, references):
    from moverkit.integrations.verl import compute_score

    n = len(predictions)
    return Seen(compute_score(["wmt"] * n, predictions, references, [{}] * n, metric=name))


def serve_door(name, predictions, references):
    """The server's scoring core, a batch of ``/score`` rows as ``@serve.batch`` hands it, on the
    replica's class without starting Ray Serve."""
    serve = pytest.importorskip("moverkit.integrations.serve")
    from moverkit.integrations import serve_requests

    options = {"limits": asdict(serve.Limits()), "batching": asdict(serve.Batching()), "end_markers": []}
    replica = serve.MetricServer.func_or_class(name, None, {}, options)
    records = replica.score_batch([serve_requests.Row(p, [r]) for p, r in zip(predictions, references)])
    return Seen([record[SPECS[name].main] for record in records], hashcode=records[0]["hashcode"])


def mbr_door(name, predictions, references):
    """MBR's utility matrix: each prediction the one candidate of its source, its reference the one
    pseudo-reference, so the matrix of a source is the pair's utility."""
    chosen = moverkit.mbr_select(
        [[p] for p in predictions], metric=name, pseudo_references=[[r] for r in references], return_matrix=True
    )
    return Seen([matrix[0][0] for matrix in chosen["matrix"]], hashcode=chosen["hashcode"])


def lighteval_sample_door(name, predictions, references):
    pytest.importorskip("lighteval")
    from moverkit.integrations import lighteval

    metric = getattr(lighteval, name)
    docs, responses = _lighteval_objects(predictions, references)
    return Seen([metric.compute_sample(doc=d, model_response=r)[metric.metric_name] for d, r in zip(docs, responses)])


WHOLE_CORPUS = {
    "function": (function_door, True),
    "evaluate module": (evaluate_door, True),
    "moverkit score": (cli_door, False),  # 6 decimals
    "torchmetrics": (torchmetrics_door, True),
    "lighteval (a task)": (lighteval_door, True),
    "lm-eval aggregation": (lm_eval_door, True),
}
"""The whole-corpus doors, and whether they run the function's own call (bitwise)."""

SLICES = {
    "map_scores, map batches of 6": (map_door(6), True),
    "map_scores, map batches of 2": (map_door(2), False),
    "Ray scorer": (ray_door, True),
    "reward": (reward_door, True),
    "verl compute_score": (verl_door, True),
    "serve batch": (serve_door, True),
    "MBR utility": (mbr_door, True),
    "lighteval (one sample)": (lighteval_sample_door, False),
}
"""The slice doors, and whether they run the function's own call on the six pairs (bitwise)."""


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = wmt_pairs
    return list(predictions[:6]), list(references[:6])


@pytest.fixture(scope="module")
def expected(pairs):
    """The function's result at each metric's own defaults (``whole``) and at its
    batch-independent ones, as a slice door calls it (``slice``)."""
    results = {}
    for name in METRICS:
        function = REGISTRY[name].function
        independent = adapter.call_arguments(REGISTRY[name].independent_defaults)
        results[name] = {"whole": function(*pairs), "slice": function(*pairs, **independent)}
    return results


def _check(seen: Seen, result: dict, name: str, exact: bool):
    wanted = result[SPECS[name].main]
    if seen.mean is not None:
        assert seen.mean == math.fsum(wanted) / len(wanted)
    else:
        assert len(seen.scores) == len(wanted)
        np.testing.assert_allclose(seen.scores, wanted, rtol=0, atol=TOLERANCE)
        if exact:
            assert seen.scores == wanted
    if seen.hashcode is not None:
        assert seen.hashcode == result["hashcode"]


@pytest.mark.slow
@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("door", list(WHOLE_CORPUS))
def test_a_whole_corpus_door_gives_the_function_at_the_metrics_defaults(door, name, pairs, expected):
    call, exact = WHOLE_CORPUS[door]
    _check(call(name, *pairs), expected[name]["whole"], name, exact)


@pytest.mark.slow
@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("door", list(SLICES))
def test_a_slice_door_gives_the_function_at_the_batch_independent_defaults(door, name, pairs, expected):
    call, exact = SLICES[door]
    _check(call(name, *pairs), expected[name]["slice"], name, exact)


@pytest.mark.slow
def test_the_hashcode_says_which_defaults_applied(expected):
    """moverscore's default fits IDF over the call: the whole-corpus doors' hashcode says ``idf``,
    the slice doors' ``no-idf``; the two differ in the scores too."""
    whole, slices = expected["moverscore"]["whole"], expected["moverscore"]["slice"]
    assert "_L6_idf_" in whole["hashcode"] and "_L6_no-idf_" in slices["hashcode"]
    assert max(abs(a - b) for a, b in zip(whole["moverscore"], slices["moverscore"])) > 1e-3
    assert expected["twmd"]["whole"]["hashcode"] == expected["twmd"]["slice"]["hashcode"]


@pytest.mark.integration
@pytest.mark.slow
def test_ray_data_slices_score_as_one_call(pairs, expected):
    """moverscore's default through a Ray Data pipeline of batches of 2: the slice doors' numbers."""
    ray = pytest.importorskip("ray")
    from moverkit.integrations.ray import score_dataset

    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        rows = [{"id": i, "hyp": p, "ref": r} for i, (p, r) in enumerate(zip(*pairs))]
        scored = score_dataset(
            ray.data.from_items(rows, override_num_blocks=3), "moverscore", "hyp", "ref", batch_size=2
        )
        out = sorted(scored.take_all(), key=lambda row: row["id"])
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    wanted = expected["moverscore"]["slice"]["moverscore"]
    np.testing.assert_allclose([row["moverscore"] for row in out], wanted, rtol=0, atol=TOLERANCE)


# ---------------------------------------------------------------------------------------------
# One refusal, before any model loads


def _one_sample(name, **arguments):
    pytest.importorskip("lighteval")
    from moverkit.integrations import lighteval

    docs, responses = _lighteval_objects(["a"], ["a"])
    return lighteval.metric(name, **arguments).compute_sample(doc=docs[0], model_response=responses[0])


def _application(name, **arguments):
    serve = pytest.importorskip("moverkit.integrations.serve")
    return serve.application(name, **arguments)


def _request(name, **arguments):
    """A server's request carrying its own (metric's) arguments, as ``/score`` checks them."""
    serve = pytest.importorskip("moverkit.integrations.serve")
    own = {key: value for key, value in arguments.items() if key != "settings"}
    server = {key: value for key, value in arguments.items() if key == "settings"}
    return serve.request_reward(name, None, json.dumps(server), json.dumps(own))


def _ray(name, **arguments):
    from moverkit.integrations.ray import RayScorer

    return RayScorer(name, **arguments)


def _verl(name, **arguments):
    from moverkit.integrations.verl import compute_score

    return compute_score(["wmt"], ["a"], ["a"], [{}], metric=name, **arguments)


REFUSING = {
    "map_scores": lambda name, **a: moverkit.map_scores(name, **a),
    "Ray scorer": _ray,
    "reward": lambda name, **a: moverkit.reward_function(name, **a),
    "verl compute_score": _verl,
    "serve application": _application,
    "MBR": lambda name, **a: moverkit.mbr_select([["a", "b"]], metric=name, **a),
    "lighteval (one sample)": _one_sample,
}
"""Every slice door, called with a metric's arguments as its users pass them."""


def _settings(folder, name: str, arguments: dict) -> str:
    path = folder / f"{name}.json"
    record = {"format": "moverkit-settings", "version": 1, "metric": name, "arguments": arguments, "tuning": {}}
    path.write_text(json.dumps(record), encoding="utf-8")
    return str(path)


DEPENDENT = {
    "centering='batch'": ("twmd", {"centering": "batch"}),
    "idf=True": ("moverscore", {"idf": True}),
}


@pytest.mark.parametrize("setting", list(DEPENDENT))
@pytest.mark.parametrize("given", ["given", "from a settings file"])
def test_every_slice_door_refuses_a_batch_dependent_setting_with_one_message(setting, given, tmp_path):
    from moverkit._core.encoding import models

    name, arguments = DEPENDENT[setting]
    message = adapter.refusal(name, REGISTRY[name].batch_dependence(arguments))
    assert setting in message and "slice" in message
    if given != "given":
        arguments = {"settings": _settings(tmp_path, name, arguments)}
    moverkit.release()
    doors = dict(REFUSING)
    if "centering" not in setting or given != "given":  # a request may set the metric's own arguments only
        doors["serve request"] = _request
    for door, call in doors.items():
        with pytest.raises(ValueError) as refused:
            call(name, **arguments)
        assert str(refused.value) == message, door
    assert not models._MODELS, "a slice door loaded a model before it refused"


def test_a_slice_door_takes_an_idf_table_and_a_batch_independent_settings_file(tmp_path):
    """What is not refused: an IDF table (moverscore then scores with it), and a settings file that
    sets IDF off, to which the door adds nothing (an argument given beside a file must agree)."""
    table = {"cat": 2.0}
    assert moverkit.reward_function("moverscore", idf=table).arguments == {"idf": table}
    path = _settings(tmp_path, "moverscore", {"idf": False, "n_gram": 2})
    assert moverkit.map_scores("moverscore", settings=path).kwargs == {"settings": path}
    assert moverkit.reward_function("moverscore").arguments == {"idf": False}


# ---------------------------------------------------------------------------------------------
# The random states


def _states():
    return random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()


@pytest.mark.slow
@pytest.mark.parametrize("door", [*WHOLE_CORPUS, *SLICES])
def test_no_door_moves_the_random_states(door, pairs, expected):
    """A door's call that loads its encoder (after ``moverkit.release()``) leaves Python's, numpy's
    and torch's random states as they were: a seeded training loop draws the same numbers with or
    without a metric. The pairs are taken in another order than above, so no door's kept result
    answers without a call."""
    call, _ = {**WHOLE_CORPUS, **SLICES}[door]
    predictions, references = (side[::-1] for side in pairs)
    for name in METRICS:
        moverkit.release()
        random.seed(1), np.random.seed(1), torch.manual_seed(1)
        before = _states()
        call(name, predictions, references)
        after = _states()
        assert after[0] == before[0], (door, name, "random")
        assert (after[1] == before[1]).all(), (door, name, "numpy")
        assert torch.equal(after[2], before[2]), (door, name, "torch")


# ---------------------------------------------------------------------------------------------
# What the doors share instead of writing it again (issue 68)


def test_each_output_is_labelled_and_read_once_for_every_door():
    assert adapter.labelled_outputs("centered_bertscore") == [
        ("centered_bertscore_precision", "precision"),
        ("centered_bertscore_recall", "recall"),
        ("centered_bertscore", "f1"),
    ]
    assert adapter.labelled_outputs("twmd") == [("twmd", None)]  # one score, whatever its key (its variant)


def test_the_outputs_of_one_metric_share_the_last_call(monkeypatch):
    calls = []
    monkeypatch.setattr(adapter, "score", lambda metric, p, r, a: calls.append((p, r, a)) or {"hashcode": len(calls)})
    last = adapter.LastCall("twmd")
    assert last(["a"], ["b"], {}) is last(["a"], ["b"], {})  # precision, recall, F1 of one task: one call
    last(["a"], ["c"], {})
    last(["a"], ["c"], {"temperature": 0.1})
    assert len(calls) == 3


def test_what_a_door_builds_is_kept_and_bounded(monkeypatch):
    monkeypatch.setattr(adapter, "_KEPT", {})
    built = []

    def build(n):
        return lambda: built.append(n) or object()

    first = adapter.kept(("test", 0), build(0))
    assert adapter.kept(("test", 0), build(0)) is first and built == [0]
    with pytest.raises(ZeroDivisionError):
        adapter.kept(("test", "bad"), lambda: 1 / 0)  # a build that raises keeps nothing
    for n in range(1, adapter.KEPT + 1):
        adapter.kept(("test", n), build(n))
    assert len(adapter._KEPT) == adapter.KEPT and ("test", 0) not in adapter._KEPT  # the least recently used went
    assert adapter.kept(("test", 0), build(0)) is not first


def test_records_go_back_to_one_result():
    from moverkit.integrations.rows import records_result, result_records

    result = {"precision": [0.1, 0.2], "f1": [0.3, 0.4], "hashcode": "h"}
    assert records_result(result_records(result)) == result
