"""``moverkit fit-centering``: the corpus mean of a file of texts, for ``centering="corpus"``."""

from __future__ import annotations

from pathlib import Path

from moverkit.formats.options import DTYPES, add_encoder_options


def register(commands) -> None:
    fit = commands.add_parser("fit-centering", help="fit a corpus centering statistic on a file of texts")
    fit.add_argument("--texts", required=True, type=Path, help="one text per line")
    fit.add_argument("--out", required=True, type=Path, help="where to save the statistic (.npz)")
    fit.add_argument(
        "--level",
        choices=("token", "sentence"),
        help="token vectors (default; centered_bertscore, twmd, moverscore, lazy_emd) or sentence vectors (sbertscore)",
    )
    fit.add_argument("--lang", help="with --level sentence: the language of the sentence splitter (default: en)")
    add_encoder_options(fit)
    fit.add_argument(
        "--dtype",
        choices=DTYPES,
        help="precision of the encoder's forward pass: the one the scores will use (default: float32)",
    )
    fit.set_defaults(run=run)


def run(args) -> int:
    import moverkit
    from moverkit.formats.lines import check_out, read_texts

    if args.lang is not None and args.level != "sentence":
        raise ValueError("--lang is used only with --level sentence (it picks the sentence splitter)")
    check_out(args.out, [args.texts])
    texts = read_texts(args.texts)
    if not any(text.strip() for text in texts):
        raise ValueError(
            f"{args.texts} holds only blank lines; the corpus mean needs at least one non-empty text (one per line)"
        )
    given = {"level": args.level, "lang": args.lang, "batch_size": args.batch_size, "dtype": args.dtype}
    kwargs = {key: value for key, value in given.items() if value is not None}
    stats = moverkit.fit_centering(
        texts, model_type=args.model, num_layers=args.num_layers, device=args.device, verbose=True, **kwargs
    )
    stats.save(args.out)  # whole or not at all
    if args.level == "sentence":
        print(f"{stats.model}: mean of {stats.n_tokens} sentences of {stats.n_texts} texts")
    else:
        print(f"{stats.model} layer {stats.layer}: mean of {stats.n_tokens} tokens of {stats.n_texts} texts")
    print(f"digest\t{stats.digest}\nsaved to {args.out}")
    return 0
