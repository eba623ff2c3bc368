"""``moverkit bench ...``: the benchmarks behind the README's and the cards' figures, one subcommand
each. Each is a module of :mod:`moverkit.bench` that owns its parser (``register``) and its run
(``command``); :data:`moverkit.bench.COMMANDS` lists them. A new benchmark is such a module and its
name in that list.
"""

from __future__ import annotations


def register(commands) -> None:
    from moverkit.bench import COMMANDS, benchmark

    bench = commands.add_parser("bench", help="benchmarks: correlation with humans, speed, system level, ...")
    which = bench.add_subparsers(dest="bench", required=True)
    for name in COMMANDS:
        benchmark(name).register(which)
