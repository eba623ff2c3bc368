"""``moverkit tune``: choose a metric's settings on human judgments by leave-one-group-out
cross-validation (:mod:`moverkit.tuning`), and save them as a settings file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from moverkit.formats.options import METRICS, positive_int


def register(commands) -> None:
    tune = commands.add_parser(
        "tune",
        help="choose a metric's settings (layer, centering, IDF, variant, temperature) on human judgments, "
        "cross-validated over groups",
    )
    tune.add_argument(
        "--data", required=True, type=Path, help="judgments: a TSV with a header (as data/wmt17_seg_da_to_en.tsv)"
    )
    tune.add_argument("--metric", required=True, choices=METRICS)
    tune.add_argument("--out", required=True, type=Path, help="where to write the settings file (.json)")
    tune.add_argument(
        "--grid",
        help="JSON: an object of argument -> list of values, or a list of such objects (default: the "
        'metric\'s grid, see the README); e.g. \'{"num_layers": [4, 5, 6], "centering": ["none", "corpus"]}\'',
    )
    tune.add_argument("--group", default="lp", help="the column whose groups are held out in turn (default: lp)")
    tune.add_argument("--prediction", default="hypothesis", help="the column of predictions (default: hypothesis)")
    tune.add_argument("--reference", default="reference", help="the column of references (default: reference)")
    tune.add_argument("--human", default="human", help="the column of human scores (default: human)")
    tune.add_argument("--objective", choices=("pearson", "kendall"), default="pearson", help="the correlation")
    tune.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    tune.add_argument("--batch-size", type=positive_int, default=64, help="texts per forward pass")
    tune.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    tune.add_argument("--json", type=Path, help="also write every setting's per-group correlations here")
    tune.add_argument("--verbose", action="store_true", help="progress bar while encoding")
    tune.set_defaults(run=run)


def run(args) -> int:
    from moverkit.formats.jsonfile import loads
    from moverkit.formats.lines import check_out, write_atomic
    from moverkit.judgments import read_judgments
    from moverkit.tuning import tune

    check_out(args.out, [args.data])
    check_out(args.json, [args.data], "--json")
    if args.json is not None and args.json.resolve() == args.out.resolve():
        raise ValueError("--json and --out name the same file")
    grid = None if args.grid is None else loads(args.grid, "--grid")
    data = read_judgments(
        args.data, group=args.group, prediction=args.prediction, reference=args.reference, human=args.human
    )
    result = tune(
        data.predictions,
        data.references,
        data.human,
        data.groups,
        args.metric,
        grid,
        model_type=args.model,
        objective=args.objective,
        batch_size=args.batch_size,
        device=args.device,
        verbose=args.verbose,
    )
    settings = result.to_settings(Path(args.data).name)
    print(result.to_markdown())
    print(f"\n{len(result.settings)} settings in {result.seconds['total']:.1f} s "
          f"(encoding {result.seconds['encode']:.1f} s, scoring {result.seconds['score']:.1f} s)")  # fmt: skip
    print(f"settings:{settings.digest[:16]}")
    write_atomic(args.out, settings.to_json())
    if args.json is not None:
        write_atomic(args.json, json.dumps(result.to_dict(), indent=1, allow_nan=False) + "\n")
    print(f"settings written to {args.out}", file=sys.stderr)
    return 0
