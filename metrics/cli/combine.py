"""``moverkit combine``: fit a calibrated combination of metrics on human judgments
(:mod:`moverkit.combination`) and save it as a JSON file.

    moverkit combine --data data/wmt17_seg_da_to_en.tsv --component twmd --component chrF --out combo.json
    moverkit combine ... --system-level --arg twmd:temperature=0.1

Before fitting on all the data, it prints the leave-one-language-pair-out figures: each pair scored
by the combination fitted on the other pairs, beside each component alone.
"""

from __future__ import annotations

from pathlib import Path

from moverkit.formats.options import METRICS, key_value, positive_int

COMPONENTS = (*METRICS, "chrF", "BLEU")
"""``moverkit.combination.COMPONENTS``, spelled out so that building the parser imports nothing heavy."""


def register(commands) -> None:
    combine = commands.add_parser(
        "combine", help="fit a combination of metrics (and chrF, BLEU) on human judgments, save it as JSON"
    )
    combine.add_argument(
        "--data", required=True, type=Path, help="TSV with columns lp, hypothesis, reference, human (segment level)"
    )
    combine.add_argument(
        "--component",
        action="append",
        required=True,
        choices=COMPONENTS,
        help="a component (repeat: --component twmd --component chrF)",
    )
    combine.add_argument("--out", required=True, type=Path, help="where to write the combination (.json)")
    combine.add_argument(
        "--system-level",
        action="store_true",
        help="also fit the system level, on the five fit pairs of the WMT17 extract in data/ of a checkout (cs, de, ru, "
        "tr, zh to en; fi-en and lv-en are never fitted on); scores 48 systems of 500 segments: minutes on a CPU",
    )
    combine.add_argument(
        "--arg",
        action="repeat",
        metavar="METRIC:KEY=VALUE",
        help="an argument of one moverkit component, kept in the file (repeat: --arg twmd:temperature=0.1)",
    )
    combine.add_argument("--batch-size", type=positive_int, help="texts per forward pass")
    combine.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    combine.set_defaults(run=run)


def metric_kwargs(items: list[str], components: list[str]) -> dict[str, dict]:
    """``--arg METRIC:KEY=VALUE`` items as ``{metric: {key: value}}`` (values as ``moverkit score --arg``)."""
    kwargs: dict[str, dict] = {}
    for item in items:
        metric, sep, rest = item.partition(":")
        if not sep or metric not in components or metric not in METRICS:
            raise ValueError(f"--arg {item!r}: METRIC:KEY=VALUE with METRIC a moverkit metric among the --component")
        key, value = key_value(rest)
        if key in kwargs.setdefault(metric, {}):
            raise ValueError(f"--arg: {metric}:{key} is given twice")
        kwargs[metric][key] = value
    return kwargs


def run(args) -> int:
    from moverkit import combination
    from moverkit._core.base import warn_user
    from moverkit.combination.crossval import format_segment, segment_report
    from moverkit.formats.lines import check_out
    from moverkit.formats.training_record import overlap_warning
    from moverkit.judgments import read_judgments

    components = list(args.component)
    if len(set(components)) != len(components):
        raise ValueError("--component: a component is given twice")
    kwargs = metric_kwargs(args.arg, components)
    check_out(args.out, [args.data])
    data = read_judgments(args.data)
    if len(data.human) < 2:
        raise ValueError(f"--data {args.data}: {len(data.human)} segment(s); fitting needs at least two")
    for component, arguments in kwargs.items():
        trained_on = overlap_warning(
            arguments.get("model_type"), data.predictions, data.references, data.groups, f"{component}'s figures"
        )
        if trained_on:
            warn_user(trained_on)
    features, _ = combination.component_scores(
        data.predictions, data.references, components, kwargs, batch_size=args.batch_size, device=args.device
    )
    fitted_on = {"segment": {"file": args.data.name, "groups": sorted(set(data.groups)), "n": len(data.human)}}
    if len(set(data.groups)) > 1:
        _check_groups(data, args.data)
        folds = segment_report(data, features, {"combination": components})
        print("Leave one language pair out, segment level: Pearson r / Kendall tau (x100)\n")
        print(format_segment(folds) + "\n")
    system = None
    if args.system_level:
        system = _system_level(components, kwargs, args.batch_size, args.device)
        fitted_on["system"] = {
            "file": "the shipped WMT17 extract",
            "groups": list(system),
            "n": sum(len(human) for _, human in system.values()),
        }
        folds = combination.leave_one_test_set_out(system)
        print("Leave one language pair out, system level: Pearson r (x100)\n")
        print("| system level | " + " | ".join(system) + " |")
        print("|---" + "|---:" * len(system) + "|")
        rows = {"combination": {lp: scores for lp, (_, scores) in folds.items()}}
        rows.update({c: {lp: f[c] for lp, (f, _) in system.items()} for c in components})
        for label, by_lp in rows.items():
            cells = [f"{100 * _pearson(by_lp[lp], human):.1f}" for lp, (_, human) in system.items()]
            print(f"| {label} | " + " | ".join(cells) + " |")
        print()
    fitted = combination.fit(
        (features, data.human),
        None if system is None else list(system.values()),
        metric_kwargs=kwargs,
        fitted_on=fitted_on,
    )
    fitted.save(args.out)
    for level in ("segment", "system"):
        fit = getattr(fitted, level)
        if fit is not None:
            weights = ", ".join(f"{c} {w:.3g}" for c, w in zip(components, fit.weights))
            print(f"{level} weights (of z-scores): {weights}")
    if fitted.system is not None:
        chosen = fitted.fitted_on["system"]
        tried = ", ".join(f"a={a} {agree}/{total}" for a, (agree, total) in chosen["held_out_pairs"].items())
        print(f"system level: a = {chosen['alpha']} (held-out system pairs ordered as the humans: {tried})")
    print(f"digest {fitted.digest}")
    print(f"saved to {args.out}")
    return 0


def _check_groups(data, path) -> None:
    """Every group needs two segments whose human scores differ for its held-out correlations."""
    for group, members in data.by_group().items():
        human = {data.human[i] for i in members}
        if len(members) < 2 or len(human) < 2:
            what = f"{len(members)} segment" if len(members) < 2 else "human scores that are all equal"
            raise ValueError(
                f"--data {path}: group {group!r} has {what}: leaving one group out scores each group by its "
                "correlation with the humans, which needs two segments with different human scores"
            )


def _system_level(components, kwargs, batch_size, device) -> dict:
    """``{lp: (features, human)}`` of the WMT17 extract's fit pairs, as :func:`moverkit.combination.fit_system` takes."""
    from moverkit._core.encoding import cache_enabled
    from moverkit.combination.scoring import system_features
    from moverkit.judgments import UNSEEN_PAIRS, read_extract, segment_scores

    test_sets = [t for t in read_extract() if t.lp not in UNSEEN_PAIRS]
    passthrough = {k: v for k, v in (("batch_size", batch_size), ("device", device)) if v is not None}
    segments = {}
    with cache_enabled():
        for metric in (c for c in components if c in METRICS):
            options = {**kwargs.get(metric, {}), **passthrough}
            segments[metric] = {t.lp: segment_scores(t, metric, **options) for t in test_sets}
    return {t.lp: (system_features(t, components, segments), t.human) for t in test_sets}


def _pearson(scores: dict[str, float], human: dict[str, float]) -> float:
    from moverkit.judgments.correlation import pearson

    names = sorted(human)
    return pearson([scores[s] for s in names], [human[s] for s in names])
