"""What every ``moverkit bench`` command shares: its options and its opening.

Each benchmark module of this package that is a command has ``register(which)`` (its parser, added
to ``moverkit bench``'s subparsers by :mod:`moverkit.cli.bench`) and ``command(args)`` (what it
runs); :data:`COMMANDS` lists them. A command on the judgments TSV opens with :func:`judgments`
(and, where it takes ``--avx2``, :func:`capped` first).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from moverkit.judgments import Judgments, read_judgments
from moverkit.lines import check_out
from moverkit.options import METRICS, positive_int, require_data, rounds

COMMANDS = (
    "correlation",
    "speed",
    "precision",
    "quantized",
    "cache",
    "scale",
    "shuffled",
    "system_level",
    "compare_cost",
    "combination",
    "tune",
    "overhead",
    "gpu",
    "host",
)
"""The benchmark modules that are commands, in the order ``moverkit bench --help`` lists them (each
module's name is its command's)."""


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


def capped_options(parser, *, measured: str, rounds_default: int) -> None:
    """The options of a command that :func:`capped` can run again limited to AVX2 (``bench
    precision``, ``bench overhead``): ``--limit``, ``--metrics`` (what the command does to them:
    ``measured``), ``--rounds`` and the caps, the options :func:`capped` passes on."""
    parser.add_argument("--limit", type=positive_int, help="use only the first N rows")
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help=f"metrics to {measured} (default: all five)")
    parser.add_argument(
        "--rounds", type=rounds, default=rounds_default, help="interleaved timed rounds (median reported)"
    )
    cap_options(parser)


AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
"""The two variables of issue 24 that cap oneDNN and ATen's own kernels at AVX2."""
STRICT_AVX2_ENV = {**AVX2_ENV, "MKL_ENABLE_INSTRUCTIONS": "AVX2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}
"""Also caps MKL (torch's float32 matrix products) and FBGEMM (torch's int8 Linear)."""


def environment_caps(args) -> dict[str, str] | None:
    """The environment caps of --avx2 / --strict-avx2, or None to run in this process."""
    return AVX2_ENV if args.avx2 else STRICT_AVX2_ENV if args.strict_avx2 else None


def capped(args) -> int | None:
    """With --avx2 or --strict-avx2, ``moverkit bench <command>`` again in a subprocess limited by
    their caps (:func:`environment_caps`), with the options ``bench precision`` and ``bench
    overhead`` share (--data, --rounds, --limit, --metrics, --out): its exit status. Else None:
    the command runs here."""
    caps = environment_caps(args)
    if caps is None:
        return None
    require_data(args)
    argv = ["bench", args.bench, "--data", str(args.data), "--rounds", str(args.rounds)]
    argv += ["--limit", str(args.limit)] if args.limit else []
    argv += ["--metrics", *args.metrics] if args.metrics else []
    argv += ["--out", str(args.out)] if args.out else []
    return run_capped(argv, caps)


def run_capped(argv: list[str], caps: Mapping[str, str]) -> int:
    """``moverkit ARGV`` in a subprocess whose environment adds ``caps`` (such as
    :data:`AVX2_ENV`): the caps are read when torch loads, so a process that has loaded it cannot
    cap itself. Returns the subprocess's exit status."""
    return subprocess.run([sys.executable, "-m", "moverkit.cli", *argv], env={**os.environ, **caps}).returncode


def judgments(args, *outputs: str, limit: bool = True) -> Judgments:
    """The opening of a command on the judgments TSV: ``--data`` required; ``--out``, then the
    command's other ``outputs`` (``"json"``, ``"scores_cache"``: the options' names) each checked
    against ``--data`` and the outputs before it (no output overwrites an input or another output);
    then the judgments read: the first ``--limit`` rows where the command takes ``--limit`` (and
    ``limit``)."""
    require_data(args)
    taken = [args.data]
    for name in ("out", *outputs):
        path = getattr(args, name)
        check_out(path, list(taken), f"--{name.replace('_', '-')}")
        taken.append(path)
    return read_judgments(args.data, limit=getattr(args, "limit", None) if limit else None)
