"""The command line's shared options: argument types with bounds, the encoder options, the output.

Read by moverkit's commands (:mod:`moverkit.cli`) and by its benchmarks (``benchmarks/`` of the repository),
each of which registers its own ``moverkit bench`` subcommand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from moverkit.facts.specs import SPECS
from moverkit.formats.lines import write_atomic
from moverkit.formats.settings import same_value

METRICS = tuple(SPECS)
"""The metrics' choices: the registry's names, from its light table (the parser loads no torch)."""

SENTENCE_LEVEL = tuple(name for name, spec in SPECS.items() if spec.level == "sentence")
"""The metrics of sentence vectors (their spec's ``level``), which take no ``sentence`` centering: it
would leave every vector zero (``moverkit._core.centering.check_centering``)."""

DTYPES = ("float32", "bfloat16", "float16", "auto")


def key_value(text: str) -> tuple[str, object]:
    """One ``--arg KEY=VALUE`` (``moverkit score``, ``moverkit fit-baseline``): the value read as JSON
    where it parses (``true``, ``0.2``, ``["the"]``, ``null``), else taken as a string
    (``variant=trwmd``); a KEY that is no argument name is a ``ValueError``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise ValueError(
            f"--arg takes KEY=VALUE, got {text!r}, which is not KEY=VALUE (e.g. variant=trwmd, idf=true, temperature=0.2)"
        )
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def given_arguments(options: dict[str, tuple[str, object]], items: list[str]) -> dict:
    """The arguments a command was given: its named options (``{argument: (flag, value)}``, a value
    of ``None`` not given) and its ``--arg KEY=VALUE`` items, as one ``{argument: value}``. An
    argument given twice with two values (``--arg temperature=0.1 --arg temperature=0.2``, or
    ``--centering batch --arg centering=none``) is a ``ValueError`` naming both: no value silently
    wins over another."""
    given = {name: (f"{flag} {value!r}", value) for name, (flag, value) in options.items() if value is not None}
    for item in items:
        key, value = key_value(item)
        if key in given and not same_value(given[key][1], value):
            raise ValueError(f"{key} is given twice with two values: {given[key][0]} and --arg {item!r}; give it once")
        given[key] = (f"--arg {item!r}", value)
    return {name: value for name, (_, value) in given.items()}


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def natural_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


MAX_ROUNDS = 1_000
"""The most timed rounds a benchmark takes (``--rounds``, ``--repeats``): each is a whole pass."""


def rounds(text: str) -> int:
    """An argparse type: a number of timed rounds, from 1 to :data:`MAX_ROUNDS`."""
    value = _int_at_least(text, 1)
    if value > MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"{value} is more than the {MAX_ROUNDS:,} rounds a benchmark takes")
    return value


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} is below {low}")
    return value


def add_encoder_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--num-layers", type=int, help="layer to use (default: tuned per model, else the last)")
    parser.add_argument("--batch-size", type=positive_int, help="texts per forward pass")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")


def add_metric_options(parser: argparse.ArgumentParser) -> None:
    """:func:`add_encoder_options`, and ``--dtype``, ``--centering`` and ``--arg`` (any other
    argument of the metric): the options of a command that runs one metric with its settings
    (``moverkit mbr``, ``moverkit serve``), read back by :func:`encoder_options` and
    :func:`given_arguments`."""
    add_encoder_options(parser)
    parser.add_argument("--dtype", choices=DTYPES, help="precision of the encoder's forward pass (default: float32)")
    parser.add_argument(
        "--centering",
        help=f"none, dim, sentence (not {', '.join(SENTENCE_LEVEL)}) or corpus (default: the metric's)",
    )
    parser.add_argument(
        "--arg",
        action="repeat",
        metavar="KEY=VALUE",
        help="any other argument of the metric (VALUE read as JSON when it parses, e.g. temperature=0.1)",
    )


def encoder_options(args) -> dict[str, tuple[str, object]]:
    """The options of :func:`add_encoder_options` (and ``--dtype``, ``--centering`` where the
    command has them) as ``{argument: (option, value)}``, the form a command's ``given_arguments``
    reads: the metric's argument, the option that gave it, and its value (``None``: not given)."""
    options = {
        "model_type": ("--model", args.model),
        "num_layers": ("--num-layers", args.num_layers),
        "batch_size": ("--batch-size", args.batch_size),
        "device": ("--device", args.device),
    }
    for argument, option in (("dtype", "--dtype"), ("centering", "--centering")):
        if hasattr(args, argument):
            options[argument] = (option, getattr(args, argument))
    return options


def require_data(args) -> None:
    if args.data is None:
        raise ValueError(
            f"bench {args.bench}: --data is required (the WMT17 judgments TSV, data/wmt17_seg_da_to_en.tsv)"
        )


def emit(text: str, out: Path | None) -> int:
    """Print ``text`` and, with ``out``, write it there whole."""
    print(text)
    if out:
        write_atomic(out, text + "\n")
    return 0


def progress(line: str) -> None:
    """A line of progress on stderr, as each part of a long command ends."""
    print(line, file=sys.stderr, flush=True)
