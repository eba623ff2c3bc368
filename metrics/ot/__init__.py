"""Batched optimal-transport solvers of moverkit's metrics, each tested against POT.

- :mod:`moverkit.ot.sinkhorn`: TWMD's log-domain Sinkhorn plan (:func:`sinkhorn_log_plan`) and
  TRWMD's closed form (:func:`trwmd_value`), Chen et al. (2020), Eq. (5)-(7).
- :mod:`moverkit.ot.unbalanced`: Lazy-EMD's entropic unbalanced Sinkhorn
  (:func:`unbalanced_sinkhorn`, its plan :func:`unbalanced_plan`), Chen et al. (IJCAI 2020).

- :mod:`moverkit.ot.exact`: MoverScore's exact Word Mover's Distance (:func:`exact_transport`),
  POT's network simplex, one problem per call.

POT's Sinkhorn solves one problem per call; the Sinkhorn solvers here solve a padded batch of
problems of different sizes at once.
"""

from moverkit.ot.exact import exact_transport
from moverkit.ot.sinkhorn import sinkhorn_log_plan, trwmd_value
from moverkit.ot.unbalanced import (
    SinkhornResult,
    overrelaxation,
    scaling_exponent,
    unbalanced_plan,
    unbalanced_sinkhorn,
)

__all__ = [
    "SinkhornResult",
    "exact_transport",
    "overrelaxation",
    "scaling_exponent",
    "sinkhorn_log_plan",
    "unbalanced_plan",
    "trwmd_value",
    "unbalanced_sinkhorn",
]
