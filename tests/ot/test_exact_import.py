"""The first exact transport of a process imports POT (and with it sklearn and rich, which draw
from Python's ``random``): it leaves the process's random generators as it found them."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import random
import numpy as np
random.seed(1); np.random.seed(1); expected = (random.random(), np.random.rand())
random.seed(1); np.random.seed(1)
from moverkit.ot.exact import exact_transport
exact_transport(np.ones(2), np.ones(3), np.ones((2, 3)))
assert "ot" in sys.modules
print((random.random(), np.random.rand()) == expected)
"""


@pytest.mark.integration
def test_the_first_exact_transport_leaves_the_random_generators_as_they_were():
    out = subprocess.run([sys.executable, "-c", "import sys\n" + SCRIPT], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True", out.stderr
