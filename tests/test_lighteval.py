"""moverkit.lighteval against the real lighteval (0.13): lighteval's own compute_sample on its Doc
and ModelResponse gives the function's numbers, and docs/lighteval_tasks.py loads as a custom-tasks
file whose tasks use these metrics."""

from __future__ import annotations

from pathlib import Path

import pytest
from lighteval.metrics.metrics_sample import SampleLevelComputation
from lighteval.metrics.utils.metric_utils import SampleLevelMetric, SampleLevelMetricGrouping
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.registry import Registry
from lighteval.tasks.requests import Doc

from moverkit import functional
from moverkit import lighteval as moverkit_lighteval
from moverkit.specs import SPECS

TASKS_FILE = Path(__file__).resolve().parents[1] / "docs" / "lighteval_tasks.py"
PREDICTION = "the cat sat on the mat"
GOLDS = ["a cat was sitting on the mat", "there is a cat on the mat"]
FIXED_ARGUMENTS = {"moverscore": {"idf": False}}  # the module's moverscore (one sample has no IDF of its own)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_compute_sample_gives_the_function_on_lightevals_objects(name):
    metric = getattr(moverkit_lighteval, name)
    spec = SPECS[name]
    assert isinstance(metric.sample_level_fn, SampleLevelComputation)
    doc = Doc(query="Translate: Die Katze sass auf der Matte.", choices=GOLDS, gold_index=[0, 1])
    result = metric.compute_sample(doc=doc, model_response=ModelResponse(text=[PREDICTION]))
    expected = getattr(functional, name)([PREDICTION], [GOLDS], **FIXED_ARGUMENTS.get(name, {}))
    if len(spec.outputs) > 1:
        assert isinstance(metric, SampleLevelMetricGrouping)
        assert metric.higher_is_better == dict.fromkeys(metric.metric_name, spec.higher_is_better)
        assert result == {f"{name}_{output}": expected[output][0] for output in spec.outputs}
    else:
        assert isinstance(metric, SampleLevelMetric) and metric.higher_is_better is spec.higher_is_better
        assert result == {name: expected[name][0]}
    aggregate = metric.get_corpus_aggregations()
    assert set(aggregate) == set(result) and aggregate[next(iter(result))]([0.25, 0.75]) == 0.5


def test_a_setting_that_needs_the_corpus_is_refused():
    with pytest.raises(ValueError, match="centering='batch'.*one sample at a time"):
        moverkit_lighteval.metric("twmd", centering="batch")
    with pytest.raises(ValueError, match="idf=None"):
        moverkit_lighteval.metric("moverscore")
    with pytest.raises(TypeError, match="unknown argument 'temprature'"):
        moverkit_lighteval.metric("twmd", temprature=0.1)


def test_the_custom_tasks_file_loads_and_uses_the_moverkit_metrics():
    module = Registry.create_custom_tasks_module(str(TASKS_FILE))  # what --custom-tasks does with a path
    configs = Registry._extract_configs(module)
    assert set(configs) == {"moverkit_wmt16:de-en", "moverkit_wmt16:ro-en"}
    for config in configs.values():
        names = {m.metric_name if isinstance(m.metric_name, str) else m.metric_name[-1] for m in config.metrics}
        assert {"centered_bertscore_f1", "sbertscore_f1", "twmd", "moverscore", "lazy_emd"} <= names
    doc = module.translation_prompt({"translation": {"de": "Die Katze.", "en": "The cat."}}, "moverkit_wmt16:de-en")
    assert doc.get_golds() == ["The cat."] and doc.query.startswith("German phrase: Die Katze.")
