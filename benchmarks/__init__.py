"""Benchmarks behind ``moverkit bench``: a harness, not tests.

A package of the repository, beside ``metrics/`` (the ``moverkit`` package), not in the wheel:
it re-creates peers' code, writes process-wide state while a peer runs (``sys.modules``,
``os.environ``) and reads the repository's ``data/``; nothing that scores needs it. ``moverkit
bench`` finds it in the checkout (:func:`moverkit.cli.bench.benchmarks_root`); a child process of
a benchmark finds it through :func:`benchmarks._shared.child_environment`.

* ``correlation``: per-group Pearson r and Kendall tau between metric scores and human judgments
  (WMT17 segment-level DA: per language pair, then the average), the layout of the papers' tables.
* ``speed``: metrics timed side by side in one process against a floor (the encoder alone) and
  peers (reference implementations), reported as ratios.

Every benchmark with a command of its own is one module here, named in :data:`COMMANDS`, which owns
the command's parser (``register``) and run (``command``) beside the benchmark itself:
``correlation``, ``speed``, ``precision`` (float32 against bfloat16), ``quantized``, ``cache`` (an
evaluation loop with the cache of token clouds), ``scale`` (time and peak memory as the number of
pairs grows), ``shuffled`` (true reference against another pair's), ``system_level``,
``compare_cost``, ``combination``, ``tune``, ``overhead``, ``gpu``, ``host``, ``encoders``,
``rewards`` and ``serve`` (the metric server under concurrent clients). No benchmark
module imports another: what several share (a command's opening, timing, floors, the ISA line)
is in ``_shared``.

Every metric contributes rows from its own module in this package (``benchmarks/<metric>.py``,
named in :data:`ROW_MODULES`), which defines ``CORRELATION_ROWS`` (a list of :class:`CorrelationRow`)
and ``SPEED_SUITES`` (a list of :class:`SpeedSuite`); :func:`rows_and_suites` collects them.

Both lists name modules rather than scan the folder: ``--help`` lists the commands in their
order, not the files', and building the parser of ``moverkit`` imports the commands alone, not
the rows' modules, which load torch and the peers' packages.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from dataclasses import dataclass, field

from moverkit.facts.specs import SPECS, spec

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
    "encoders",
    "rewards",
    "serve",
)
"""The benchmark modules that are commands, in the order ``moverkit bench --help`` lists them (each
command is its module's name, ``_`` written ``-``)."""

ROW_MODULES = tuple(sorted((*SPECS, "long_documents")))
"""The modules of correlation rows and speed suites, in the order the tables list them: each metric's
own (named as in :data:`~moverkit.facts.specs.SPECS`) and ``long_documents``, alphabetically."""

MAIN_OUTPUTS = {name: s.main for name, s in SPECS.items()}
"""The output each metric is judged on by the single-purpose benchmarks (its spec's ``main``)."""


@dataclass(frozen=True)
class CorrelationRow:
    """One line of a correlation table: ``output`` of metric ``metric`` computed with ``kwargs``.
    ``higher_is_better`` is the metric's direction (:mod:`moverkit.facts.specs`): False for a distance,
    whose correlations with humans are negative.
    ``inputs``, when given, turns the benchmark's judgments into the ones this row scores (e.g.
    long documents made of consecutive segments: :mod:`benchmarks.long_documents`)."""

    label: str
    metric: str
    output: str
    kwargs: dict = field(default_factory=dict)
    inputs: Callable | None = None

    @property
    def higher_is_better(self) -> bool:
        return spec(self.metric).higher_is_better


@dataclass(frozen=True)
class SpeedSuite:
    """Things timed side by side on the same (predictions, references).

    ``key`` names the suite on the command line (``moverkit bench speed --suite KEY``); ``name``
    heads its report.
    ``contenders`` maps a label to a factory ``factory(predictions, references) -> run``: the
    factory does the untimed set-up (loading models, one warm-up call), ``run()`` is what is timed.
    ``ratios`` lists ``(numerator, denominator, target)``: the report gives
    time(numerator) / time(denominator) and whether it meets ``target``, a bound such as
    ``">= 1.0"`` or ``"<= 1.15"`` (``None``: no target). ``inputs``, when given, turns the
    benchmark's (predictions, references) into the texts this suite times, e.g. paragraphs.
    """

    key: str
    name: str
    contenders: dict[str, Callable]
    ratios: list[tuple[str, str, str | None]]
    inputs: Callable | None = None


def benchmark(name: str) -> types.ModuleType:
    """The module of benchmark ``name`` (one of :data:`COMMANDS` or :data:`ROW_MODULES`)."""
    return importlib.import_module(f"{__name__}.{name}")


def rows_and_suites() -> tuple[list[CorrelationRow], list[SpeedSuite]]:
    """All rows and suites of :data:`ROW_MODULES`, in that order."""
    rows, suites = [], []
    for name in ROW_MODULES:
        module = benchmark(name)
        rows += module.CORRELATION_ROWS
        suites += module.SPEED_SUITES
    return rows, suites
