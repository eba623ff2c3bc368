"""``moverkit compare``: systems' output files against the same references, with confidence
(:func:`moverkit.comparison.compare`)."""

from __future__ import annotations

from pathlib import Path

from moverkit.formats.options import METRICS, natural_int, positive_int


def register(commands) -> None:
    compare = commands.add_parser(
        "compare", help="compare systems on the same segments: intervals, paired significance, ranking"
    )
    compare.add_argument(
        "--references",
        required=True,
        type=Path,
        action="append",
        help="one reference per line; repeat for several references per segment",
    )
    compare.add_argument(
        "--system",
        required=True,
        action="append",
        metavar="NAME=FILE",
        help="a system's outputs, one per line; repeat for every system",
    )
    compare.add_argument(
        "--metric", action="append", choices=METRICS, help="repeat for several (default: centered_bertscore)"
    )
    compare.add_argument(
        "--settings",
        type=Path,
        action="repeat",
        help="a settings file from 'moverkit tune': its metric is compared under its arguments "
        "(repeat, one file per metric)",
    )
    compare.add_argument(
        "--combination",
        type=Path,
        help="a file from 'moverkit combine': adds the calibrated combination of its components as a row",
    )
    compare.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap and permutation resamples")
    compare.add_argument("--seed", type=natural_int, default=0, help="seed of the resampling, >= 0 (default: 0)")
    compare.add_argument("--json", type=Path, help="write the result here (one JSON object)")
    compare.add_argument("--png", type=Path, help="write a plot of the scores with their intervals here")
    compare.add_argument("--html", type=Path, help="write a self-contained HTML report here")
    compare.set_defaults(run=run)


def run(args) -> int:
    from moverkit.comparison import compare
    from moverkit.comparison.report import html_page, json_text, png_bytes, require_matplotlib
    from moverkit.formats.lines import check_out, read_texts, write_atomic
    from moverkit.formats.settings import load_settings

    systems = {}
    for item in args.system:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--system takes NAME=FILE, got {item!r}")
        if name in systems:
            raise ValueError(f"--system {name} is given twice")
        systems[name] = Path(path)
    inputs = [*args.references, *systems.values(), *args.settings, *([args.combination] if args.combination else [])]
    outputs_given = {"--json": args.json, "--png": args.png, "--html": args.html}
    for flag, out in outputs_given.items():
        check_out(out, inputs, flag)
    given = [(flag, out.resolve()) for flag, out in outputs_given.items() if out is not None]
    for i, (flag, out) in enumerate(given):
        for other, same in given[i + 1 :]:
            if out == same:
                raise ValueError(f"{flag} and {other} name the same file {out}; one would overwrite the other")
    if args.png or args.html:
        require_matplotlib()  # before minutes of scoring, not after
    reference_sets = [read_texts(path) for path in args.references]
    outputs = {name: read_texts(path) for name, path in systems.items()}
    n = len(reference_sets[0])
    for path, lines in [*zip(args.references, reference_sets), *zip(systems.values(), outputs.values())]:
        if len(lines) != n:
            raise ValueError(f"{path} has {len(lines)} lines but {args.references[0]} has {n}; one line per segment")
    references = reference_sets[0] if len(reference_sets) == 1 else [list(r) for r in zip(*reference_sets)]
    metrics, metric_kwargs = list(args.metric or []), {}
    for path in args.settings:
        metric = load_settings(path).metric
        if metric in metric_kwargs:
            raise ValueError(f"--settings: two files for {metric} ({metric_kwargs[metric]['settings']} and {path})")
        metric_kwargs[metric] = {"settings": str(path)}
        metrics += [] if metric in metrics else [metric]
    chosen = {"metrics": metrics} if metrics or args.combination else {}  # none: compare's default metric
    result = compare(
        references,
        outputs,
        **chosen,
        resamples=args.resamples,
        seed=args.seed,
        metric_kwargs=metric_kwargs,
        combination=None if args.combination is None else str(args.combination),
    )
    print(result.to_markdown())
    # Every output rendered before any is written: a failure leaves none of them behind.
    renderers = ((args.json, json_text), (args.png, png_bytes), (args.html, html_page))
    outputs = [(path, render(result)) for path, render in renderers if path is not None]
    for path, content in outputs:
        write_atomic(path, content)
    return 0
