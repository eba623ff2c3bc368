"""``moverkit fit-baseline``: a rescaling baseline in bert-score's ``LAYER,P,R,F`` format."""

from __future__ import annotations

from pathlib import Path

from .options import natural_int, positive_int


def register(commands) -> None:
    base = commands.add_parser(
        "fit-baseline",
        help="fit a rescaling baseline (bert-score's LAYER,P,R,F csv): mean centered_bertscore of random text pairs",
    )
    base.add_argument("--texts", required=True, type=Path, help="one text per line; pairs are drawn from them")
    base.add_argument("--out", required=True, type=Path, help="where to write the baseline (.csv)")
    base.add_argument(
        "--centering",
        default="none",
        choices=("none", "dim", "sentence", "batch", "corpus"),
        help="as centered_bertscore's (default: none; corpus: the statistic shipped for the model)",
    )
    base.add_argument("--pairs", type=positive_int, default=1000, help="random pairs (default: 1000)")
    base.add_argument("--seed", type=int, default=0, help="seed of the random pairing (default: 0)")
    base.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    base.add_argument(
        "--layers", type=natural_int, nargs="+", help="layers to fit (default: every layer, 0 to the last)"
    )
    base.add_argument("--batch-size", type=positive_int, default=64, help="texts per forward pass")
    base.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    base.set_defaults(run=run)


def run(args) -> int:
    from moverkit._core.baseline import baseline_csv
    from moverkit.lines import check_out, read_texts, write_atomic
    from moverkit.rescaling import fit_baseline

    check_out(args.out, [args.texts])
    rows = fit_baseline(
        read_texts(args.texts),
        model_type=args.model,
        layers=args.layers,
        centering=args.centering,
        n_pairs=args.pairs,
        seed=args.seed,
        batch_size=args.batch_size,
        device=args.device,
    )
    write_atomic(args.out, baseline_csv(rows))
    print(f"baseline of {args.pairs} random pairs, centering={args.centering}, layers {rows[0][0]}-{rows[-1][0]}")
    print(f"saved to {args.out}")
    return 0
