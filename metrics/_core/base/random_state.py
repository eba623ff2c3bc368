"""The process's random generators, left as a block found them.

Loading a model draws from the process's generators: sentence-transformers draws from Python's
``random`` as it builds a model, and transformers initialises the weights a folder lacks (a
pooler saved without its weights) from torch's generator. A user who seeds a training loop, or an
experiment, and then scores with moverkit would otherwise draw other numbers after the first
call than after the next ones (which find the model loaded), and other numbers than a run that
loaded the model elsewhere. Every model load runs under :func:`kept_random_state`.
"""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch


@contextlib.contextmanager
def kept_random_state():
    """Run the block, then put back Python's ``random`` state, numpy's global (legacy
    ``np.random``) state and torch's generators (the CPU's, and every CUDA device's where CUDA
    is initialised) as they were before it, whether it ends or raises. The states are the
    process's: a thread that draws while another runs the block has its draws undone."""
    python_state, numpy_state, cpu_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(cpu_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
