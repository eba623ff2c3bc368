"""One way to warn: attributed to the user's line, not to moverkit's insides.

A fixed ``stacklevel`` points at the right frame only along one call path; the same warning is
reached through ``compute`` (evaluate's wrapper and the module's ``_compute``), the functional
API, the streaming wrapper and the CLI, each a different depth. :func:`warn_user` walks the stack
instead and attributes the warning to the first frame outside moverkit and evaluate (as pandas'
``find_stack_level`` does), so ``python -W error::UserWarning`` and warning filters by module see
the caller's file and line.

A server that scores for several visitors at once (a Space: Gradio runs each press in a worker
thread) shows each its own call's warnings with :func:`collected_warnings`, not with
:class:`warnings.catch_warnings`, which swaps the process's one list of filters and is not
thread-safe: inside its block, :func:`warn_user` appends to the block's list, in that thread
(context: a :class:`contextvars.ContextVar`), instead of warning, so each thread gets its own
warnings and no other's, and the filters are neither read nor changed.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import warnings
from collections.abc import Iterator

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
"""The moverkit package: frames inside it are not the user's."""

_INTERNAL_PACKAGES = ("moverkit", "evaluate", "evaluate_modules")
"""Top-level module names whose frames are not the user's: moverkit, evaluate, and the copies of
the metric scripts that ``evaluate.load`` keeps in its modules cache (``evaluate_modules``). Read
from each frame's ``__name__``, which also covers code a module generates (a dataclass's
``__init__`` has no file of its own), without importing evaluate here."""


def _is_internal(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name.partition(".")[0] in _INTERNAL_PACKAGES or os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR
    )


def stack_level() -> int:
    """The ``stacklevel`` for :func:`warnings.warn` called from the function that calls this one,
    that names the first frame outside moverkit and evaluate."""
    frame = inspect.currentframe().f_back  # the caller of stack_level, i.e. warn_user
    level = 1
    while frame is not None and _is_internal(frame):
        frame = frame.f_back
        level += 1
    return level


class MoverkitWarning(UserWarning):
    """Every warning moverkit gives (a ``UserWarning``): filter on it to silence, or to turn into
    errors, moverkit's warnings alone (``python -W error::moverkit.MoverkitWarning``, or
    ``filterwarnings = ["error::moverkit.MoverkitWarning"]`` in pytest's configuration). moverkit
    itself never changes the process's warnings filters."""


class ConvergenceWarning(MoverkitWarning, RuntimeWarning):
    """An iterative solver stopped at its iteration limit before its tolerance: the scores it gave
    are approximate (a ``RuntimeWarning`` too, as NumPy's and SciPy's)."""


_COLLECTED: contextvars.ContextVar[list[Warning] | None] = contextvars.ContextVar(
    "moverkit_collected_warnings", default=None
)


@contextlib.contextmanager
def collected_warnings() -> Iterator[list[Warning]]:
    """The list of the warnings moverkit gives in the block, in this thread (context), each a
    ``category(message)`` instance, in order; they are gathered there instead of warned (see the
    module doc). Blocks nest: the innermost gathers."""
    collected: list[Warning] = []
    token = _COLLECTED.set(collected)
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


def warn_user(message: str, category: type[Warning] = MoverkitWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the user's code (see the module doc); in
    a :func:`collected_warnings` block, appended to its list instead."""
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append(category(message))
    else:
        warnings.warn(message, category, stacklevel=stack_level())
