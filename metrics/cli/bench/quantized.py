"""``moverkit bench quantized``: int8 and ONNX Runtime paths of the encoder vs float32: speed,
|delta F1|, Pearson (:mod:`moverkit.bench.quantized`)."""

from __future__ import annotations

from ..options import emit, positive_int, require_data, rounds
from .options import cap_options, data_options, environment_caps


def register(which) -> None:
    quantized = which.add_parser(
        "quantized", help="int8 and ONNX Runtime paths of the encoder vs float32: speed, |delta F1|, Pearson"
    )
    data_options(quantized)
    quantized.add_argument("--n-texts", type=positive_int, default=1200, help="texts timed per path (half references)")
    quantized.add_argument("--n-pairs", type=positive_int, default=1400, help="pairs scored per path")
    quantized.add_argument("--rounds", type=rounds, default=2, help="interleaved timed rounds (best kept)")
    cap_options(quantized)
    quantized.set_defaults(run=run)


def run(args) -> int:
    from moverkit.bench import quantized
    from moverkit.bench.precision import run_capped
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    sizes = ["--n-texts", str(args.n_texts), "--n-pairs", str(args.n_pairs), "--rounds", str(args.rounds)]
    caps = environment_caps(args)
    if caps:
        out = ["--out", str(args.out)] if args.out else []
        return run_capped(["bench", "quantized", "--data", str(args.data), *sizes, *out], caps)
    report = quantized.report(str(args.data), n_texts=args.n_texts, n_pairs=args.n_pairs, rounds=args.rounds)
    return emit(report, args.out)
