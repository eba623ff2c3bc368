"""Every metric as a plain function, as torchmetrics' ``functional``: the same arguments and the
same result dict as the evaluate module's ``compute``, without evaluate's Arrow round trip::

    from moverkit import functional
    functional.twmd(predictions=["a cat sat"], references=["the cat sat"])["twmd"]

Each evaluate module (``moverkit.load(name)``) is documentation plus a ``_compute`` that calls the
function of the same name here.
"""

from __future__ import annotations

from moverkit.facts.specs import SPECS
from moverkit.functional.centered_bertscore import centered_bertscore as centered_bertscore
from moverkit.functional.lazy_emd import lazy_emd as lazy_emd
from moverkit.functional.moverscore import moverscore as moverscore
from moverkit.functional.sbertscore import sbertscore as sbertscore
from moverkit.functional.twmd import twmd as twmd

__all__ = sorted(SPECS)  # a function a metric, each named as its metric (held by tests/test_public_api.py)
