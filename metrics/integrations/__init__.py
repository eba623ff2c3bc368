"""The doors of moverkit to other libraries, in one room (issue 68), as ``transformers`` keeps its
integrations in ``transformers/integrations/``: what every door stands on, and the doors.

- :mod:`~moverkit.integrations.adapter`: the one policy of every door (whole-corpus and slice
  doors), the arguments a door passes, its output, its device, the call itself, and what a door
  builds once and keeps; :mod:`~moverkit.integrations.rows`: the rows a door reads and writes;
  :mod:`~moverkit.integrations.registry`: every metric as one object (spec, function, defaults).
- The doors, each its framework's shape and nothing else: :mod:`~moverkit.integrations.evaluate_modules`
  (the evaluate modules' base), :mod:`~moverkit.integrations.dataset_map` (``moverkit.map_scores``),
  :mod:`~moverkit.integrations.ray`, :mod:`~moverkit.integrations.torchmetrics`,
  :mod:`~moverkit.integrations.lighteval`, :mod:`~moverkit.integrations.lm_eval`,
  :mod:`~moverkit.integrations.rewards` (``moverkit.reward_function``),
  :mod:`~moverkit.integrations.verl`, :mod:`~moverkit.integrations.mbr` (``moverkit.mbr_select``),
  :mod:`~moverkit.integrations.serve` and its requests, read without Ray
  (:mod:`~moverkit.integrations.serve_requests`).

The paths users type in their frameworks' configurations stay at the top of the package, as thin
modules that re-export a door's public names: ``moverkit.verl`` (verl's ``pkg://moverkit.verl``),
``moverkit.lm_eval`` (importing it registers the metrics with lm-eval), ``moverkit.ray``,
``moverkit.torchmetrics``, ``moverkit.lighteval`` and ``moverkit.serve`` (``serve run
moverkit.serve:app``). The other paths of 0.3.0 (``moverkit.registry``, ``evaluate_modules``,
``dataset_map``, ``rewards``, ``mbr``) warn for one release (:func:`moved_here`). This package's
``__init__`` imports no torch: ``moverkit --help`` reads the doors' commands without it.
"""

from __future__ import annotations

REMOVED_IN = "0.5.0"
"""The release that removes the old paths of the modules 0.4.0 moved into this room."""


def moved_here(old: str) -> None:
    """Make the module being imported as ``old`` (``moverkit.registry``, from the package's
    ``_moved/`` folder) the module of this room of the same name: a ``DeprecationWarning`` naming the
    new path, at the user's import line, then the very module of the new path in its place, so
    every object is the same one. A second import finds it in ``sys.modules``, silently."""
    import importlib
    import sys
    import warnings

    new = f"{__name__}.{old.rpartition('.')[2]}"
    # stacklevel 3: past this function and the old module; the import machinery's frames are skipped.
    warnings.warn(f"{old} moved to {new} in 0.4.0; the old path goes in {REMOVED_IN}", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)


def missing_extra(err: ModuleNotFoundError, extra: str) -> ModuleNotFoundError:
    """The error of a door whose framework is not installed: ``err``'s, with the extra of moverkit
    that installs it (``pip install "moverkit[serve]"``), raised by the door's framework imports."""
    return ModuleNotFoundError(
        f'{err.msg}: this door of moverkit needs it: pip install "moverkit[{extra}]"', name=err.name
    )
