"""Checks every bundled metric module passes: loads offline, doctests run, contract holds."""

from __future__ import annotations

import doctest
import importlib.util
import inspect
import re
import types
from pathlib import Path

import pytest

import moverkit

MODULES = moverkit.METRICS


def _import_module_file(name):
    spec = importlib.util.spec_from_file_location(f"_moverkit_module_{name}", moverkit.module_path(name) / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_all_five_metrics_are_bundled():
    assert set(MODULES) >= {"centered_bertscore"}
    for name in MODULES:
        folder = moverkit.module_path(name)
        assert (folder / "README.md").is_file() and (folder / "requirements.txt").is_file()


# Inputs are checked by the shared base (moverkit._core.TextPairMetric), so every module must
# raise the same error, naming the argument and the item, before anything is encoded.
BAD_INPUTS = [
    (["a", "b"], ["a"], ValueError, "predictions and references differ in length"),
    (None, ["a"], ValueError, "predictions is None"),
    (["a"], None, ValueError, "references is None"),
    (["a", None], ["a", "b"], ValueError, r"predictions\[1\] is None"),
    (["a", 3], ["a", "b"], TypeError, r"predictions\[1\] must be a string"),
    (["a"], [[]], ValueError, r"references\[0\] is an empty list"),
    (["a"], [3], TypeError, r"references\[0\] must be a string"),
    (["a"], [None], ValueError, r"references\[0\] is None"),
]


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize(("predictions", "references", "error", "message"), BAD_INPUTS)
def test_bad_input_is_a_clear_error_naming_the_argument(name, load_metric, predictions, references, error, message):
    with pytest.raises(error, match=message):
        load_metric(name).compute(predictions=predictions, references=references)


@pytest.mark.parametrize("name", MODULES)
def test_loads_offline_and_has_no_var_keyword(name, load_metric):
    metric = load_metric(name)
    kinds = [p.kind for p in inspect.signature(metric._compute).parameters.values()]
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert metric.info.citation.strip().startswith("@")


@pytest.mark.parametrize("name", MODULES)
def test_doctests_in_kwargs_description_run(name):
    module = _import_module_file(name)
    # Examples may say evaluate.load("metrics/<name>") (from a checkout): run them on the bundled module.
    shim = types.SimpleNamespace(load=lambda path, **kw: moverkit.load(Path(path).name, **kw))
    results = doctest.testmod(module, extraglobs={"evaluate": shim}, optionflags=doctest.ELLIPSIS)
    assert results.attempted > 1
    assert results.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_every_compute_argument_is_documented_in_docstring_and_card(name, load_metric):
    metric = load_metric(name)
    module = _import_module_file(name)
    card = (moverkit.module_path(name) / "README.md").read_text(encoding="utf-8")
    how_to_use = card.split("## How to use", 1)[-1]
    for arg in inspect.signature(metric._compute).parameters:
        assert re.search(rf"\b{arg}\b", module._KWARGS_DESCRIPTION), f"{arg} missing from _KWARGS_DESCRIPTION"
        assert re.search(rf"\b{arg}\b", how_to_use), f"{arg} missing from the card's 'How to use'"


@pytest.mark.parametrize("name", MODULES)
def test_card_has_front_matter_and_sections(name):
    card = (moverkit.module_path(name) / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n")
    for section in ("## Metric description", "## How to use", "## Output values", "## Examples",
                    "## Limitations and bias", "## Citation"):
        assert section in card, f"{name} card lacks {section}"
