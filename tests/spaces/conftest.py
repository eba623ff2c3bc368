"""The Spaces' apps, imported from their app.py and served in-process on 127.0.0.1 (a free port),
once per session; telemetry off, so nothing is sent anywhere but the loopback interface."""

from __future__ import annotations

import os

import pytest

# Hard-set, not setdefault: these tests must never phone home, whatever the caller's environment.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

from spaceserver import SPACES, import_app, serve  # noqa: E402  (after the environment is set)


@pytest.fixture(scope="session")
def running_app():
    """``running_app(name)`` -> (app module, URL): the Space's app, started once per session."""
    pytest.importorskip("gradio")
    started = {}

    def start(name):
        if name not in started:
            app = import_app(SPACES / name / "app.py")
            started[name] = (app, serve(app.demo))
        return started[name]

    yield start
    for app, _ in started.values():
        app.demo.close()


@pytest.fixture(scope="session")
def client_of(running_app):
    """``client_of(name)``: a gradio_client Client of the running app."""
    from gradio_client import Client

    clients = {}

    def client(name):
        if name not in clients:
            clients[name] = Client(running_app(name)[1], verbose=False, analytics_enabled=False)
        return clients[name]

    return client
