r"""Tune a metric's settings on human judgments, without training the encoder (``moverkit tune``).

BERTScore chose its layer per model by Pearson correlation with WMT16 judgments (Zhang et al., 2020,
Appendix B), and the tempered-WMD paper tuned its temperatures on WMT15-16 (Chen et al., 2020,
Section 6.2). :func:`tune` redoes that for any model and any judgments: it scores every setting of
a grid (the product of each argument's listed values: layer, centering, IDF, variant, temperature,
...), correlates each with the human scores within each group (language pair, or a column the
user names), and picks settings by leave-one-group-out cross-validation.

**Method.** For a setting :math:`s` and a group :math:`g`, :math:`r_g(s)` is the correlation
(Pearson, or Kendall's tau-b) of the metric's scores with the human ones over the group's
segments, sign-flipped for a distance (lazy_emd), so that higher is better. The chosen setting
maximizes the mean over groups, :math:`\hat s = \arg\max_s \frac{1}{|G|} \sum_g r_g(s)` (BERTScore's
rule: every language pair weighs the same). Each fold holds one group out, chooses :math:`\hat s_{-g}`
on the others, and reports :math:`r_g(\hat s_{-g})` beside :math:`r_g` of the metric's default
settings: the held-out figures are what a new language pair can expect.

**Cost.** Every distinct text goes through the encoder once, keeping every layer of the grid from
that one forward pass (:func:`~moverkit._core.encoding.encoder.encode_texts` with ``layers``). Each combination of
the arguments that change the token clouds (layer, centering, IDF, MoverScore's filters) is then
prepared once (:func:`~moverkit._core.prepare_pairs` with those clouds); the arguments that act
after it (variant, temperature, epsilon, penalties) reuse it, and for twmd the cosine matrices too
(:func:`moverkit.functional.twmd.similarities`). Every score is computed by the metric's own
functions, so a chosen setting scores exactly what ``moverkit.functional.<metric>(..., settings=...)``
gives (tests/test_tuning.py). Memory: the kept layers hold tokens x layers x hidden size x 4 bytes
(the 5,600 WMT17 texts: about 1.9 GB for the 7 outputs of all-MiniLM-L6-v2).

sbertscore has no layer (its sentence encoder mean-pools the last one): each of its settings is one
call of the metric.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from moverkit.facts.specs import SPECS
from moverkit.facts.ties import first_best
from moverkit.integrations.registry import REGISTRY
from moverkit.tuning.targets import TARGETS

OBJECTIVES = ("pearson", "kendall")

MAX_SETTINGS = 2_000
"""The most settings a grid may hold. Each costs about one scoring pass of the data (and a row of
every group's correlations); the largest default grid (twmd on a 48-layer model) holds 864. A
larger grid is refused before any work, naming its count."""


@dataclass
class Tuning:
    """What :func:`tune` found: every setting's per-group correlations, the choice on all groups,
    and each fold's held-out figures (tuned and default)."""

    metric: str
    model_type: str | None
    objective: str
    groups: list[str]
    settings: list[dict]  # the grid, each setting as passed to the metric
    correlations: np.ndarray  # (n_settings, n_groups)
    default: int  # index of the metric's default settings in ``settings``
    folds: list[dict]  # per held-out group: chosen setting, its held-out r, the default's (None: constant scores)
    seconds: dict[str, float]

    @property
    def best(self) -> int:
        return best_setting(self.correlations)

    @property
    def chosen(self) -> dict:
        """The arguments of the best setting on all groups (with model_type when it is not the default)."""
        arguments = dict(self.settings[self.best])
        if self.model_type is not None:
            arguments["model_type"] = self.model_type
        return arguments

    def to_settings(self, data_name: str = ""):
        from moverkit.formats.settings import Settings

        record = {
            "data": data_name,
            "objective": self.objective,
            "groups": self.groups,
            "grid_size": len(self.settings),
            "mean_correlation": _mean(self.correlations[self.best]),
            "default_mean_correlation": _mean(self.correlations[self.default]),
            "folds": self.folds,
            "seconds": self.seconds,
        }
        return Settings(self.metric, self.chosen, record)

    def to_dict(self) -> dict:
        """Everything measured, JSON-ready: the grid with each setting's per-group correlation, and the folds."""
        return {
            "metric": self.metric,
            "model_type": self.model_type,
            "objective": self.objective,
            "groups": self.groups,
            "settings": [
                {"arguments": s, "correlations": [None if math.isnan(r) else float(r) for r in row]}
                for s, row in zip(self.settings, self.correlations)
            ],
            "default": self.default,
            "chosen": self.chosen,
            "folds": self.folds,
            "seconds": self.seconds,
        }

    def to_markdown(self) -> str:
        """Per held-out group: the setting chosen on the other groups, its correlation and the
        default's; then the setting chosen on all groups."""
        name = "Pearson r" if self.objective == "pearson" else "Kendall tau"
        lines = [
            f"| held-out group | chosen on the others | tuned {name} | default {name} |",
            "|---|---|---:|---:|",
        ]
        for fold in self.folds:
            lines.append(
                f"| {fold['group']} | {describe(fold['chosen'])} | {_shown(fold['tuned'])} | {_shown(fold['default'])} |"
            )
        tuned, default = (_mean([f[key] for f in self.folds]) for key in ("tuned", "default"))
        lines.append(f"| **mean** | | **{_shown(tuned)}** | **{_shown(default)}** |")
        lines.append("")
        lines.append(
            f"Chosen on all groups: {describe(self.chosen)} (mean {name} {_shown(_mean(self.correlations[self.best]))};"
        )
        lines.append(
            f"the default {describe(self.settings[self.default])}: {_shown(_mean(self.correlations[self.default]))})."
        )
        return "\n".join(lines)


def _finite(value: float) -> float | None:
    """JSON has no NaN: a correlation that does not exist (constant scores) is None."""
    return None if math.isnan(value) else float(value)


def _mean(values) -> float | None:
    """The mean of the correlations that exist (neither None nor NaN); None if none does."""
    finite = [float(v) for v in values if v is not None and not math.isnan(v)]
    return math.fsum(finite) / len(finite) if finite else None


def _shown(value: float | None) -> str:
    """A correlation in the report; one that does not exist (constant scores) reads "n/a", not nan."""
    return "n/a" if value is None else f"{value:.4f}"


def describe(setting: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "(defaults)"


def expand_grid(grid: Mapping[str, Sequence] | Sequence[Mapping[str, Sequence]]) -> list[dict]:
    """Every combination of the grid's values, in order: the product of the lists of a mapping, or
    of each mapping of a list of them, one after the other (as scikit-learn's ``ParameterGrid``).
    Each value is a plain one (a string, number, boolean or null), and the settings are counted
    before any is made: more than :data:`MAX_SETTINGS` are refused."""
    grids = [grid] if isinstance(grid, Mapping) else grid
    if isinstance(grids, (str, bytes)) or not isinstance(grids, Sequence) or not grids:
        raise ValueError("grid must be a mapping of argument name -> list of values, or a non-empty list of them")
    for one in grids:
        if not isinstance(one, Mapping) or not one:
            raise ValueError(
                f"grid: each part must be a non-empty mapping of argument name -> list of values, got {one!r}"
            )
        for key, values in one.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not len(values):
                raise ValueError(f"grid[{key!r}] must be a non-empty list of values, got {values!r}")
            for value in values:
                if value is not None and not isinstance(value, (str, bool, int, float)):
                    raise ValueError(
                        f"grid[{key!r}]: each value must be a string, number, boolean or null, got {value!r}"
                    )
    count = sum(math.prod(len(values) for values in one.values()) for one in grids)  # before making any
    if count > MAX_SETTINGS:
        raise ValueError(
            f"grid: {count:,} settings, more than the {MAX_SETTINGS:,} a grid may hold "
            "(moverkit.tuning.MAX_SETTINGS); list fewer values"
        )
    return [dict(zip(one, combo)) for one in grids for combo in itertools.product(*one.values())]


def tune(
    predictions: Sequence[str],
    references: Sequence[str],
    human: Sequence[float],
    groups: Sequence[str],
    metric: str,
    grid: Mapping[str, Sequence] | None = None,
    *,
    model_type: str | None = None,
    objective: str = "pearson",
    batch_size: int = 64,
    device: str | None = None,
    dtype: str = "float32",
    max_length: int | None = None,
    verbose: bool = False,
) -> Tuning:
    """Score every setting of ``grid`` (default: the metric's, :data:`moverkit.tuning.targets.TARGETS`) on the pairs
    (``predictions[i]``, ``references[i]``), correlate with ``human`` within each of ``groups``, and
    cross-validate the choice leaving one group out (see the module doc). Needs at least two groups
    of at least three segments each."""
    import time

    from moverkit._core import checks
    from moverkit._core.base import warn_user
    from moverkit.facts.specs import spec
    from moverkit.formats.lines import table_label
    from moverkit.formats.training_record import overlap_warning

    started = time.perf_counter()
    if metric not in REGISTRY:
        raise ValueError(f"metric must be one of {', '.join(sorted(REGISTRY))}, got {metric!r}")
    checks.one_of("objective", objective, OBJECTIVES)
    expanded = None if grid is None else expand_grid(grid)  # a grid too large is refused before any work
    human = np.asarray([checks.real(f"human[{i}]", h, what="a number (a human score)") for i, h in enumerate(human)])
    n = len(predictions)
    if not (len(references) == len(human) == len(groups) == n):
        raise ValueError(
            f"predictions, references, human and groups must have one item per segment: "
            f"{n}, {len(references)}, {len(human)}, {len(groups)}"
        )
    if not np.isfinite(human).all():
        raise ValueError("human scores must be finite numbers")
    names = sorted(set(groups))
    for g in names:
        table_label("group", str(g))  # it heads a row of the report
    index = {g: np.flatnonzero(np.asarray(groups, dtype=object) == g) for g in names}
    flat = [g for g in names if np.ptp(human[index[g]]) == 0]
    if flat:
        raise ValueError(
            f"the human scores of group(s) {', '.join(map(str, flat))} are all equal: no correlation to tune on"
        )
    small = [g for g in names if len(index[g]) < 3]
    if len(names) < 2 or small:
        raise ValueError(
            "tuning needs at least two groups of at least 3 segments each (one is held out in turn); got "
            f"{len(names)} group(s)" + (f", too small: {', '.join(map(str, small))}" if small else "")
        )
    trained_on = overlap_warning(model_type, predictions, references, groups, "the held-out correlations")
    if trained_on:
        warn_user(trained_on)
    target = TARGETS[metric]
    settings, default = _settings(target, expanded, model_type)
    keys = [_key(target.canonical(s)) for s in settings]
    unique = list(dict.fromkeys(keys))  # settings that resolve alike (such as a temperature cka ignores) run once
    settings = [settings[keys.index(k)] for k in unique]
    default_key = _key(target.canonical(default))
    if default_key not in unique:
        settings.append(default)
        unique.append(default_key)
    default_index = unique.index(default_key)

    common = {"batch_size": batch_size, "device": device, "dtype": dtype, "max_length": max_length}
    scores, seconds = score_settings(
        predictions, references, {metric: settings}, model_type=model_type, verbose=verbose, **common
    )
    scores = scores[metric]
    sign = 1.0 if spec(metric).higher_is_better else -1.0
    correlations = np.array(
        [[_correlate(sign * s[index[g]], human[index[g]], objective) for g in names] for s in scores]
    )
    unscorable = [g for k, g in enumerate(names) if np.isnan(correlations[:, k]).all()]
    if unscorable:
        raise ValueError(
            f"the {metric} scores of group(s) {', '.join(map(str, unscorable))} are constant under every setting "
            "of the grid: no setting has a correlation there to tune on"
        )
    folds = []
    for k, g in enumerate(names):
        others = [j for j in range(len(names)) if j != k]
        chosen = best_setting(correlations[:, others])
        folds.append(
            {
                "group": g,
                "chosen": settings[chosen],
                "tuned": _finite(correlations[chosen, k]),
                "default": _finite(correlations[default_index, k]),
            }
        )
    seconds["total"] = time.perf_counter() - started
    return Tuning(metric, model_type, objective, names, settings, correlations, default_index, folds, seconds)


def best_setting(correlations: np.ndarray) -> int:
    """The row (setting) of the best mean correlation over the columns (groups); a setting whose
    scores were constant in a group (NaN there) counts that group as missing, and one constant in
    every group is never chosen."""
    finite = ~np.isnan(correlations)
    counts = finite.sum(axis=1)
    means = np.where(finite, correlations, 0.0).sum(axis=1) / np.maximum(counts, 1)
    return first_best(np.where(counts > 0, means, -np.inf))  # tied means: the first setting


def _key(setting: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in setting.items()))


def _settings(target, expanded: list[dict] | None, model_type) -> tuple[list[dict], dict]:
    """The settings of the grid (expanded; None: the metric's default grid) and the metric's default
    one, each with every argument the grid varies given explicitly (the metric's default where a
    setting leaves it out), and the layer resolved."""
    defaults = REGISTRY[target.name].settable
    name, n_layers, with_corpus = _model_facts(model_type, target.prepare is not None)
    if not with_corpus and defaults.get("centering") == "corpus":
        # No statistic ships for this model: its default call would be refused; compare with the
        # paper's own centering (the mean of the call's texts) instead.
        defaults = {**defaults, "centering": "batch"}
    if expanded is None:
        expanded = expand_grid(target.default_grid(n_layers, with_corpus))
    grid_keys = list(dict.fromkeys(k for setting in expanded for k in setting))
    for key in grid_keys:
        if key not in target.tunable:
            raise ValueError(
                f"grid: {key!r} is not an argument of {target.name} that tuning varies "
                f"(those are: {', '.join(sorted(target.tunable))})"
            )
    varied = [*grid_keys, *(k for k in ("num_layers", "centering") if k in defaults and k not in grid_keys)]
    from moverkit._core.encoding import resolve_layer

    default_layer = None
    if "num_layers" in defaults:
        from moverkit._core.encoding import default_layer as table_layer

        # the metric's own rule (its spec): the last layer (MoverScore's release), or the model's table entry
        default_layer = n_layers if SPECS[target.name].default_layer == -1 else table_layer(name, n_layers)

    def complete(setting: dict) -> dict:
        full = {k: setting.get(k, defaults[k]) for k in varied}
        if "num_layers" in full and full["num_layers"] is None:
            full["num_layers"] = default_layer
        if "num_layers" in full:  # a negative layer counts from the top: the same layer as its positive number
            try:
                full["num_layers"] = resolve_layer(name, full["num_layers"], n_layers)
            except (TypeError, ValueError):
                raise ValueError(
                    f"grid: num_layers must be an int from {-n_layers - 1} to {n_layers} for {name}, "
                    f"got {full['num_layers']!r}"
                ) from None
        return full

    return [complete(s) for s in expanded], complete({})


def _model_facts(model_type, token_level: bool) -> tuple[str | None, int, bool]:
    """The model's name (as hashcodes give it) and number of layers, and whether ``corpus``
    centering statistics ship for it (for every layer, or for its sentence vectors when not
    ``token_level``). The full encoder loaded here is the one :func:`score_settings` runs."""
    from moverkit._core.centering import Centering
    from moverkit._core.encoding import get_encoder

    if not token_level:
        return None, 0, model_type is None  # the embedded model's sentence statistic ships
    encoder = get_encoder(model_type, -1)
    try:
        for layer in range(1, encoder.n_layers + 1):
            Centering("corpus", None).resolved(encoder.name, layer, encoder.widths[layer])
    except (ValueError, FileNotFoundError):
        return encoder.name, encoder.n_layers, False
    return encoder.name, encoder.n_layers, True


def score_settings(
    predictions: Sequence[str],
    references: Sequence[str],
    settings: Mapping[str, Sequence[dict]],
    *,
    model_type: str | None = None,
    batch_size: int = 64,
    device: str | None = None,
    dtype: str = "float32",
    max_length: int | None = None,
    verbose: bool = False,
) -> tuple[dict[str, list[np.ndarray]], dict[str, float]]:
    """Each metric's scores (its main output, one float64 array per setting) of the pairs under
    each of ``settings[metric]`` (settings as :func:`tune` makes them: token metrics name their
    ``num_layers`` and ``centering``), and the seconds spent encoding and scoring.

    The token metrics share one forward pass over the distinct texts, keeping every layer any of
    their settings uses; each combination of the arguments that change the clouds is prepared once
    (see the module doc). sbertscore's settings are one call of the metric each."""
    import time

    from moverkit._core.base import call_texts
    from moverkit._core.centering import Centering
    from moverkit._core.encoding import EncoderRequest, encode_texts, get_encoder, resolve_layer

    predictions, references = list(predictions), list(references)
    common = {"batch_size": batch_size, "device": device, "dtype": dtype, "max_length": max_length}
    seconds = {"encode": 0.0, "score": 0.0}
    scores: dict[str, list] = {metric: [None] * len(chosen) for metric, chosen in settings.items()}
    started = time.perf_counter()
    for metric, chosen in settings.items():  # sbertscore: each setting is one call of the metric
        if TARGETS[metric].prepare is None:
            kwargs = {k: v for k, v in common.items() if k != "max_length"}  # sentences are split, not truncated
            function = REGISTRY[metric].function
            for i, s in enumerate(chosen):
                scores[metric][i] = np.asarray(
                    function(predictions, references, model_type=model_type, verbose=verbose, **kwargs, **s)["f1"],
                    dtype=np.float64,
                )
    seconds["score"] += time.perf_counter() - started
    token = {metric: chosen for metric, chosen in settings.items() if TARGETS[metric].prepare is not None}
    if not any(token.values()):
        return scores, seconds

    wanted = {s["num_layers"] for chosen in token.values() for s in chosen}
    deepest = get_encoder(model_type, -1, device)
    resolved = {layer: resolve_layer(deepest.name, layer, deepest.n_layers) for layer in wanted}
    layers = sorted(set(resolved.values()))
    if layers[-1] < deepest.layer:  # no setting needs the top blocks: an encoder cut lower runs faster
        deepest = get_encoder(model_type, layers[-1], device)
    request = EncoderRequest(model_type, deepest.layer, verbose=verbose, **common)
    started = time.perf_counter()
    clouds = encode_texts(deepest, call_texts(predictions, references).unique, request, layers=layers)
    seconds["encode"] = time.perf_counter() - started
    started = time.perf_counter()
    for metric, chosen in token.items():
        target = TARGETS[metric]
        prepared: dict[tuple, list[int]] = {}
        for i, setting in enumerate(chosen):
            prepared.setdefault(tuple((k, repr(setting.get(k))) for k in target.prepare_keys), []).append(i)
        for members in prepared.values():
            first = chosen[members[0]]
            layer = resolved[first["num_layers"]]
            source = {
                "encoder": dataclasses.replace(deepest, layer=layer),
                "clouds": dataclasses.replace(
                    clouds, vectors=clouds.layer_vectors[layers.index(layer)], layer_vectors=None, layers=None
                ),
            }
            layer_request = dataclasses.replace(request, num_layers=layer)
            data = target.prepare(
                predictions, references, layer_request, Centering(first["centering"], None), source, first
            )
            shared = None if target.shared is None else target.shared(data)
            for i in members:
                scores[metric][i] = np.asarray(target.score(data, shared, chosen[i]), dtype=np.float64)
            del data, shared
    seconds["score"] += time.perf_counter() - started
    return scores, seconds


def _correlate(scores: np.ndarray, human: np.ndarray, objective: str) -> float:
    from scipy import stats

    if np.ptp(scores) == 0:
        return math.nan  # a constant score orders nothing
    if objective == "pearson":
        return float(stats.pearsonr(scores, human)[0])
    return float(stats.kendalltau(scores, human)[0])
