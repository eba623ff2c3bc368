"""How tuning (:mod:`moverkit.tuning`) scores each metric: a :class:`Target` per metric
(:data:`TARGETS`) says which of its arguments a grid may vary, which change the prepared token
clouds, how to prepare them and how to score a setting from them, with the metric's own functions,
so that a tuned setting scores exactly what the metric gives under it. A setting's arguments it
leaves out take the metric's defaults, read from its signature (:func:`with_defaults`): none is
written here again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from moverkit._core import PairOptions, prepare_pairs
from moverkit.functional.centered_bertscore import pair_scores as bertscore_pair_scores
from moverkit.functional.lazy_emd import pair_scores as lazy_emd_pair_scores
from moverkit.functional.lazy_emd import pairs_with_mass
from moverkit.functional.lazy_emd import resolve_params as lazy_emd_params
from moverkit.functional.moverscore import prepare as moverscore_prepare
from moverkit.functional.moverscore import resolve_config, side_units
from moverkit.functional.moverscore import score_pairs as moverscore_pair_scores
from moverkit.functional.twmd import pair_scores as twmd_pair_scores
from moverkit.functional.twmd import resolve_params as twmd_params
from moverkit.functional.twmd import similarities
from moverkit.integrations.registry import REGISTRY


@dataclass(frozen=True)
class Target:
    """How one metric is tuned: its default grid, which of its arguments change the prepared
    clouds (``prepare_keys``), how to prepare them and how to score a setting from them."""

    name: str
    tunable: frozenset[str]  # the arguments a grid may vary
    default_grid: Callable[[int, bool], dict[str, list]]  # (number of layers, corpus statistics shipped) -> grid
    prepare_keys: tuple[str, ...]
    prepare: Callable | None  # (predictions, references, request, centering, source, setting) -> PairData
    shared: Callable | None  # PairData -> what every setting of that preparation reuses
    score: Callable | None  # (data, shared, setting) -> per-pair scores (numpy)
    canonical: Callable[[dict], dict] = dict  # a setting with its defaults made explicit, for deduplication


def _centerings(with_corpus: bool) -> list[str]:
    return ["none", "batch", "corpus"] if with_corpus else ["none", "batch"]


def _twmd_grid(n_layers: int, with_corpus: bool) -> list[dict[str, list]]:
    """twmd at four temperatures around the paper's (0.02 uncentered, 0.1 centered) and trwmd at the
    paper's two, each on every layer and centering: 6 x 3 x 6 = 108 settings for the embedded model."""
    common = {"num_layers": list(range(1, n_layers + 1)), "centering": _centerings(with_corpus)}
    return [
        {**common, "variant": ["twmd"], "temperature": [0.02, 0.05, 0.1, 0.2]},
        {**common, "variant": ["trwmd"], "temperature": [0.02, 0.15]},
    ]


def with_defaults(metric: str, setting: dict) -> dict:
    """``setting`` with every settable argument it leaves out at the metric's default (its
    signature's: :attr:`moverkit.integrations.registry.Metric.settable`)."""
    return {**REGISTRY[metric].settable, **setting}


def _twmd_canonical(setting: dict) -> dict:
    full = with_defaults("twmd", setting)
    params = twmd_params(
        full["variant"], full["temperature"], full["sinkhorn_iterations"], full["normalize"], full["centering"]
    )
    kept = {k: v for k, v in setting.items() if k not in ("variant", "temperature", "sinkhorn_iterations", "normalize")}
    return {**kept, **params}


def _twmd_score(data, shared, setting) -> np.ndarray:
    return twmd_pair_scores(data, _twmd_params(setting), shared).cpu().numpy()


def _twmd_params(setting: dict) -> dict:
    canonical = _twmd_canonical(setting)
    return {k: canonical[k] for k in ("variant", "temperature", "sinkhorn_iterations", "normalize") if k in canonical}


def _plain_prepare(predictions, references, request, centering, source, setting):
    return prepare_pairs(
        predictions, references, request, centering, PairOptions(idf=setting.get("idf", False)), **source
    )


def _twmd_similarities(data):
    return similarities(data)


def _bertscore_score(data, shared, setting) -> np.ndarray:
    return bertscore_pair_scores(data)[2].numpy()  # F1


def _lazy_emd_score(data, shared, setting) -> np.ndarray:
    full = with_defaults("lazy_emd", setting)
    params = lazy_emd_params(full["lang"], full["reg_c"], full["reg_r"], full["epsilon"], full["max_iter"])
    return lazy_emd_pair_scores(data, shared, params).cpu().numpy()


def _lazy_emd_live(data):
    return pairs_with_mass(data)


def _moverscore_config(setting: dict):
    keys = ("variant", "n_gram", "idf", "prediction_idf", "remove_subwords", "remove_punctuation", "cost", "score_form")
    full = with_defaults("moverscore", setting)
    return resolve_config(full["version"], **{k: setting[k] for k in keys if k in setting})


def _moverscore_canonical(setting: dict) -> dict:
    """The setting with the preset's values where it leaves an argument to the preset (None)."""
    config = _moverscore_config(setting)
    return {k: getattr(config, k) if v is None and hasattr(config, k) else v for k, v in setting.items()}


def _moverscore_prepare(predictions, references, request, centering, source, setting):
    return moverscore_prepare(predictions, references, request, centering, _moverscore_config(setting), **source)


def _moverscore_score(data, shared, setting) -> np.ndarray:
    config = _moverscore_config(setting)
    pred, ref = side_units(data, config)
    return moverscore_pair_scores(data, pred, ref, config).cpu().numpy()


TARGETS = {
    target.name: target
    for target in (
        Target(
            "twmd",
            frozenset({"num_layers", "centering", "variant", "temperature", "sinkhorn_iterations", "normalize"}),
            _twmd_grid,
            ("num_layers", "centering"),
            _plain_prepare,
            _twmd_similarities,
            _twmd_score,
            _twmd_canonical,
        ),
        Target(
            "centered_bertscore",
            frozenset({"num_layers", "centering", "idf"}),
            lambda n, corpus: {
                "num_layers": list(range(1, n + 1)),
                "centering": _centerings(corpus),
                "idf": [False, True],
            },
            ("num_layers", "centering", "idf"),
            _plain_prepare,
            None,
            _bertscore_score,
        ),
        Target(
            "lazy_emd",
            frozenset({"num_layers", "centering", "idf", "epsilon", "reg_c", "reg_r", "max_iter"}),
            lambda n, corpus: {
                "num_layers": list(range(1, n + 1)),
                "centering": ["none", "batch"],
                "idf": [False, True],
                "epsilon": [0.009, 0.05],
            },
            ("num_layers", "centering", "idf"),
            _plain_prepare,
            _lazy_emd_live,
            _lazy_emd_score,
        ),
        Target(
            "moverscore",
            frozenset(
                {
                    "num_layers",
                    "centering",
                    "idf",
                    "prediction_idf",
                    "n_gram",
                    "variant",
                    "remove_subwords",
                    "remove_punctuation",
                    "cost",
                    "score_form",
                }
            ),  # fmt: skip
            lambda n, corpus: {"num_layers": list(range(1, n + 1)), "centering": ["none", "batch"], "n_gram": [1, 2]},
            ("num_layers", "centering", "idf", "prediction_idf", "remove_subwords", "remove_punctuation"),
            _moverscore_prepare,
            None,
            _moverscore_score,
            _moverscore_canonical,
        ),
        Target(
            "sbertscore",
            frozenset({"centering"}),
            lambda n, corpus: {"centering": ["none", "dim", "batch", *(["corpus"] if corpus else [])]},
            (),
            None,
            None,
            None,
        ),
    )
}
