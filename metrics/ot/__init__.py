"""Batched optimal-transport solvers of moverkit's metrics, each tested against POT.

- :mod:`moverkit.ot.sinkhorn`: TWMD's log-domain Sinkhorn plan (:func:`sinkhorn_log_plan`) and
  TRWMD's closed form (:func:`trwmd_value`), Chen et al. (2020), Eq. (5)-(7).
- :mod:`moverkit.ot.unbalanced`: Lazy-EMD's entropic unbalanced Sinkhorn
  (:func:`unbalanced_sinkhorn`, its plan :func:`transport_plan`), Chen et al. (IJCAI 2020).

POT solves one problem per call; these solve a padded batch of problems of different sizes at once.
"""

from .sinkhorn import sinkhorn_log_plan, trwmd_value
from .unbalanced import SinkhornResult, overrelaxation, scaling_exponent, transport_plan, unbalanced_sinkhorn

__all__ = [
    "SinkhornResult",
    "overrelaxation",
    "scaling_exponent",
    "sinkhorn_log_plan",
    "transport_plan",
    "trwmd_value",
    "unbalanced_sinkhorn",
]
