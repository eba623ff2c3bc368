"""``moverkit bench ...``: the benchmarks behind the README's and the cards' figures, one subcommand
each. They are the ``benchmarks`` package of moverkit's repository, beside ``metrics/``, not in the
wheel (docs/architecture.md, "The wheel"): each benchmark is a module of it that owns its parser
(``register``) and its run (``command``), and ``benchmarks.COMMANDS`` lists them. A new benchmark
is such a module and its name in that list.

From a checkout installed with ``pip install -e .``, the command finds the package next to the
installed ``metrics/`` folder, or in the working directory when it is a checkout
(:func:`benchmarks_root`), and puts the checkout on ``sys.path``; from a plain install elsewhere,
``moverkit bench`` and anything after it (``--help`` included) says where the benchmarks are and
exits with status 2.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HELP = "benchmarks: correlation with humans, speed, system level, ... (from a checkout of the repository)"

NOT_HERE = (
    "moverkit bench: the benchmarks are not in the wheel; they are the benchmarks/ package of moverkit's "
    "repository: clone it, pip install -e . there, then run moverkit bench ..."
)


def benchmarks_root() -> Path | None:
    """The checkout that holds the ``benchmarks`` package: the folder above the installed
    ``metrics/`` (``moverkit``'s own folder in an editable install), else the working directory
    (a checkout installed with ``pip install .``), as ``moverkit publish`` finds its checkout;
    ``None`` where neither holds ``benchmarks/`` beside ``metrics/``."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "benchmarks" / "__init__.py").is_file() and (root / "metrics").is_dir():
            return root
    return None


def register(commands) -> None:
    root = benchmarks_root()
    if root is None:
        # No option is one to this parser (its prefix is no character a command line holds), so
        # that --help, a benchmark's name and its options all reach not_here.
        bench = commands.add_parser("bench", help=HELP, add_help=False, prefix_chars="\0")
        bench.add_argument("words", nargs="*")
        bench.set_defaults(run=not_here)
        return
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    benchmarks = importlib.import_module("benchmarks")
    bench = commands.add_parser("bench", help=HELP)
    which = bench.add_subparsers(dest="bench", required=True)
    for name in benchmarks.COMMANDS:
        benchmarks.benchmark(name).register(which)


def not_here(args) -> int:
    """``moverkit bench ...`` from a plain install: where the benchmarks are, in one line."""
    print(NOT_HERE, file=sys.stderr)
    return 2
