"""A door whose framework is not installed says which extra of moverkit installs it, in the
``ModuleNotFoundError`` a plain install gives on import (``pip install "moverkit[serve]"``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

DOORS = [
    ("serve", "ray", "serve"),
    ("torchmetrics", "torchmetrics", "torchmetrics"),
    ("lighteval", "lighteval", "lighteval"),
    ("lm_eval", "lm_eval", "lm-eval"),
]


@pytest.mark.integration
@pytest.mark.parametrize(("door", "framework", "extra"), DOORS)
def test_a_door_without_its_framework_names_its_extra(door, framework, extra):
    # None in sys.modules is how Python itself makes an import fail as if the package were absent.
    code = f"import sys; sys.modules[{framework!r}] = None\ntry:\n    import moverkit.{door}\nexcept ModuleNotFoundError as err:\n    print(err.name, '|', err)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    name, message = done.stdout.strip().split(" | ", 1)
    assert name.split(".")[0] == framework and f'pip install "moverkit[{extra}]"' in message, done.stdout


@pytest.mark.integration
def test_moverkit_serve_without_ray_says_which_extra_installs_it():
    code = "import sys; sys.modules['ray'] = None\nfrom moverkit.cli import main\nsys.exit(main(['serve', '--metric', 'twmd']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and 'pip install "moverkit[serve]"' in done.stderr, done.stdout + done.stderr
