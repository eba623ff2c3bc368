"""The contract every metric promises, run once over all five from one table.

Each metric's own file pins its math; this file checks what every metric owes its users: it loads
offline, its docs run, bad input is a clear error, its function equals its module, the best
reference is kept, the numbers do not depend on batch size or pair order, the hashcode changes
with every argument that can change a score, and empty and identical texts get the documented values.
"""

from __future__ import annotations

import contextlib
import doctest
import inspect
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import moverkit
from moverkit import MoverkitWarning, functional
from moverkit.facts.specs import SPECS, MetricSpec

MODULES = moverkit.METRICS

# Arguments that never change a score (where and how fast it is computed, what else is returned).
NOT_SCORING = {
    "predictions",
    "references",
    "batch_size",
    "device",
    "verbose",
    "return_alignment",
    "return_reference_index",
}


@dataclass(frozen=True)
class Contract:
    """How to test what one metric promises (its promises themselves are its spec,
    :mod:`moverkit.facts.specs`: outputs, direction, identical and empty values). ``best_tol``: how close
    two different texts with the same tokens come to the identical value; ``fixed``: settings under
    which a pair's score does not depend on the other pairs of the call (for the best-reference
    check); ``variations``: for every scoring argument, another admissible value (the hashcode must
    change with each); ``not_scoring``: the metric's own arguments that change no score
    (compatibility arguments); ``held_elsewhere``: scoring arguments that no value varies on the
    embedded model, each with the test that holds its hashcode."""

    spec: MetricSpec
    variations: dict = field(default_factory=dict)
    best_tol: float = 1e-6
    fixed: dict = field(default_factory=lambda: {"centering": "none"})
    not_scoring: tuple[str, ...] = ()
    held_elsewhere: dict = field(default_factory=dict)


TOKEN_LEVEL = {"num_layers": 3, "centering": "dim", "max_length": 8, "long_texts": "window", "dtype": "bfloat16"}

CONTRACTS = {
    "centered_bertscore": Contract(
        SPECS["centered_bertscore"],
        variations={**TOKEN_LEVEL, "idf": True, "model_type": "TINY", "rescale_with_baseline": True},
        # lang only warns; baseline_path acts through rescale_with_baseline (its values are in the
        # hashcode then: tests/test_bertscore_dropin.py); the others are bertscore's, accepted.
        not_scoring=("lang", "baseline_path", "use_fast_tokenizer", "nthreads", "all_layers"),
    ),
    "twmd": Contract(
        SPECS["twmd"],
        variations={
            **TOKEN_LEVEL,
            "model_type": "TINY",
            "variant": "trwmd",
            "temperature": 0.5,
            "sinkhorn_iterations": 3,
            "normalize": False,
            "rescale_with_baseline": True,
        },
        # lang only warns about the English embedded model; baseline_path acts through rescale_with_baseline
        not_scoring=("lang", "baseline_path"),
    ),
    "moverscore": Contract(
        SPECS["moverscore"],
        variations={
            **TOKEN_LEVEL,
            "num_layers": 4,
            "model_type": "TINY",
            "version": "v1",
            "variant": "smd",
            "n_gram": 2,
            "aggregation": "power_means",
            "idf": False,
            "prediction_idf": False,
            "stop_words": ["the"],
            "remove_subwords": False,
            "remove_punctuation": False,
            "cost": "sqeuclidean",
            "score_form": "1-wmd",
            "rescale_with_baseline": True,
        },
        fixed={"centering": "none", "idf": False},  # v2's IDF is fitted on the call's references
        # lang only warns about the English embedded model; baseline_path acts through rescale_with_baseline
        not_scoring=("lang", "baseline_path"),
    ),
    "lazy_emd": Contract(
        SPECS["lazy_emd"],
        best_tol=0.02,  # two texts with the same tokens: the entropic plan (epsilon = 0.009) leaks a little mass
        variations={
            **TOKEN_LEVEL,
            "model_type": "TINY",
            "idf": True,
            "lang": "zh",
            "reg_c": 1.0,
            "reg_r": 2.0,
            "epsilon": 0.05,
            "max_iter": 20,
            "rescale_with_baseline": True,
        },
        not_scoring=("baseline_path",),  # it acts through rescale_with_baseline
    ),
    "sbertscore": Contract(
        SPECS["sbertscore"],
        variations={
            "model_type": "TINY",
            "centering": "dim",
            "lang": "de",
            "dtype": "bfloat16",
            "rescale_with_baseline": True,
            "prompt": "query: ",
        },
        not_scoring=("baseline_path",),  # it acts through rescale_with_baseline
        held_elsewhere={
            "prompt_name": "tests/families/test_sentence_pipelines.py (the embedded model names no prompt)",
        },
    ),
}

PAIRS = (
    ["The cat sat on the mat.", "Stocks fell sharply on Monday.", "He went home early.", "A new law was passed."],
    [
        "A cat was sitting on the mat.",
        "Shares dropped a lot on Monday.",
        "He left for home.",
        "Parliament passed a law.",
    ],
)


# Six more texts of one sentence each: with either side of PAIRS, ten distinct texts (and
# sentences) to fit a corpus statistic on without a warning (MIN_FIT_TEXTS).
MORE_TEXTS = [
    "Rain is expected this week.",
    "The museum opens at nine.",
    "Scientists found water on the planet.",
    "The team won the final match.",
    "Prices of fresh food keep rising.",
    "A new bridge links the two towns.",
]

# The warnings that a variation of CONTRACTS gives by design (on PAIRS, with the embedded model).
VARIATION_WARNINGS = {
    "max_length": (MoverkitWarning, "were truncated"),
    "lang": (MoverkitWarning, "is scored with the English embedded model"),
    # lazy_emd's max_iter=20 stops short of convergence (a RuntimeWarning, not a MoverkitWarning).
    "max_iter": (RuntimeWarning, "did not converge for 4 of 4 pairs within max_iter=20"),
}

# The metrics whose default centering is corpus: a statistic ships for the embedded model only.
DEFAULT_CORPUS = ("centered_bertscore", "twmd")


def _best(contract, values):
    return max(values) if contract.spec.higher_is_better else min(values)


def test_every_metric_has_a_spec_naming_its_outputs():
    assert tuple(SPECS) == MODULES
    for name, spec in SPECS.items():
        # Two pairs: IDF fitted on a single text (moverscore's default) is 0 on its every token, and warns.
        result = getattr(functional, name)(
            ["a cat sat", "stocks fell"], ["the cat sat", "shares fell"], centering="none"
        )
        assert set(result) - {"hashcode"} == set(spec.outputs) and spec.main in spec.outputs
        assert spec.low <= spec.identical <= spec.high and spec.low <= result[spec.main][0] <= spec.high


def test_all_five_metrics_are_bundled_with_card_and_requirements():
    assert set(MODULES) == set(CONTRACTS) == set(functional.__all__)
    for name in MODULES:
        folder = moverkit.module_path(name)
        assert (folder / "README.md").is_file() and (folder / "requirements.txt").is_file()


@pytest.mark.parametrize("name", MODULES)
def test_metric_name_is_the_folder_name(name, load_metric):
    # evaluate derives it from the class name; evaluate.combine keys its results by it.
    assert load_metric(name).name == name


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
    # A lone surrogate is no text (what errors="surrogateescape" makes of undecodable bytes).
    (["a", "b", "c", "x\ud800y"], ["a", "b", "c", "d"], ValueError, r"predictions\[3\] holds a lone surrogate"),
    (["a"], [["b", "\udfff"]], ValueError, r"references\[0\]\[1\] holds a lone surrogate"),
]

# Arguments checked once in the core, for every metric that takes them (skipped where it does
# not): the error names the argument, before any text is encoded.
BAD_ARGUMENTS = [
    ({"batch_size": "8"}, TypeError, "batch_size must be an int"),
    ({"batch_size": 2.5}, TypeError, "batch_size must be an int"),
    ({"max_length": 0}, ValueError, "max_length must be an int >="),
    ({"max_length": 1}, ValueError, "max_length must be an int >= 3"),
    ({"max_length": 2}, ValueError, "max_length must be an int >= 3"),
    ({"max_length": -5}, ValueError, "max_length must be an int >="),
    ({"device": "cuda:99"}, ValueError, r"device='cuda:99': this machine has .*; available: cpu"),
    ({"idf": {"cat": float("nan"), "sat": 1.0}}, ValueError, r"idf\['cat'\] must be a finite number >= 0"),
    ({"idf": {"cat": float("inf"), "sat": 1.0}}, ValueError, r"idf\['cat'\] must be a finite number >= 0"),
    ({"idf": {"cat": -1.0, "sat": 1.0}}, ValueError, r"idf\['cat'\] must be a finite number >= 0"),
]


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize(("predictions", "references", "error", "message"), BAD_INPUTS)
def test_bad_input_is_a_clear_error_naming_the_argument(name, load_metric, predictions, references, error, message):
    with pytest.raises(error, match=message):
        load_metric(name).compute(predictions=predictions, references=references)
    with pytest.raises(error, match=message):
        getattr(functional, name)(predictions=predictions, references=references)


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_ARGUMENTS)
def test_bad_argument_is_a_clear_error_naming_it(name, load_metric, kwargs, error, message):
    if not set(kwargs) <= set(inspect.signature(load_metric(name)._compute).parameters):
        pytest.skip(f"{name} takes no {', '.join(kwargs)}")
    with pytest.raises(error, match=message):
        getattr(functional, name)(["the cat sat"], ["a cat sat"], **kwargs)
    with pytest.raises(error, match=message):
        load_metric(name).compute(predictions=["the cat sat"], references=["a cat sat"], **kwargs)


@pytest.mark.parametrize("name", MODULES)
def test_no_pairs_give_empty_lists_and_a_hashcode(name, load_metric):
    contract = CONTRACTS[name]
    result = getattr(functional, name)([], [])
    assert result == {**{key: [] for key in contract.spec.outputs}, "hashcode": result["hashcode"]}
    assert result["hashcode"] == getattr(functional, name)(*PAIRS)["hashcode"]
    metric = load_metric(name)
    assert metric.compute(predictions=[], references=[]) == result
    metric.add_batch(predictions=[], references=[])  # an empty batch adds nothing
    assert metric.compute() == result


@pytest.mark.parametrize("name", MODULES)
def test_add_batch_takes_either_reference_layout_in_any_order(name, load_metric):
    metric = load_metric(name)
    predictions, references = PAIRS
    whole = metric.compute(predictions=predictions, references=references)
    metric.add_batch(predictions=predictions[:2], references=references[:2])  # one string each
    metric.add_batch(predictions=predictions[2:], references=[[r] for r in references[2:]])  # lists
    assert metric.compute() == whole
    metric.add_batch(predictions=predictions[:2], references=[[r] for r in references[:2]])
    metric.add(prediction=predictions[2], reference=references[2])
    metric.add_batch(predictions=predictions[3:], references=references[3:])
    assert metric.compute() == whole


@pytest.mark.parametrize("name", MODULES)
def test_text_spelling_special_tokens_scores_as_that_text(name):
    # "[CLS]" is the characters [, c, l, s, ]: the same tokens as "[ cls ]", so the best score;
    # read as control tokens ([CLS], [SEP], [PAD], [MASK] ids), it scored otherwise.
    contract = CONTRACTS[name]
    function = getattr(functional, name)
    spelled = ["[CLS] the cat [SEP] sat [PAD] on the [MASK] mat", "stocks [MASK] fell"]
    spaced = ["[ cls ] the cat [ sep ] sat [ pad ] on the [ mask ] mat", "stocks [ mask ] fell"]
    result = function(spelled, spaced)
    for key in contract.spec.outputs:
        assert result[key] == pytest.approx([contract.spec.best] * 2, abs=contract.best_tol), key


@pytest.mark.parametrize("name", MODULES)
def test_function_equals_module_and_takes_the_same_arguments(name, load_metric):
    metric = load_metric(name)
    function = getattr(functional, name)
    module_args = inspect.signature(metric._compute).parameters
    function_args = inspect.signature(function).parameters
    assert list(module_args) == list(function_args)
    for arg, parameter in module_args.items():
        assert parameter.default == function_args[arg].default, arg
    predictions, references = PAIRS
    assert function(predictions, references) == metric.compute(predictions=predictions, references=references)


@pytest.mark.parametrize("name", MODULES)
def test_loads_offline_with_an_explicit_signature_and_a_citation(name, load_metric):
    metric = load_metric(name)
    kinds = [p.kind for p in inspect.signature(metric._compute).parameters.values()]
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert metric.info.citation.strip().startswith("@")


@pytest.mark.parametrize("name", MODULES)
def test_doctests_in_kwargs_description_run(name, load_metric):
    # The examples say evaluate.load("metrics/<name>") (from a checkout): run them on the bundled module.
    shim = type("evaluate", (), {"load": staticmethod(lambda path, **kw: moverkit.load(Path(path).name, **kw))})
    text = load_metric(name).info.inputs_description
    test = doctest.DocTestParser().get_doctest(text, {"evaluate": shim}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.tries > 1
    assert runner.failures == 0


@pytest.mark.parametrize("name", MODULES)
def test_every_compute_argument_is_documented_in_docstring_and_card(name, load_metric):
    metric = load_metric(name)
    card = (moverkit.module_path(name) / "README.md").read_text(encoding="utf-8")
    how_to_use = card.split("## How to use", 1)[-1]
    for arg in inspect.signature(metric._compute).parameters:
        assert re.search(rf"\b{arg}\b", metric.info.inputs_description), f"{arg} missing from _KWARGS_DESCRIPTION"
        assert re.search(rf"\b{arg}\b", how_to_use), f"{arg} missing from the card's 'How to use'"


@pytest.mark.parametrize("name", MODULES)
def test_card_has_front_matter_and_sections(name):
    card = (moverkit.module_path(name) / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n")
    for section in (
        "## Metric description",
        "## How to use",
        "## Output values",
        "## Examples",
        "## Limitations and bias",
        "## Citation",
    ):
        assert section in card, f"{name} card lacks {section}"
    assert "moverkit._core" not in card


@pytest.mark.parametrize("name", MODULES)
def test_best_reference_is_kept(name):
    contract = CONTRACTS[name]
    function = getattr(functional, name)
    predictions, references = PAIRS
    others = references[1:] + references[:1]
    both = function(predictions, [[r, o] for r, o in zip(references, others)], **contract.fixed)
    alone = [function(predictions, refs, **contract.fixed) for refs in (references, others)]
    for key in contract.spec.outputs:
        expected = [_best(contract, values) for values in zip(*(a[key] for a in alone))]
        assert both[key] == pytest.approx(expected, abs=1e-6), key


@pytest.mark.slow
@pytest.mark.parametrize("name", MODULES)
def test_same_numbers_for_any_batch_size_and_pair_order(name):
    contract = CONTRACTS[name]
    function = getattr(functional, name)
    predictions, references = PAIRS
    order = [2, 0, 3, 1]
    # The default settings, and batch centering (the default of two metrics before corpus was):
    # its mean counts every text as often as it occurs, in whatever order; over PAIRS' 8 texts it warns.
    for kwargs in [{}] + ([{"centering": "batch"}] if name in DEFAULT_CORPUS else []):
        few = pytest.warns(MoverkitWarning, match="only 8 distinct texts") if kwargs else contextlib.nullcontext()
        with few:
            base = function(predictions, references, **kwargs)
        with few:
            small = function(predictions, references, batch_size=1, **kwargs)
        with few:
            shuffled = function([predictions[i] for i in order], [references[i] for i in order], **kwargs)
        for key in contract.spec.outputs:
            assert small[key] == pytest.approx(base[key], abs=1e-6), (key, kwargs)
            assert shuffled[key] == pytest.approx([base[key][i] for i in order], abs=1e-6), (key, kwargs)
        assert small["hashcode"] == base["hashcode"] == shuffled["hashcode"]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODULES)
def test_hashcode_changes_with_every_scoring_argument(name, load_metric, tiny_model_path, tmp_path):
    contract = CONTRACTS[name]
    function = getattr(functional, name)
    scoring = set(inspect.signature(load_metric(name)._compute).parameters) - NOT_SCORING - {"centering_stats"}
    scoring -= set(contract.not_scoring)
    expected = {*contract.variations, *contract.held_elsewhere, "settings"}
    assert scoring == expected, "every scoring argument needs a variation in CONTRACTS"
    predictions, references = PAIRS
    base = function(predictions, references)["hashcode"]
    # A settings file (moverkit tune) adds its digest, even one that sets nothing.
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"format": "moverkit-settings", "version": 1, "metric": name, "arguments": {}, "tuning": {}})
    )
    assert function(predictions, references, settings=str(settings))["hashcode"] != base
    for arg, value in contract.variations.items():
        # The tiny model has no shipped corpus statistic: compared under centering="none" then.
        same = {"centering": "none"} if value == "TINY" and name in DEFAULT_CORPUS else {}
        value = tiny_model_path if value == "TINY" else value
        expected = VARIATION_WARNINGS.get(arg)
        with pytest.warns(expected[0], match=expected[1]) if expected else contextlib.nullcontext():
            changed = function(predictions, references, **{arg: value}, **same)["hashcode"]
        unchanged = function(predictions, references, **same)["hashcode"] if same else base
        assert changed != unchanged, f"{name}: {arg}={value!r} leaves the hashcode unchanged"


@pytest.mark.parametrize("name", MODULES)
def test_hashcode_names_the_corpus_statistic(name):
    function = getattr(functional, name)
    predictions, references = PAIRS
    level = "sentence" if name == "sbertscore" else "token"
    kwargs = {"centering": "corpus", "num_layers": 6} if name == "moverscore" else {"centering": "corpus"}
    layers = {"num_layers": 6} if name == "moverscore" else {}
    first = moverkit.fit_centering(references + MORE_TEXTS, level=level, **layers)
    second = moverkit.fit_centering(predictions + MORE_TEXTS, level=level, **layers)
    one = function(predictions, references, centering_stats=first, **kwargs)["hashcode"]
    two = function(predictions, references, centering_stats=second, **kwargs)["hashcode"]
    assert one != two


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_empty_texts_score_the_documented_value(name, empty):
    contract = CONTRACTS[name]
    function = getattr(functional, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the metrics that warn about empty texts are tested in their own files
        result = function([empty, "a real text", empty], ["a real text", empty, empty])
    for key in contract.spec.outputs:
        assert result[key] == [contract.spec.empty] * 3, key


# Texts whose tokens repeat: near-duplicate vectors drew mass off the diagonal of lazy_emd's
# entropic plan (0.0165 for an 8,836-token repetitive text), and rounding put twmd at 1 + 2e-16.
REPETITIVE = ["the " * 60, "猫猫猫猫猫猫猫猫 猫猫猫猫", "go to the store and buy some milk. " * 20, "a"]


EXACT_BEST = [name for name in MODULES if SPECS[name].identical == SPECS[name].best]
"""The metrics whose definition gives a text against itself the best value: all but lazy_emd, whose
entropic plan costs a little above 0 (pinned to POT's in tests/metrics/test_lazy_emd.py)."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "kwargs"),
    [(name, {}) for name in EXACT_BEST]
    # sbertscore encodes sentences, so it has no long_texts
    + [(name, {"long_texts": "window", "max_length": 16}) for name in EXACT_BEST if name != "sbertscore"]
    # bfloat16 rounds each vector differently from float32 (twmd once gave 1.0000000000000002)
    + [(name, {"dtype": "bfloat16"}) for name in EXACT_BEST],
)
def test_identical_texts_score_exactly_the_best_value(name, kwargs):
    contract = CONTRACTS[name]
    function = getattr(functional, name)
    texts = list(PAIRS[0]) + list(PAIRS[1]) + REPETITIVE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation and small-batch warnings are tested elsewhere
        result = function(texts, texts, **kwargs)
    for key in contract.spec.outputs:
        assert result[key] == [contract.spec.best] * len(texts), key
