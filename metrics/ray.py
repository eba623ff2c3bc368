"""``from moverkit.ray import score_dataset``: scoring a Ray Data dataset with one encoder per actor
(``pip install "moverkit[ray]"``), from :mod:`moverkit.integrations.ray` (the door and its
documentation). A permanent path, the one users import."""

from moverkit.integrations.ray import RayScorer, score_dataset

__all__ = ["RayScorer", "score_dataset"]
