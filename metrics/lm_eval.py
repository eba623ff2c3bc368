"""``import moverkit.lm_eval``: moverkit's metrics registered with lm-evaluation-harness (``pip install
"moverkit[lm-eval]"``), each output's per-item function and aggregation, :func:`metric` for a task's
``!function`` file and :data:`TASKS`, the example task's folder: :mod:`moverkit.integrations.lm_eval`
(the door and its documentation), which registers them when imported. A permanent path, the one task
files and ``lm_eval --include_path`` name."""

from moverkit.integrations.lm_eval import *  # noqa: F403  the metrics' names come from the spec
from moverkit.integrations.lm_eval import __all__  # noqa: F401  its names are the door's
