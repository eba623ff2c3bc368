"""The public API, listed (issue 41): ``moverkit.*``, ``moverkit.functional.*`` with each function's
whole signature, the evaluate modules (their ``compute`` takes the function's arguments) and every
command of the CLI with its options. A change to any of them is a change of the public API: make
it on purpose, and change this list with it."""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import warnings

import pytest

import moverkit
from moverkit import functional

ROOT = [
    "METRICS",
    "MoverkitWarning",
    "__version__",
    "compare",
    "fit_centering",
    "load",
    "map_scores",
    "mbr_select",
    "means",
    "module_path",
    "release",
    "reward_function",
    "set_cache",
    "set_memory_budget",
    "temporary_memory_budget",
]
FRAMEWORK_PATHS = {
    "moverkit.lighteval": ["metric", "metrics", "centered_bertscore", "twmd"],
    "moverkit.lm_eval": ["TASKS", "PassThrough", "metric", "centered_bertscore", "twmd"],
    "moverkit.ray": ["RayScorer", "score_dataset"],
    "moverkit.serve": ["Batching", "Limits", "MetricServer", "application", "build", "start", "stop"],
    "moverkit.torchmetrics": ["CenteredBERTScore", "LazyEMD", "MoverScore", "MoverkitMetric", "SBERTScore", "TWMD"],
    "moverkit.verl": ["compute_score"],
}
"""The paths users type in their frameworks' configurations and imports (verl's ``pkg://moverkit.verl``,
``serve run moverkit.serve:app``, ``import moverkit.lm_eval``, ...), with the names they import: the
only modules loose at the top of ``metrics/`` (issue 68), each a thin module that re-exports its
door's public names from ``moverkit.integrations``. Permanent, not deprecated."""
MODULES = {
    **FRAMEWORK_PATHS,
    "moverkit.integrations.dataset_map": ["MapScores", "map_scores"],
    "moverkit.integrations.evaluate_modules": ["evaluate_module"],
    "moverkit.integrations.lighteval": ["metric", "metrics"],
    "moverkit.integrations.lm_eval": ["PassThrough", "TASKS", "metric"],
    "moverkit.integrations.mbr": ["mbr_select"],
    "moverkit.integrations.ray": ["RayScorer", "score_dataset"],
    "moverkit.integrations.registry": ["REGISTRY", "Metric", "get"],
    "moverkit.integrations.rewards": ["MetricReward", "reward_function"],
    "moverkit.integrations.serve": ["Batching", "Limits", "MetricServer", "application", "build", "start", "stop"],
    "moverkit.integrations.torchmetrics": ["MoverkitMetric", "TWMD"],
    "moverkit.integrations.verl": ["compute_score"],
}
"""The public modules besides the root and ``moverkit.functional``, with names users import from
them: the framework paths at the top and the doors in their room, ``moverkit.integrations``;
everything else sits in a folder named for its tier or job."""
PUBLIC_IN_0_3_0 = {
    "moverkit.dataset_map": ["MapScores"],
    "moverkit.evaluate_modules": ["evaluate_module"],
    "moverkit.lighteval": ["metric", "metrics"],
    "moverkit.lm_eval": ["PassThrough", "centered_bertscore", "twmd"],
    "moverkit.mbr": ["mbr_select"],
    "moverkit.ray": ["score_dataset"],
    "moverkit.registry": ["REGISTRY"],
    "moverkit.rewards": ["MetricReward", "reward_function"],
    "moverkit.serve": ["Batching", "Limits", "MetricServer", "application", "build", "start", "stop"],
    "moverkit.torchmetrics": ["CenteredBERTScore", "LazyEMD", "MoverScore", "SBERTScore", "TWMD"],
    "moverkit.verl": ["compute_score"],
}
"""Every public module of 0.3.0 with the names users imported from it (0.3.0's ``MODULES``): each
still imports. Those that are no framework path moved into ``moverkit.integrations`` in 0.4.0 and
warn until 0.5.0 (tests/test_moved_modules.py)."""
EXTRAS = {
    "lighteval": "lighteval",
    "torchmetrics": "torchmetrics",
    "ray": "ray",
    "lm_eval": "lm_eval",
    "serve": "ray.serve",
}
"""The optional packages a door needs (its extra), by the door's name."""
FUNCTIONS = {
    "centered_bertscore": "(predictions, references, *, idf: 'bool | Mapping' = False, use_fast_tokenizer: "
    "'bool' = False, nthreads: 'int' = 4, all_layers: 'bool' = False, model_type: 'str | "
    "os.PathLike | None' = None, num_layers: 'int | None' = None, batch_size: 'int' = 64, "
    "device: 'str | int | torch.device | None' = None, verbose: 'bool' = False, "
    "centering: 'str' = 'corpus', centering_stats=None, max_length: 'int | None' = None, "
    "lang: 'str' = 'en', long_texts: 'str' = 'truncate', dtype: 'str' = 'float32', "
    "rescale_with_baseline: 'bool' = False, baseline_path: 'str | os.PathLike | None' = "
    "None, return_alignment: 'bool' = False, return_reference_index: 'bool' = False, "
    "settings=None) -> 'dict'",
    "lazy_emd": "(predictions, references, *, reg_c: 'float | None' = None, reg_r: 'float | None' = None, "
    "epsilon: 'float' = 0.009, max_iter: 'int' = 10000, idf: 'bool | dict' = False, model_type: "
    "'str | os.PathLike | None' = None, num_layers: 'int | None' = None, batch_size: 'int' = 64, "
    "device: 'str | int | torch.device | None' = None, verbose: 'bool' = False, centering: 'str' = "
    "'none', centering_stats=None, max_length: 'int | None' = None, lang: 'str' = 'en', long_texts: "
    "'str' = 'truncate', dtype: 'str' = 'float32', rescale_with_baseline: 'bool' = False, "
    "baseline_path: 'str | os.PathLike | None' = None, return_alignment: 'bool' = False, "
    "return_reference_index: 'bool' = False, settings=None) -> 'dict'",
    "moverscore": "(predictions, references, *, version: 'str' = 'v2', variant: 'str | None' = None, n_gram: "
    "'int | None' = None, aggregation: 'str | None' = None, idf: 'bool | Mapping | None' = None, "
    "prediction_idf: 'bool | Mapping | None' = None, stop_words: 'list[str] | None' = None, "
    "remove_subwords: 'bool | None' = None, remove_punctuation: 'bool | None' = None, cost: 'str "
    "| None' = None, score_form: 'str | None' = None, model_type: 'str | os.PathLike | None' = "
    "None, num_layers: 'int | None' = None, batch_size: 'int' = 64, device: 'str | int | "
    "torch.device | None' = None, verbose: 'bool' = False, centering: 'str' = 'none', "
    "centering_stats=None, max_length: 'int | None' = None, lang: 'str' = 'en', long_texts: 'str' "
    "= 'truncate', dtype: 'str' = 'float32', rescale_with_baseline: 'bool' = False, "
    "baseline_path: 'str | os.PathLike | None' = None, return_alignment: 'bool' = False, "
    "return_reference_index: 'bool' = False, settings=None) -> 'dict'",
    "sbertscore": "(predictions, references, *, prompt_name: 'str | None' = None, prompt: 'str | None' = None, "
    "model_type: 'str | os.PathLike | None' = None, batch_size: 'int' = 64, device: 'str | int | torch.device | None' = None, verbose: 'bool' = False, "
    "centering: 'str' = 'none', centering_stats=None, lang: 'str' = 'en', dtype: 'str' = "
    "'float32', rescale_with_baseline: 'bool' = False, baseline_path: 'str | os.PathLike | None' "
    "= None, return_alignment: 'bool' = False, return_reference_index: 'bool' = False, "
    "settings=None) -> 'dict'",
    "twmd": "(predictions, references, *, variant: 'str' = 'twmd', temperature: 'float | None' = None, "
    "sinkhorn_iterations: 'int' = 1, normalize: 'bool' = True, model_type: 'str | os.PathLike | None' = "
    "None, num_layers: 'int | None' = None, batch_size: 'int' = 64, device: 'str | int | torch.device | "
    "None' = None, verbose: 'bool' = False, centering: 'str' = 'corpus', centering_stats=None, "
    "max_length: 'int | None' = None, lang: 'str' = 'en', long_texts: 'str' = 'truncate', dtype: 'str' "
    "= 'float32', rescale_with_baseline: 'bool' = False, baseline_path: 'str | os.PathLike | None' = "
    "None, return_alignment: 'bool' = False, return_reference_index: 'bool' = False, settings=None) -> "
    "'dict'",
}
SIGNATURES = {
    "mbr_select": "(candidates: 'Sequence[Sequence[str]]', *, metric: 'str' = 'centered_bertscore', "
    "pseudo_references: 'Sequence[Sequence[str]] | None' = None, output: 'str | None' = None, aggregate: "
    "'bool' = False, return_matrix: 'bool' = False, **metric_arguments) -> 'dict'",
    "reward_function": "(metric: 'str', *, reference_column: 'str' = 'references', output: 'str | None' = None, "
    "**metric_arguments) -> 'MetricReward'",
}
"""The signatures of the root's functions over the metrics (issue 53)."""
CLI = {
    "moverkit": ["--help", "--version", "-h"],
    "moverkit bench": ["--help", "-h"],
    "moverkit bench cache": [
        "--data",
        "--evaluations",
        "--help",
        "--metric",
        "--out",
        "--references",
        "--rounds",
        "-h",
    ],
    "moverkit bench combination": ["--combination", "--data", "--help", "--json", "--out", "--scores-cache", "-h"],
    "moverkit bench compare-cost": [
        "--help",
        "--metrics",
        "--out",
        "--resamples",
        "--rounds",
        "--segments",
        "--systems",
        "--threads",
        "-h",
    ],
    "moverkit bench correlation": ["--data", "--help", "--limit", "--list", "--out", "--rows", "-h"],
    "moverkit bench encoders": [
        "--data",
        "--fallback-centering",
        "--help",
        "--jobs",
        "--json",
        "--metrics",
        "--model",
        "--no-avx2",
        "--no-embedded",
        "--out",
        "--per-pair",
        "--rounds",
        "--speed-pairs",
        "--unseen",
        "-h",
    ],
    "moverkit bench gpu": [
        "--check-pairs",
        "--data",
        "--device",
        "--dtypes",
        "--help",
        "--limit",
        "--model",
        "--out",
        "--rounds",
        "--scale-budget",
        "--scale-dtype",
        "--scale-pairs",
        "-h",
    ],
    "moverkit bench host": ["--data", "--device", "--dtype", "--help", "--limit", "--metrics", "--out", "-h"],
    "moverkit bench overhead": [
        "--avx2",
        "--data",
        "--help",
        "--limit",
        "--metrics",
        "--out",
        "--rounds",
        "--strict-avx2",
        "-h",
    ],
    "moverkit bench precision": [
        "--avx2",
        "--data",
        "--help",
        "--limit",
        "--metrics",
        "--out",
        "--rounds",
        "--strict-avx2",
        "-h",
    ],
    "moverkit bench quantized": [
        "--avx2",
        "--data",
        "--help",
        "--n-pairs",
        "--n-texts",
        "--out",
        "--rounds",
        "--strict-avx2",
        "-h",
    ],
    "moverkit bench rewards": [
        "--avx2",
        "--candidates",
        "--data",
        "--device",
        "--generations",
        "--help",
        "--mbrs-python",
        "--metrics",
        "--out",
        "--prompts",
        "--rounds",
        "--sources",
        "-h",
    ],
    "moverkit bench scale": ["--data", "--help", "--memory-budget", "--out", "--runs", "--sizes", "-h"],
    "moverkit bench serve": [
        "--avx2",
        "--batch-wait",
        "--clients",
        "--completions",
        "--cpus-per-replica",
        "--data",
        "--help",
        "--max-batch-size",
        "--metric",
        "--out",
        "--replicas",
        "--rounds",
        "--verl-python",
        "-h",
    ],
    "moverkit bench shuffled": ["--data", "--help", "--out", "--pairs", "--seed", "-h"],
    "moverkit bench speed": ["--data", "--help", "--limit", "--list", "--out", "--repeats", "--suite", "-h"],
    "moverkit bench system-level": [
        "--data",
        "--help",
        "--metrics",
        "--out",
        "--per-system-batch",
        "--resamples",
        "--seed",
        "--segments",
        "--wmt17",
        "-h",
    ],
    "moverkit bench tune": [
        "--cost",
        "--data",
        "--help",
        "--json",
        "--metrics",
        "--model",
        "--out",
        "--rounds",
        "--segments",
        "--system-level",
        "-h",
    ],
    "moverkit combine": [
        "--arg",
        "--batch-size",
        "--component",
        "--data",
        "--device",
        "--help",
        "--out",
        "--system-level",
        "-h",
    ],
    "moverkit compare": [
        "--combination",
        "--help",
        "--html",
        "--json",
        "--metric",
        "--png",
        "--references",
        "--resamples",
        "--seed",
        "--settings",
        "--system",
        "-h",
    ],
    "moverkit finetune": [
        "--batch-size",
        "--centering",
        "--data",
        "--device",
        "--epochs",
        "--group-column",
        "--help",
        "--keep-checkpoints",
        "--learning-rate",
        "--max-length",
        "--model",
        "--num-layers",
        "--out",
        "--overwrite",
        "--patience",
        "--prediction-column",
        "--quiet",
        "--reference-column",
        "--resume",
        "--score-column",
        "--seed",
        "--sinkhorn-iterations",
        "--standardize",
        "--target-mean",
        "--target-std",
        "--temperature",
        "--validation-split",
        "--variant",
        "-h",
    ],
    "moverkit fit-baseline": [
        "--arg",
        "--batch-size",
        "--centering",
        "--centering-stats",
        "--device",
        "--help",
        "--layers",
        "--metric",
        "--model",
        "--out",
        "--pairs",
        "--seed",
        "--texts",
        "-h",
    ],
    "moverkit fit-centering": [
        "--batch-size",
        "--device",
        "--dtype",
        "--help",
        "--lang",
        "--level",
        "--model",
        "--num-layers",
        "--out",
        "--texts",
        "-h",
    ],
    "moverkit mbr": [
        "--aggregate",
        "--arg",
        "--batch-size",
        "--candidates",
        "--centering",
        "--device",
        "--dtype",
        "--help",
        "--metric",
        "--model",
        "--num-candidates",
        "--num-layers",
        "--out",
        "-h",
    ],
    "moverkit serve": [
        "--address",
        "--arg",
        "--batch-size",
        "--batch-wait",
        "--centering",
        "--cpus-per-replica",
        "--device",
        "--dtype",
        "--end-marker",
        "--help",
        "--host",
        "--max-batch-size",
        "--max-body-bytes",
        "--max-characters",
        "--max-texts",
        "--metric",
        "--model",
        "--num-layers",
        "--output",
        "--port",
        "--replicas",
        "--request-timeout",
        "--tokenizer",
        "-h",
    ],
    "moverkit publish": ["--commit", "--dry-run", "--help", "--org", "--repository", "--source", "--tag", "-h", "out"],
    "moverkit score": [
        "--arg",
        "--batch-size",
        "--centering",
        "--centering-stats",
        "--combination",
        "--device",
        "--dtype",
        "--help",
        "--idf",
        "--long-texts",
        "--metric",
        "--model",
        "--num-layers",
        "--out",
        "--predictions",
        "--references",
        "--settings",
        "--verbose",
        "-h",
    ],
    "moverkit tune": [
        "--batch-size",
        "--data",
        "--device",
        "--grid",
        "--group",
        "--help",
        "--human",
        "--json",
        "--metric",
        "--model",
        "--objective",
        "--out",
        "--prediction",
        "--reference",
        "--verbose",
        "-h",
    ],
}


def test_the_package_root():
    assert sorted(moverkit.__all__) == ROOT
    assert moverkit.METRICS == ("centered_bertscore", "lazy_emd", "moverscore", "sbertscore", "twmd")
    for name in ROOT:
        assert getattr(moverkit, name) is not None, name  # the lazy attributes resolve


def test_the_functions_and_their_signatures():
    assert sorted(functional.__all__) == sorted(FUNCTIONS)
    assert {name: str(inspect.signature(getattr(functional, name))) for name in FUNCTIONS} == FUNCTIONS


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_evaluate_modules_take_the_functions_arguments(name, load_metric):
    assert tuple(moverkit.METRICS) == moverkit.METRICS and name in moverkit.METRICS
    module = load_metric(name)
    parameters = list(inspect.signature(type(module)._compute).parameters)
    assert parameters == ["self", *inspect.signature(getattr(functional, name)).parameters]


def test_the_signatures_of_the_reward_and_mbr_functions():
    assert {name: str(inspect.signature(getattr(moverkit, name))) for name in SIGNATURES} == SIGNATURES


def _commands(parser, path):
    options = sorted(s for a in parser._actions for s in a.option_strings)
    positional = [
        a.dest for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]
    yield " ".join(path), options + positional
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, [*path, name])


def test_every_command_and_its_options():
    from moverkit.cli import build_parser

    assert dict(_commands(build_parser(), ["moverkit"])) == CLI


def test_the_type_stub_gives_the_whole_signatures():
    # Type checkers and IDEs read metrics/functional/__init__.pyi (the package has py.typed).
    from functional_stubs import STUB, stub_text

    assert (STUB.parent.parent / "py.typed").is_file()
    assert STUB.read_text(encoding="utf-8") == stub_text(), "out of date: run python tests/functional_stubs.py"


def test_the_top_level_holds_the_framework_paths_only():
    from pathlib import Path

    loose = {p.stem for p in Path(moverkit.__file__).parent.glob("*.py")} - {"__init__"}
    assert {f"moverkit.{name}" for name in loose} == set(FRAMEWORK_PATHS)


def _needs_extra(module: str) -> None:
    door = module.rpartition(".")[2]
    if door in EXTRAS:
        pytest.importorskip(EXTRAS[door])  # the extras' own packages


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_public_modules_and_their_names(module):
    _needs_extra(module)
    imported = importlib.import_module(module)
    assert all(getattr(imported, name, None) is not None for name in MODULES[module]), module


@pytest.mark.parametrize("path", sorted(FRAMEWORK_PATHS))
def test_a_framework_path_re_exports_its_door(path):
    """The same objects as the door in ``moverkit.integrations``, and nothing of its own but
    ``moverkit.serve``'s ``app``, built when first asked for."""
    _needs_extra(path)
    thin = importlib.import_module(path)
    door = importlib.import_module(path.replace("moverkit.", "moverkit.integrations.", 1))
    assert thin.__all__ == door.__all__
    assert all(getattr(thin, name) is getattr(door, name) for name in door.__all__)
    names = {name: value for name, value in vars(thin).items() if not name.startswith("__")}
    own = {name for name, value in names.items() if getattr(door, name, None) is not value}
    assert own <= ({"app"} if path == "moverkit.serve" else set()), own


@pytest.mark.parametrize("module", sorted(PUBLIC_IN_0_3_0))
def test_every_public_path_of_0_3_0_still_imports(module, monkeypatch):
    _needs_extra(module)
    if module in FRAMEWORK_PATHS:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            imported = importlib.import_module(module)
    else:
        monkeypatch.delitem(sys.modules, module, raising=False)  # as in a fresh process
        monkeypatch.delattr(moverkit, module.rpartition(".")[2], raising=False)
        with pytest.warns(DeprecationWarning, match=f"{module} moved to moverkit.integrations"):
            imported = importlib.import_module(module)
    assert all(getattr(imported, name, None) is not None for name in PUBLIC_IN_0_3_0[module]), module
