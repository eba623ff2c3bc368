"""The options that several ``moverkit bench`` subcommands share."""

from __future__ import annotations

from pathlib import Path


def data_options(parser, what: str = "TSV with columns lp, hypothesis, reference, human (required)") -> None:
    parser.add_argument("--data", type=Path, help=what)
    parser.add_argument("--out", type=Path, help="also write the report here (Markdown)")


def cap_options(parser) -> None:
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument(
        "--avx2",
        action="store_true",
        help="run limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2), in a subprocess",
    )
    cap.add_argument("--strict-avx2", action="store_true", help="as --avx2, and MKL and FBGEMM limited to AVX2 too")


def environment_caps(args) -> dict[str, str] | None:
    """The environment caps of --avx2 / --strict-avx2, or None to run in this process."""
    from moverkit.bench.quantized import AVX2_ENV, STRICT_AVX2_ENV

    return AVX2_ENV if args.avx2 else STRICT_AVX2_ENV if args.strict_avx2 else None


def rerun_capped(name: str, args, caps: dict[str, str]) -> int:
    """``moverkit bench <name>`` again in a subprocess limited by ``caps`` (:func:`environment_caps`),
    with the options ``bench precision`` and ``bench overhead`` share: --data, --rounds, --limit,
    --metrics and --out."""
    from moverkit.bench.precision import run_capped

    argv = ["bench", name, "--data", str(args.data), "--rounds", str(args.rounds)]
    argv += ["--limit", str(args.limit)] if args.limit else []
    argv += ["--metrics", *args.metrics] if args.metrics else []
    argv += ["--out", str(args.out)] if args.out else []
    return run_capped(argv, caps)
