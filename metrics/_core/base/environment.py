"""What a metric call reads from its surroundings: read once, when the call opens, and held for it.

:func:`read_environment` is the one function that reads the variables of a metric call, and
:func:`call_environment` holds its snapshot for the call (a :class:`contextvars.ContextVar`, so
that each thread's and each context's call has its own); :func:`current_environment` is what the
code of a call reads. The memory budget's two setters, for the process and for a block, live here
too: they are what a call's budget is read from.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from moverkit._core.base.sizes import parse_size, size_from_env

# What a metric call reads from its surroundings, read once, when the call opens.
#
# read_environment is the one function that reads them: the memory budget (a temporary_memory_budget
# block's, else set_memory_budget's, else MOVERKIT_MEMORY_BUDGET, "1GB"), MOVERKIT_TOKENIZE_AHEAD
# (1 or 0: tokenize the next part of a call in a thread), MOVERKIT_PLAN (cuda: plan a CPU call as on
# a CUDA device), MOVERKIT_CENTERING_CACHE and XDG_CACHE_HOME (where a fitted corpus mean is kept)
# and HF_HUB_OFFLINE (1: models are read from the local cache only). A call checks them together
# when it opens, before any model loads, each bad value a ValueError that names its variable; it
# then runs with that snapshot (call_environment), whatever the process or another thread sets
# meanwhile. Code outside a metric call (fit_centering, tuning, the benches) reads them as they are.
# Process settings, read once for the process and not per call, are listed in docs/architecture.md
# ("The environment").


MEMORY_BUDGET_VARIABLE = "MOVERKIT_MEMORY_BUDGET"
TOKENIZE_AHEAD_VARIABLE = "MOVERKIT_TOKENIZE_AHEAD"
PLAN_VARIABLE = "MOVERKIT_PLAN"
CENTERING_CACHE_VARIABLE = "MOVERKIT_CENTERING_CACHE"
"""Folder where a corpus mean fitted for a model no statistic ships for is kept
(:func:`~moverkit._core.centering.fit.default_corpus_stats`; default
``$XDG_CACHE_HOME/moverkit/centering``, else ``~/.cache/moverkit/centering``); ``off`` keeps
nothing on disk."""
HUB_OFFLINE_VARIABLE = "HF_HUB_OFFLINE"

_process_budget: int | None = None
_BUDGET_LOCK = threading.Lock()
_BLOCK_BUDGET: contextvars.ContextVar[int | None] = contextvars.ContextVar("moverkit_memory_budget", default=None)


def set_memory_budget(size) -> None:
    """Bound the token vectors a metric call holds at once (``"1GB"``, ``"512MB"``, bytes; ``None``
    restores the default: ``MOVERKIT_MEMORY_BUDGET`` or the device's share,
    :func:`~moverkit._core.call.streaming.memory_budget`), for the calls every thread opens from now
    on but those in a :func:`temporary_memory_budget` block. Calls over the budget run in chunks
    (:mod:`~moverkit._core.call.streaming`); scores do not change."""
    global _process_budget
    size = None if size is None else parse_size(size)
    with _BUDGET_LOCK:
        _process_budget = size


@contextlib.contextmanager
def temporary_memory_budget(size) -> Iterator[None]:
    """The budget ``size`` (as :func:`set_memory_budget`) for the calls opened in the block, in this
    thread (context: a :class:`contextvars.ContextVar`; ``None``: the budget as it is); it outranks
    the process's, and no other thread's calls see it, so blocks of several threads (or nested
    ones) each restore their own (a bench's run under its own budget)."""
    token = _BLOCK_BUDGET.set(_BLOCK_BUDGET.get() if size is None else parse_size(size))
    try:
        yield
    finally:
        _BLOCK_BUDGET.reset(token)


@dataclass(frozen=True)
class Environment:
    """What a call reads from its surroundings (:func:`read_environment`): its ``memory_budget`` in
    bytes and ``tokenize_ahead`` (``None``: unset, the defaults decide), whether a CPU call runs
    under the ``cuda_plan``, the ``centering_cache`` folder (``None``: nothing kept on disk) and
    whether the Hugging Face Hub is ``hub_offline``."""

    memory_budget: int | None = None
    tokenize_ahead: bool | None = None
    cuda_plan: bool = False
    centering_cache: str | None = None
    hub_offline: bool = False


def read_environment() -> Environment:
    """The settings a call reads, checked (see the comment above :data:`MEMORY_BUDGET_VARIABLE`):
    the one place that reads the variables of a metric call."""
    ahead = os.environ.get(TOKENIZE_AHEAD_VARIABLE, "").strip()
    if ahead not in ("", "0", "1"):
        raise ValueError(
            f"the environment variable {TOKENIZE_AHEAD_VARIABLE} must be 1 or 0, got {ahead!r} (unset it for the default)"
        )
    plan = os.environ.get(PLAN_VARIABLE, "").strip().lower()
    if plan not in ("", "cpu", "cuda"):
        raise ValueError(
            f"the environment variable {PLAN_VARIABLE} must be cuda or cpu, got {plan!r} (unset it for the default)"
        )
    budget = _BLOCK_BUDGET.get()
    if budget is None:
        with _BUDGET_LOCK:
            budget = _process_budget
    if budget is None and os.environ.get(MEMORY_BUDGET_VARIABLE, "").strip():
        budget = size_from_env(MEMORY_BUDGET_VARIABLE, 0)
    return Environment(
        memory_budget=budget,
        tokenize_ahead=None if ahead == "" else ahead == "1",
        cuda_plan=plan == "cuda",
        centering_cache=_centering_cache(),
        hub_offline=os.environ.get(HUB_OFFLINE_VARIABLE, "").strip() == "1",
    )


def _centering_cache() -> str | None:
    folder = os.environ.get(CENTERING_CACHE_VARIABLE)
    if folder is not None and folder.strip().lower() in {"", "off", "0", "none"}:
        return None
    if folder is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "moverkit", "centering")
    return folder


_CALL: contextvars.ContextVar[Environment | None] = contextvars.ContextVar("moverkit_call_environment", default=None)


@contextlib.contextmanager
def call_environment(environment: Environment) -> Iterator[None]:
    """Run the block (a metric call) with ``environment``, the snapshot its opening read."""
    token = _CALL.set(environment)
    try:
        yield
    finally:
        _CALL.reset(token)


def current_environment() -> Environment:
    """The running call's snapshot; outside a call, the settings as they are now."""
    return _CALL.get() or read_environment()
