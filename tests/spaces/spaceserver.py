"""Serving a Space's app in-process on 127.0.0.1, for gradio_client and the browser."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

SPACES = Path(__file__).resolve().parents[2] / "spaces"
APPS = tuple(sorted(p.parent.name for p in SPACES.glob("*/app.py")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def import_app(path: Path):
    """Run an app.py as Spaces does (its module-level code builds ``demo``), under a unique name."""
    spec = importlib.util.spec_from_file_location(f"_space_app_{path.parent.name}_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve(demo) -> str:
    """Start ``demo`` on 127.0.0.1 and a free port; returns its URL (``demo.close()`` stops it)."""
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, ssr_mode=False)
    return f"http://127.0.0.1:{port}/"


def resident_mb() -> float:
    """This process's resident memory in MB (Linux's /proc; the served app runs in-process)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))
