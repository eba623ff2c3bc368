"""The centering layer: subtracting a mean vector (Chen et al. 2020, Section 3.2); imports
``base`` and ``encoding``.

The maths (``maths``: batch, corpus and row means), the statistics file (``CenteringStats``, one
``.npz`` per model and layer) and the fitting of a corpus statistic (``fit_centering``).
"""

from moverkit._core.centering.fit import fit_centering
from moverkit._core.centering.maths import (
    CENTERING_MODES,
    MIN_BATCH_TEXTS,
    SENTENCE_CENTERING_MODES,
    Centering,
    center,
    center_rows,
    check_centering,
    row_mean,
)
from moverkit._core.centering.stats_file import MAX_STATS_FILE_BYTES, CenteringStats

__all__ = [
    "CENTERING_MODES",
    "Centering",
    "CenteringStats",
    "MAX_STATS_FILE_BYTES",
    "MIN_BATCH_TEXTS",
    "SENTENCE_CENTERING_MODES",
    "center",
    "center_rows",
    "check_centering",
    "fit_centering",
    "row_mean",
]
