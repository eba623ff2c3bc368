"""``moverkit fit-baseline``: a rescaling baseline for any metric, in bert-score's ``LAYER,P,R,F`` format
(``LAYER,<SCORE>,SETTINGS`` for the metrics with one score)."""

from __future__ import annotations

from pathlib import Path

from moverkit.formats.options import METRICS, given_arguments, natural_int, positive_int


def register(commands) -> None:
    base = commands.add_parser(
        "fit-baseline",
        help="fit a rescaling baseline (bert-score's method: the mean score of random text pairs) for any metric",
    )
    base.add_argument("--texts", required=True, type=Path, help="one text per line; pairs are drawn from them")
    base.add_argument("--out", required=True, type=Path, help="where to write the baseline (.csv)")
    base.add_argument(
        "--metric",
        default="centered_bertscore",
        choices=METRICS,
        help="the metric (default: centered_bertscore, whose file is bert-score's LAYER,P,R,F)",
    )
    base.add_argument(
        "--centering",
        choices=("none", "dim", "sentence", "batch", "corpus"),
        help="as the metric's (default: none for centered_bertscore, as bert-score; the metric's own default "
        "for the others; corpus: the statistic shipped for the model, or --centering-stats)",
    )
    base.add_argument("--centering-stats", type=Path, help="with --centering corpus: your statistic (.npz)")
    base.add_argument(
        "--arg",
        action="repeat",
        metavar="KEY=VALUE",
        help="any other argument of the metric, as your calls pass it (repeat: --arg variant=trwmd "
        "--arg temperature=0.2; --arg idf=true; --arg lang=de)",
    )
    base.add_argument("--pairs", type=positive_int, default=1000, help="random pairs (default: 1000)")
    base.add_argument("--seed", type=natural_int, default=0, help="seed of the random pairing, >= 0 (default: 0)")
    base.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    base.add_argument(
        "--layers",
        type=natural_int,
        nargs="+",
        help="layers to fit (default: every layer, 0 to the last; sbertscore has none)",
    )
    base.add_argument("--batch-size", type=positive_int, default=64, help="texts per forward pass")
    base.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    base.set_defaults(run=run)


def run(args) -> int:
    from moverkit._core.call import baseline_csv
    from moverkit.baselines import baseline_columns, fit_baseline, fitted_centering
    from moverkit.formats.lines import check_out, read_texts, write_atomic

    if args.centering_stats is not None and args.centering != "corpus":
        raise ValueError("--centering-stats is used only with --centering corpus")
    options = given_arguments({}, args.arg)
    check_out(args.out, [args.texts, args.centering_stats])
    rows = fit_baseline(
        read_texts(args.texts),
        metric=args.metric,
        model_type=args.model,
        layers=args.layers,
        centering=args.centering,
        centering_stats=None if args.centering_stats is None else str(args.centering_stats),
        options=options,
        n_pairs=args.pairs,
        seed=args.seed,
        batch_size=args.batch_size,
        device=args.device,
    )
    write_atomic(args.out, baseline_csv(rows, baseline_columns(args.metric, options)))
    centering = fitted_centering(args.metric, args.centering) or "the metric's default"
    layers = "sentence vectors" if rows[0][0] == -1 else f"layers {rows[0][0]}-{rows[-1][0]}"
    print(f"{args.metric} baseline of {args.pairs} random pairs, centering={centering}, {layers}")
    print(f"saved to {args.out}")
    return 0
