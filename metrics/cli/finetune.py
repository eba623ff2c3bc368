"""``moverkit finetune``: fine-tune TWMD's encoder on human judgments (:mod:`moverkit.finetune`).
The choices are checked by :func:`moverkit.finetune.finetune` itself, so that building the parser
imports no torch."""

from __future__ import annotations

from pathlib import Path


def register(commands) -> None:
    """Add ``moverkit finetune`` to the CLI's subparsers."""
    parser = commands.add_parser(
        "finetune", help="fine-tune the encoder of twmd on human judgments (Chen et al. 2020, Section 6)"
    )
    parser.add_argument(
        "--data", required=True, type=Path, help="TSV with a header: group, prediction, reference, human score"
    )
    parser.add_argument("--out", required=True, type=Path, help="folder to write the fine-tuned model and its card to")
    parser.add_argument(
        "--model", help="base model, Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)"
    )
    parser.add_argument(
        "--num-layers", type=int, help="layer to train and keep (default: tuned per model, else the last)"
    )
    parser.add_argument("--variant", default="twmd", help="twmd, trwmd, sbert or cka (default: twmd)")
    parser.add_argument("--temperature", type=float, help="T of twmd/trwmd (default: the paper's for the centering)")
    parser.add_argument("--sinkhorn-iterations", type=int, default=1)
    parser.add_argument(
        "--centering",
        default="batch",
        help="none, dim, sentence or batch, the centering trained under (default: batch)",
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="AdamW's, in (0, 1] (default: 2e-5)")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per training step")
    parser.add_argument("--validation-split", type=float, default=0.1, help="share of rows held out (0: none)")
    parser.add_argument("--standardize", default="group", help="z-scores per group, global or none (default: group)")
    parser.add_argument(
        "--target-mean", type=float, default=0.5, help="mean of the training targets, in [-1, 1] (default: 0.5)"
    )
    parser.add_argument("--target-std", type=float, default=0.15)
    parser.add_argument("--patience", type=int, default=1, help="epochs without validation gain before stopping")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    parser.add_argument("--max-length", type=int, help="truncate texts to this many tokens")
    parser.add_argument("--prediction-column", default="hypothesis")
    parser.add_argument("--reference-column", default="reference")
    parser.add_argument("--score-column", default="human")
    parser.add_argument("--group-column", default="lp")
    parser.add_argument("--keep-checkpoints", action="store_true")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an earlier run into OUT from its last checkpoint (OUT/checkpoints)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="write into a non-empty OUT that no earlier run wrote, replacing its files of the model's names "
        "(nothing else is deleted)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args) -> int:
    from moverkit.finetune import finetune, fixed

    result = finetune(
        args.data,
        args.out,
        model_type=args.model,
        num_layers=args.num_layers,
        variant=args.variant,
        temperature=args.temperature,
        sinkhorn_iterations=args.sinkhorn_iterations,
        centering=args.centering,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        validation_split=args.validation_split,
        standardize=args.standardize,
        target_mean=args.target_mean,
        target_std=args.target_std,
        early_stopping_patience=args.patience,
        seed=args.seed,
        device=args.device,
        max_length=args.max_length,
        prediction_column=args.prediction_column,
        reference_column=args.reference_column,
        score_column=args.score_column,
        group_column=args.group_column,
        keep_checkpoints=args.keep_checkpoints,
        resume=args.resume,
        overwrite=args.overwrite,
        verbose=not args.quiet,
    )
    for label, figures in (("before", result.validation_before), ("after", result.validation_after)):
        if figures is not None:
            print(
                f"validation {label}\tpearson {fixed(figures['pearson'], '.4f')}\t"
                f"kendall {fixed(figures['kendall'], '.4f')}"
            )
    print(f"seconds per epoch\t{fixed(result.seconds_per_epoch, '.1f')}")
    print(f"model written to {result.path} (load it with model_type={result.path!r})")
    return 0
