"""Ray Serve's path to moverkit's server (``pip install "moverkit[serve]"``): ``serve run
moverkit.serve:app`` (the default server), ``serve run moverkit.serve:build metric=twmd`` and
``import_path: moverkit.serve:build`` in a Serve config file, and the names users import, from
:mod:`moverkit.integrations.serve` (the door and its documentation). A permanent path: Serve's
commands and config files name it."""

from moverkit.integrations.serve import (
    END_MARKERS,
    BadRequest,
    Batching,
    Limits,
    MetricServer,
    application,
    build,
    start,
    stop,
)

__all__ = ["END_MARKERS", "BadRequest", "Batching", "Limits", "MetricServer", "application", "build", "start", "stop"]


def __getattr__(name: str):
    """``moverkit.serve.app``, the default server (``serve run moverkit.serve:app``), built when
    first asked for, so that importing this module loads no model and checks nothing."""
    if name == "app":
        globals()["app"] = build({})
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
