"""``from moverkit.torchmetrics import CenteredBERTScore`` (``pip install "moverkit[torchmetrics]"``):
one torchmetrics ``Metric`` class per metric, named by its spec's ``class_name``, and their base
:class:`MoverkitMetric`, from :mod:`moverkit.integrations.torchmetrics` (the door and its
documentation). A permanent path, the one users import."""

from moverkit.integrations.torchmetrics import *  # noqa: F403  the classes' names come from the spec
from moverkit.integrations.torchmetrics import __all__  # noqa: F401  its names are the door's
