"""``moverkit bench tune``: tuned settings against the defaults, leaving one language pair out.

- **Segment level** (WMT17 DA, the five language pairs of the shared file): :func:`moverkit.tuning.tune`
  holds each pair out in turn, chooses the settings on the other four, and scores the held-out pair
  with them; beside it, the default settings on the same pair.
- **System level** (the shipped WMT17 extract, :mod:`benchmarks.system_level`): each of the five
  fit pairs is scored with the settings chosen without it (its segment-level fold); fi-en and lv-en,
  never fitted on, with the settings chosen on all five. System scores are segment means; the
  figures are each pair's Pearson and the pairwise accuracy over every system pair.
- **Cost**: one scoring pass of the metric at its defaults against a whole tuning run over the same
  texts, side by side (:func:`benchmarks._shared.interleaved`).
- **Layers**: the mean Pearson of each layer (other arguments at their defaults), the table behind
  the model's ``num_layers`` default (BERTScore's method, Zhang et al. 2020, Appendix B).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from benchmarks._shared import command_parser, interleaved, judgments
from moverkit.formats.options import METRICS, emit, positive_int, progress, rounds

HELP = "tuned settings (moverkit tune) against the defaults, leaving one language pair out"


def segment_level(data, metrics, *, model_type=None, **kwargs) -> dict:
    """``{metric: Tuning}`` on the judgments ``data`` (each metric's default grid)."""
    from moverkit.tuning import tune

    return {
        metric: tune(
            data.predictions, data.references, data.human, data.groups, metric, model_type=model_type, **kwargs
        )
        for metric in metrics
    }


def system_level(tunings: dict, test_sets, *, model_type=None) -> dict:
    """``{metric: {"default"|"tuned": {"pearson": {lp: r}, "accuracy": (agree, total)}}}``, each
    language pair scored with the settings chosen without it (see the module doc)."""
    from moverkit.facts.specs import spec
    from moverkit.judgments.correlation import pairwise, pearson
    from moverkit.tuning import score_settings

    table = {
        m: {"default": {"pearson": {}, "accuracy": [0, 0]}, "tuned": {"pearson": {}, "accuracy": [0, 0]}}
        for m in tunings
    }
    for test_set in test_sets:
        systems = sorted(test_set.outputs)
        predictions = [text for s in systems for text in test_set.outputs[s]]
        references = test_set.references * len(systems)
        chosen = {}
        for metric, tuning in tunings.items():
            fold = next((f for f in tuning.folds if f["group"] == test_set.lp), None)
            chosen[metric] = [tuning.settings[tuning.default], tuning.chosen if fold is None else fold["chosen"]]
            chosen[metric] = [{k: v for k, v in s.items() if k != "model_type"} for s in chosen[metric]]
        scores, _ = score_settings(predictions, references, chosen, model_type=model_type)
        n = len(test_set.references)
        for metric in tunings:
            higher = spec(metric).higher_is_better
            for label, values in zip(("default", "tuned"), scores[metric]):
                means = {s: math.fsum(values[i * n : (i + 1) * n]) / n for i, s in enumerate(systems)}
                r = pearson([means[s] for s in systems], [test_set.human[s] for s in systems])
                row = table[metric][label]
                row["pearson"][test_set.lp] = r if higher else -r
                agree, total = pairwise(means, test_set.human, higher)
                row["accuracy"] = [row["accuracy"][0] + agree, row["accuracy"][1] + total]
    return table


def layer_table(tuning) -> dict[int, float]:
    """Mean Pearson over the groups of each layer, the other arguments at the metric's defaults
    (the settings of the grid that differ from the default in ``num_layers`` alone)."""
    default = tuning.settings[tuning.default]
    rows = {}
    for setting, correlations in zip(tuning.settings, tuning.correlations):
        if all(setting.get(k) == v for k, v in default.items() if k != "num_layers"):
            rows[setting["num_layers"]] = float(np.nanmean(correlations))
    return dict(sorted(rows.items()))


def cost(data, metric: str, *, rounds: int = 2, model_type=None) -> dict:
    """Seconds of one scoring pass at the defaults and of a tuning run (the default grid), side by
    side (medians of ``rounds`` interleaved rounds), and the grid's size."""
    from moverkit.integrations.registry import REGISTRY
    from moverkit.tuning import tune

    sizes = []

    def tuning():
        sizes.append(
            len(
                tune(data.predictions, data.references, data.human, data.groups, metric, model_type=model_type).settings
            )
        )

    def scoring():
        REGISTRY[metric].function(data.predictions, data.references, model_type=model_type)

    times = interleaved({"one scoring pass": scoring, "tuning run": tuning}, rounds)
    medians = {label: float(np.median(values)) for label, values in times.items()}
    return {**medians, "ratio": medians["tuning run"] / medians["one scoring pass"], "settings": sizes[0]}


def format_segment(tunings: dict) -> str:
    """Markdown: per metric, held-out Pearson of the default and of the tuned settings per language
    pair and on average, and the settings chosen on all pairs."""
    groups = next(iter(tunings.values())).groups
    lines = [
        "| metric | settings | " + " | ".join(groups) + " | mean |",
        "|---|---|" + "---:|" * (len(groups) + 1),
    ]
    for metric, tuning in tunings.items():
        for label, key in (("default", "default"), ("tuned (held out)", "tuned")):
            values = [f[key] for f in tuning.folds]
            cells = " | ".join(f"{100 * v:.1f}" for v in values)
            lines.append(f"| {metric} | {label} | {cells} | {100 * float(np.nanmean(values)):.2f} |")
    lines.append("")
    for metric, tuning in tunings.items():
        from moverkit.tuning import describe

        lines.append(f"- {metric}: {len(tuning.settings)} settings; chosen on all five: {describe(tuning.chosen)}")
    return "\n".join(lines)


def format_system(table: dict) -> str:
    lps = list(next(iter(table.values()))["default"]["pearson"])
    lines = [
        "| metric | settings | " + " | ".join(lps) + " | pairwise accuracy |",
        "|---|---|" + "---:|" * (len(lps) + 1),
    ]
    for metric, rows in table.items():
        for label in ("default", "tuned"):
            row = rows[label]
            agree, total = row["accuracy"]
            cells = " | ".join(f"{100 * row['pearson'][lp]:.1f}" for lp in lps)
            lines.append(f"| {metric} | {label} | {cells} | {100 * agree / total:.1f}% ({agree}/{total}) |")
    return "\n".join(lines)


def format_layers(tunings: dict) -> str:
    lines = []
    for metric, tuning in tunings.items():
        if "num_layers" not in tuning.settings[tuning.default]:
            continue  # sbertscore: no layer
        table = layer_table(tuning)
        best = max(table, key=table.get)
        cells = ", ".join(f"{layer}: {100 * r:.2f}" for layer, r in table.items())
        lines.append(f"- {metric}: {cells} (best: layer {best})")
    return "\n".join(lines)


def register(which) -> None:
    tune = command_parser(which, "tune", HELP, command)
    tune.add_argument(
        "--metrics", nargs="+", choices=METRICS, default=list(METRICS), help="metrics to tune (default: all five)"
    )
    tune.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    tune.add_argument(
        "--system-level",
        action="store_true",
        help="also score the shipped WMT17 system-level extract with each pair's held-out settings",
    )
    tune.add_argument(
        "--segments",
        type=positive_int,
        help="with --system-level: the first N segments of each test set (default: all)",
    )
    tune.add_argument(
        "--cost",
        action="store_true",
        help="also time a tuning run against one scoring pass of the same texts, side by side (each metric)",
    )
    tune.add_argument("--rounds", type=rounds, default=2, help="with --cost: interleaved rounds (median)")
    tune.add_argument("--json", type=Path, help="also write every setting's per-pair correlations here (JSON)")


def command(args) -> int:
    import json

    from moverkit.formats.lines import write_atomic

    data = judgments(args, "json")
    tunings = {}
    for metric in args.metrics:
        tunings.update(segment_level(data, [metric], model_type=args.model))
        progress(f"{metric}: {len(tunings[metric].settings)} settings tuned")
    report = [
        f"Segment level: {args.data.name}, each language pair scored with the settings chosen on the others "
        "(Pearson r x 100)",
        format_segment(tunings),
        "Mean Pearson r x 100 of each layer, the other arguments at their defaults:",
        format_layers(tunings),
    ]
    record = {"segment": {metric: tuning.to_dict() for metric, tuning in tunings.items()}}
    if args.system_level:
        from moverkit.judgments import read_extract

        test_sets = read_extract(segments=args.segments)
        system = system_level(tunings, test_sets, model_type=args.model)
        report += [
            "System level: the WMT17 extract, each pair with its held-out settings",
            format_system(system),
        ]
        record["system"] = system
    if args.cost:
        costs = {metric: cost(data, metric, rounds=args.rounds, model_type=args.model) for metric in args.metrics}
        lines = ["| metric | settings | one scoring pass (s) | tuning run (s) | ratio |", "|---|---:|---:|---:|---:|"]
        for metric, c in costs.items():
            lines.append(
                f"| {metric} | {c['settings']} | {c['one scoring pass']:.1f} | {c['tuning run']:.1f} | {c['ratio']:.2f}x |"
            )
        report += [f"Cost, medians of {args.rounds} interleaved rounds:", "\n".join(lines)]
        record["cost"] = costs
    if args.json:
        write_atomic(args.json, json.dumps(record, indent=1) + "\n")
    return emit("\n\n".join(report), args.out)
