"""moverkit.lighteval against the real lighteval (0.13): lighteval's own compute_sample on its Doc
and ModelResponse gives the function's numbers, and docs/lighteval_tasks.py loads as a custom-tasks
file whose tasks use these metrics."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from lighteval.metrics import apply_metric
from lighteval.metrics.metrics_sample import SampleLevelComputation
from lighteval.metrics.utils.metric_utils import SampleLevelMetric
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.registry import Registry
from lighteval.tasks.requests import Doc

import moverkit
from moverkit import functional
from moverkit.facts.specs import SPECS
from moverkit.integrations import lighteval as moverkit_lighteval
from moverkit.integrations.adapter import refusal
from moverkit.integrations.registry import REGISTRY

TASKS_FILE = Path(__file__).resolve().parents[2] / "docs" / "lighteval_tasks.py"
PREDICTION = "the cat sat on the mat"
GOLDS = ["a cat was sitting on the mat", "there is a cat on the mat"]


def _outputs(name):
    """The module's metrics of moverkit metric ``name``, by output."""
    spec = SPECS[name]
    if len(spec.outputs) == 1:
        return {name: getattr(moverkit_lighteval, name)}
    return {
        output: getattr(moverkit_lighteval, name if output == spec.main else f"{name}_{output}")
        for output in spec.outputs
    }


def metric_task(name: str, doc: Doc) -> dict:
    """lighteval's batched path on a task of one sample (``doc``, answered with the prediction), by output."""
    return {
        output: metric.compute_sample(docs=[doc], responses=[ModelResponse(text=[PREDICTION])])
        for output, metric in _outputs(name).items()
    }


@pytest.mark.parametrize("name", sorted(SPECS))
def test_compute_sample_gives_the_function_on_lightevals_objects(name):
    spec = SPECS[name]
    doc = Doc(query="Translate: Die Katze sass auf der Matte.", choices=GOLDS, gold_index=[0, 1])
    # a task: the metric's own defaults; one sample: the batch-independent ones (moverscore's IDF off)
    with warnings.catch_warnings():  # moverscore's IDF over a task of one pair: every token's IDF 0
        warnings.filterwarnings("ignore", "1 prediction", moverkit.MoverkitWarning)
        task = getattr(functional, name)([PREDICTION], [GOLDS])
        one_pair_task = metric_task(name, doc)
    expected = getattr(functional, name)([PREDICTION], [GOLDS], **REGISTRY[name].independent_defaults)
    for output, metric in _outputs(name).items():
        assert isinstance(metric, SampleLevelMetric) and metric.batched_compute
        assert isinstance(metric.sample_level_fn, SampleLevelComputation)
        assert metric.higher_is_better is spec.higher_is_better
        assert metric.metric_name == (name if len(spec.outputs) == 1 else f"{name}_{output}")
        # lighteval's per-sample path, and its batched one on a task of one sample
        result = metric.compute_sample(doc=doc, model_response=ModelResponse(text=[PREDICTION]))
        assert result == {metric.metric_name: expected[output][0]}
        assert one_pair_task[output] == {metric.metric_name: [task[output][0]]}
        aggregate = metric.get_corpus_aggregations()
        assert set(aggregate) == set(result) and aggregate[metric.metric_name]([0.25, 0.75]) == 0.5


def test_a_string_response_is_scored_whole_and_an_empty_one_is_named():
    """lighteval's ``final_text`` is one string when ``text`` was given as one: its first character
    is not the prediction (twmd scored 0.0214 against the identical reference)."""
    doc = Doc(query="q", choices=[PREDICTION], gold_index=0, task_name="demo", id="7")
    result = moverkit_lighteval.twmd.compute_sample(doc=doc, model_response=ModelResponse(text=PREDICTION))
    assert result == {"twmd": functional.twmd([PREDICTION], [PREDICTION])["twmd"][0]}
    assert result["twmd"] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match=r"sample 1 \(task 'demo', id '7'\) has an empty response \(final_text \[\]\)"):
        moverkit_lighteval.twmd.compute_sample(
            docs=[doc, doc], responses=[ModelResponse(text=[PREDICTION]), ModelResponse(text=[])]
        )
    with pytest.raises(ValueError, match=r"sample 0 .* has no gold reference"):
        moverkit_lighteval.twmd.compute_sample(
            doc=Doc(query="q", choices=[], gold_index=[]), model_response=ModelResponse(text="a")
        )


@pytest.fixture(scope="module")
def task(wmt_pairs):
    """A task of 24 real samples, one with two golds, and lighteval's objects for it."""
    predictions, references = (list(side[:24]) for side in wmt_pairs)
    references = [[ref] for ref in references]
    references[3].append(references[4][0])
    docs = [
        Doc(query=f"q{i}", choices=refs, gold_index=list(range(len(refs))), task_name="t", id=str(i))
        for i, refs in enumerate(references)
    ]
    responses = [ModelResponse(text=[prediction]) for prediction in predictions]
    return predictions, references, docs, responses


# twmd in the quick loop; the others (2-6 s each) in the full suite.
@pytest.mark.parametrize("name", [n if n == "twmd" else pytest.param(n, marks=pytest.mark.slow) for n in sorted(SPECS)])
def test_the_batched_metrics_equal_the_per_sample_ones(name, task):
    """At settings whose scores do not depend on the other pairs (each metric's batch-independent
    defaults: moverscore's IDF off), a task scored at once gives each sample's own score (within
    1e-6), and the function on the task."""
    predictions, references, docs, responses = task
    independent = REGISTRY[name].independent_defaults
    expected = getattr(functional, name)(predictions, references, **independent)
    made = dict(zip(SPECS[name].outputs, moverkit_lighteval.metrics(name, **independent)))
    for output, metric in made.items():
        batched = metric.compute_sample(docs=docs, responses=responses)[metric.metric_name]
        alone = [metric.compute_sample(doc=d, model_response=r)[metric.metric_name] for d, r in zip(docs, responses)]
        assert np.allclose(batched, alone, atol=1e-6, rtol=0)
        assert np.allclose(batched, expected[output], atol=1e-9, rtol=0)


@pytest.mark.slow
def test_lightevals_apply_metric_runs_the_outputs_of_one_metric_in_one_call(task, monkeypatch):
    """lighteval's own batched path (``apply_metric``) over precision, recall and F1 of
    centered_bertscore beside twmd: every name in every sample's output, one function call each."""
    predictions, references, docs, responses = task
    from moverkit.integrations import adapter

    calls = []
    score = adapter.score
    monkeypatch.setattr(adapter, "score", lambda name, *rest: calls.append(name) or score(name, *rest))
    fresh = moverkit_lighteval.metrics("centered_bertscore", centering="sentence")  # one scorer for the three
    outputs = apply_metric(responses=responses, docs=docs, metrics=[*fresh, moverkit_lighteval.twmd])
    assert sorted(calls) == ["centered_bertscore", "twmd"]
    expected = functional.centered_bertscore(predictions, references, centering="sentence")
    assert len(outputs) == len(docs)
    for i, output in enumerate(outputs):
        assert set(output) == {
            "centered_bertscore_precision",
            "centered_bertscore_recall",
            "centered_bertscore_f1",
            "twmd",
        }
        assert output["centered_bertscore_recall"] == expected["recall"][i]


@pytest.mark.slow
def test_batch_dependent_settings_score_the_task_at_once_and_are_refused_per_sample(task):
    """A task is a whole-corpus call (every setting); one sample is a slice (the slice doors' refusal)."""
    predictions, references, docs, responses = task
    for name, arguments in (("twmd", {"centering": "batch"}), ("moverscore", {"idf": True})):
        metric = moverkit_lighteval.metric(name, **arguments)
        expected = getattr(functional, name)(predictions, references, **arguments)[name]
        assert np.allclose(metric.compute_sample(docs=docs, responses=responses)[name], expected, atol=1e-9, rtol=0)
        with pytest.raises(ValueError) as refused:
            metric.compute_sample(doc=docs[0], model_response=responses[0])
        assert str(refused.value) == refusal(name, REGISTRY[name].batch_dependence(arguments))


@pytest.mark.slow
def test_moverscores_default_is_the_tasks_idf_and_one_samples_none(task):
    """moverscore's default fits IDF over the call: over the task's references in the batched path
    (the evaluate module's numbers), off for one sample (the slice doors' numbers)."""
    predictions, references, docs, responses = task
    metric = moverkit_lighteval.moverscore
    batched = metric.compute_sample(docs=docs, responses=responses)["moverscore"]
    assert batched == functional.moverscore(predictions, references)["moverscore"]
    alone = metric.compute_sample(doc=docs[0], model_response=responses[0])["moverscore"]
    assert alone == pytest.approx(functional.moverscore(predictions[:1], references[:1], idf=False)["moverscore"][0])
    assert abs(alone - batched[0]) > 1e-4


@pytest.mark.slow
def test_a_metric_whose_output_is_named_by_its_arguments(task):
    """twmd's one score is keyed by its variant (``trwmd`` here); the lighteval metric keeps its name."""
    predictions, references, docs, responses = task
    metric = moverkit_lighteval.metric("twmd", variant="trwmd")
    expected = functional.twmd(predictions, references, variant="trwmd")["trwmd"]
    assert np.allclose(metric.compute_sample(docs=docs, responses=responses)["twmd"], expected, atol=1e-9, rtol=0)


@pytest.mark.slow
def test_two_metrics_of_one_name_are_named_apart_in_a_task(task):
    """lighteval keeps one score per name: a second twmd with other arguments takes a metric_name."""
    predictions, references, docs, responses = task
    trwmd = moverkit_lighteval.metric("twmd", variant="trwmd", metric_name="trwmd")
    (precision,) = [
        m for m in moverkit_lighteval.metrics("sbertscore", metric_name="sbert") if "precision" in m.metric_name
    ]
    outputs = apply_metric(responses=responses, docs=docs, metrics=[moverkit_lighteval.twmd, trwmd, precision])
    assert set(outputs[0]) == {"twmd", "trwmd", "sbert_precision"}
    expected = functional.twmd(predictions, references, variant="trwmd")["trwmd"]
    assert [output["trwmd"] for output in outputs] == pytest.approx(expected, abs=1e-9)


def test_a_doc_without_a_gold_is_named():
    doc = Doc(query="q", choices=["a"], gold_index=None, task_name="demo", id="3")
    with pytest.raises(ValueError, match=r"sample 0 \(task 'demo', id '3'\) has no gold reference \(gold_index None\)"):
        moverkit_lighteval.twmd.compute_sample(docs=[doc], responses=[ModelResponse(text=["a"])])


def test_arguments_are_checked_by_name_and_output():
    with pytest.raises(TypeError, match="unknown argument 'temprature'"):
        moverkit_lighteval.metric("twmd", temprature=0.1)
    with pytest.raises(
        ValueError, match="centered_bertscore has no output 'accuracy'; its outputs are precision, recall, f1"
    ):
        moverkit_lighteval.metric("centered_bertscore", "accuracy")


def test_the_custom_tasks_file_loads_and_uses_the_moverkit_metrics():
    module = Registry.create_custom_tasks_module(str(TASKS_FILE))  # what --custom-tasks does with a path
    configs = Registry._extract_configs(module)
    assert set(configs) == {"moverkit_wmt16:de-en", "moverkit_wmt16:ro-en"}
    for config in configs.values():
        names = {m.metric_name for m in config.metrics if isinstance(m.metric_name, str)}
        assert {
            "centered_bertscore_f1",
            "centered_bertscore_recall",
            "sbertscore_f1",
            "twmd",
            "moverscore",
            "lazy_emd",
        } <= names
    doc = module.translation_prompt({"translation": {"de": "Die Katze.", "en": "The cat."}}, "moverkit_wmt16:de-en")
    assert doc.get_golds() == ["The cat."] and doc.query.startswith("German phrase: Die Katze.")
