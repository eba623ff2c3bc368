"""The ``moverkit`` command: score files, compare systems, serve a metric over HTTP, fit a centering
statistic or a baseline, fine-tune, run the benchmarks, publish the Spaces.

    moverkit score --metric centered_bertscore --predictions hyp.txt --references ref.txt --out scores.jsonl
    moverkit compare --references ref.txt --system A=a.txt --system B=b.txt --metric twmd --json out.json
    moverkit fit-centering --texts corpus.txt --out stats.npz
    moverkit fit-baseline --texts corpus.txt --out baseline.csv
    moverkit bench correlation --data data/wmt17_seg_da_to_en.tsv
    moverkit serve --metric twmd --replicas 2
    moverkit publish --dry-run OUTDIR

One module per subcommand, each with ``register(commands)`` (its parser) and ``run(args)``; heavy
imports (torch, evaluate, the benchmarks) happen in ``run``, so ``--help`` and ``--version`` stay
quick. Input files hold one text per line (:func:`moverkit.formats.lines.split_lines`). A mistake of the
user (a missing or empty file, files of different lengths, an argument out of range or that the
metric refuses, an output that is a folder or an input) prints ``moverkit: error: ...`` and exits
with status 2, as argparse does, before any scoring; there is no traceback. Outputs are written
whole at the end (:func:`moverkit.formats.lines.write_atomic`): a failed command leaves none.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = (
    "score",
    "compare",
    "mbr",
    "serve",
    "tune",
    "combine",
    "fit_centering",
    "fit_baseline",
    "finetune",
    "bench",
    "publish",
)
"""The subcommand modules, in the order ``--help`` lists them."""


class StoreOnce(argparse._StoreAction):
    """argparse's ``store`` (every option that takes a value), refusing the option given again with
    another value: argparse alone keeps the last one, so ``--centering batch --centering none`` or
    ``--out a.csv --out b.csv`` ran with one value silently dropped. The same value twice is kept.
    The options already given are recorded in the namespace (``_given``, removed by :func:`main`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given", {})
        if self.dest in given and given[self.dest][1] != values:
            first, value = given[self.dest]
            raise argparse.ArgumentError(
                self, f"given twice with two values: {first} {value!r} and {option_string} {values!r}; give it once"
            )
        given[self.dest] = (option_string, values)
        super().__call__(parser, namespace, values, option_string)


class Repeat(argparse._AppendAction):
    """``action="repeat"``: an option given once per value (``--arg a=1 --arg b=2``), its values
    in a list that is empty when it is not given (argparse's ``append`` with ``default=[]``)."""

    def __init__(self, *args, default=None, **kwargs):
        super().__init__(*args, default=[] if default is None else default, **kwargs)


class Parser(argparse.ArgumentParser):
    """The parser of ``moverkit`` and of each subcommand (``add_subparsers`` makes its own class):
    an option that takes a value takes it once (:class:`StoreOnce`), or any number of times with
    ``action="repeat"`` (:class:`Repeat`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)
        self.register("action", "repeat", Repeat)


def build_parser() -> argparse.ArgumentParser:
    from moverkit.facts.version import __version__

    parser = Parser(
        prog="moverkit", description="Score files, compare systems, fit statistics, fine-tune, benchmark, publish."
    )
    parser.add_argument("--version", action="version", version=f"moverkit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(commands)
    return parser


QUIET_LOADING = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
"""What the command line sets for its own process unless the user set it: no weight-loading bars
and no load reports of transformers in a command's output (the library itself changes no
process setting; a program may)."""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    vars(args).pop("_given", None)
    for variable, value in QUIET_LOADING.items():
        os.environ.setdefault(variable, value)  # read when transformers loads, after the parser
    try:
        return args.run(args)
    except (ValueError, TypeError, OSError, ImportError) as err:  # ImportError: an extra not installed
        print(f"moverkit: error: {err}", file=sys.stderr)
        return 2
