"""``moverkit bench ...``: the benchmarks behind the README's and the cards' figures
(:mod:`moverkit.bench`), one subcommand each.

One module per subcommand, as in :mod:`moverkit.cli`: each has ``register(which)`` (its parser,
added to ``moverkit bench``'s subparsers) and ``run(args)``; options.py holds the options several
share. A new benchmark is a module here and its name in :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import importlib

SUBCOMMANDS = (
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
)
"""The subcommand modules, in the order ``moverkit bench --help`` lists them."""


def register(commands) -> None:
    bench = commands.add_parser("bench", help="benchmarks: correlation with humans, speed, system level, ...")
    which = bench.add_subparsers(dest="bench", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(which)
