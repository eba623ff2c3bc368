"""``moverkit score``: a file of predictions against one or more files of references."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from moverkit.formats.options import DTYPES, METRICS, add_encoder_options, encoder_options, given_arguments

PROGRESS_LINES = 1000
"""Files longer than this get a progress bar without --verbose."""

DIGITS = 6
"""Decimals of every score in the --out file (the encoder runs in float32: about 7 significant digits)."""


def register(commands) -> None:
    score = commands.add_parser("score", help="score a file of predictions against references, one text per line")
    score.add_argument("--metric", choices=METRICS, help="the metric (default: the one of --settings)")
    score.add_argument(
        "--settings",
        type=Path,
        help="a settings file from 'moverkit tune': the metric's arguments as tuned (options given as well must agree)",
    )
    score.add_argument(
        "--combination",
        type=Path,
        help="a file from 'moverkit combine': score with the calibrated combination of its components instead of --metric",
    )
    score.add_argument("--predictions", required=True, type=Path, help="one prediction per line")
    score.add_argument(
        "--references",
        required=True,
        type=Path,
        action="append",
        help="one reference per line; repeat the option for several references per prediction",
    )
    add_encoder_options(score)
    score.add_argument(
        "--dtype",
        choices=DTYPES,
        help="precision of the encoder's forward pass (default: float32; auto: the fastest faithful one here)",
    )
    score.add_argument(
        "--long-texts",
        choices=("truncate", "window"),
        help="texts over the model's limit: cut at it (default) or encoded whole in overlapping windows",
    )
    score.add_argument("--idf", action="store_true", help="weight tokens by IDF fitted on the references")
    score.add_argument(
        "--centering",
        help="none, dim, sentence (not sbertscore), batch or corpus (default: the metric's; see the README)",
    )
    score.add_argument(
        "--centering-stats", type=Path, help="with --centering corpus: a statistic saved by 'moverkit fit-centering'"
    )
    score.add_argument(
        "--arg",
        action="repeat",
        metavar="KEY=VALUE",
        help="any other compute argument of the metric (VALUE read as JSON when it parses, e.g. temperature=0.1)",
    )
    score.add_argument(
        "--out", type=Path, help=f"write per-line scores here (JSON lines, every score to {DIGITS} decimals)"
    )
    score.add_argument("--verbose", action="store_true", help="progress bar (on by default for long files)")
    score.set_defaults(run=run)


def run(args) -> int:
    from moverkit.formats.lines import check_out, read_texts, write_atomic
    from moverkit.integrations.registry import REGISTRY

    check_out(args.out, [args.predictions, *args.references, args.centering_stats, args.settings, args.combination])
    if args.combination is not None:
        return run_combination(args)
    if args.settings is not None:
        from moverkit.formats.settings import load_settings

        tuned = load_settings(args.settings, args.metric)
        args.metric = tuned.metric
    elif args.metric is None:
        raise ValueError("give --metric, --settings (a file from 'moverkit tune' names its metric) or --combination")
    predictions = read_texts(args.predictions)
    reference_sets = [read_texts(path) for path in args.references]
    for path, refs in zip(args.references, reference_sets):
        if len(refs) != len(predictions):
            raise ValueError(
                f"{args.predictions} has {len(predictions)} lines but {path} has {len(refs)}; "
                "every file needs one line per example"
            )
    references = reference_sets[0] if len(reference_sets) == 1 else [list(r) for r in zip(*reference_sets)]
    score = REGISTRY[args.metric].function
    kwargs = compute_kwargs(args, verbose=args.verbose or len(predictions) > PROGRESS_LINES)
    result = score(predictions, references, **kwargs)

    per_line = {k: v for k, v in result.items() if isinstance(v, list) and len(v) == len(predictions)}
    check_finite_scores(per_line, args.predictions)
    for key, values in per_line.items():
        if values and all(isinstance(v, (int, float)) for v in values):
            print(f"{key}\t{math.fsum(values) / len(values):.6f}")
    print(f"hashcode\t{result['hashcode']}")
    if args.out:
        lines = []
        for i in range(len(predictions)):
            row = {k: round(v[i], DIGITS) if isinstance(v[i], float) else v[i] for k, v in per_line.items()}
            lines.append(json.dumps({"line": i + 1, **row}) + "\n")
        write_atomic(args.out, "".join(lines))
        print(f"per-line scores written to {args.out}", file=sys.stderr)
    return 0


def run_combination(args) -> int:
    """``--combination``: the calibrated combination's segment scores (and its system score of the
    file, when it has a system level); the components run at the settings the file names."""
    from moverkit.combination import combined
    from moverkit.formats.lines import read_texts, write_atomic

    given = [flag for flag, value in (("--metric", args.metric), ("--settings", args.settings)) if value is not None]
    if given or args.arg or args.idf or args.centering or args.num_layers is not None or args.model:
        raise ValueError(
            "--combination scores with the components and settings its file names; leave out "
            f"{', '.join(given) or 'the metric options'}"
        )
    if len(args.references) != 1:
        raise ValueError("--combination takes one --references file (its components were fitted on one reference)")
    predictions, references = read_texts(args.predictions), read_texts(args.references[0])
    if len(references) != len(predictions):
        raise ValueError(
            f"{args.predictions} has {len(predictions)} lines but {args.references[0]} has {len(references)}"
        )
    result = combined(predictions, references, str(args.combination), batch_size=args.batch_size, device=args.device)
    per_line = {"combined": result["combined"], **result["components"]}
    check_finite_scores({k: v for k, v in per_line.items() if v and v[0] is not None}, args.predictions)
    if result["combined"] and result["combined"][0] is not None:
        print(f"combined\t{math.fsum(result['combined']) / len(result['combined']):.6f}")
    if result["system"] is not None:
        print(f"system\t{result['system']:.6f}")
    print(f"hashcode\t{result['hashcode']}")
    if args.out:
        lines = []
        for i in range(len(predictions)):
            row = {k: v[i] if v[i] is None else round(v[i], DIGITS) for k, v in per_line.items()}
            lines.append(json.dumps({"line": i + 1, **row}) + "\n")
        write_atomic(args.out, "".join(lines))
        print(f"per-line scores written to {args.out}", file=sys.stderr)
    return 0


def check_finite_scores(per_line: dict, predictions: Path) -> None:
    """Refuse a NaN or infinite score before anything is printed or written: JSON has no such
    number (``json.dumps`` would write ``NaN`` or ``Infinity``, which readers refuse), and a score
    that is not finite is a fault (of the model, the settings or a baseline), not a result."""
    for key, values in per_line.items():
        for i, value in enumerate(values):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(
                    f"{predictions}, line {i + 1}: the {key} score is {value}, not a finite number; nothing was "
                    "written (check the model, the settings and any baseline_path)"
                )


def compute_kwargs(args, verbose: bool) -> dict:
    """The options the user gave, under the metric's own argument names (those of its public
    function, ``moverkit.functional.<metric>``); an option the metric does not take is an error,
    not silently dropped."""
    from moverkit.integrations.registry import REGISTRY

    defaults = REGISTRY[args.metric].defaults
    accepted = set(defaults)
    options = {
        **encoder_options(args),
        "centering_stats": ("--centering-stats", str(args.centering_stats) if args.centering_stats else None),
        "idf": ("--idf", True if args.idf else None),
        "long_texts": ("--long-texts", args.long_texts),
    }
    kwargs = given_arguments(options, args.arg)
    if args.settings is not None:
        kwargs["settings"] = str(args.settings)
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ValueError(
            f"{args.metric} takes no argument {', '.join(unknown)}; it takes {', '.join(sorted(accepted))}"
        )
    if "centering_stats" in kwargs:
        if not isinstance(kwargs["centering_stats"], str):
            raise ValueError(
                "centering_stats takes the path of a statistic saved by 'moverkit fit-centering' "
                f"(--centering-stats FILE or --arg centering_stats=FILE), got {kwargs['centering_stats']!r}"
            )
        if kwargs.get("centering", defaults["centering"]) != "corpus":
            raise ValueError("--centering-stats is used only with --centering corpus")
        if not Path(kwargs["centering_stats"]).is_file():
            raise ValueError(f"--centering-stats {kwargs['centering_stats']}: there is no such file")
    if "verbose" in accepted:
        kwargs["verbose"] = verbose
    return kwargs
