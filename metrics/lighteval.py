"""``from moverkit.lighteval import centered_bertscore, twmd`` in a lighteval custom-tasks file
(``pip install "moverkit[lighteval]"``): the batched lighteval metrics of
:mod:`moverkit.integrations.lighteval` (the door and its documentation), every metric's outputs at
its defaults, :func:`metrics` and :func:`metric`. A permanent path, the one tasks files import."""

from moverkit.integrations.lighteval import *  # noqa: F403  the metrics' names come from the spec
from moverkit.integrations.lighteval import __all__  # noqa: F401  its names are the door's
