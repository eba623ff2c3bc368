"""Freeing what the package holds: ``moverkit.release()``."""

from __future__ import annotations

import torch

from moverkit._core.encoding.cache import clear_cache
from moverkit._core.encoding.models import forget_models


def release() -> None:
    """Forget every loaded model (token and sentence encoders) and empty the cache of token clouds
    (:mod:`~moverkit._core.encoding.cache`), freeing their memory (GPU included) and handing the freed heap
    back to the operating system."""
    forget_models()
    clear_cache()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
