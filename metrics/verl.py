"""verl's path to moverkit's reward, ``custom_reward_function.path: pkg://moverkit.verl`` in a verl
configuration: :func:`compute_score`, from :mod:`moverkit.integrations.verl` (the door and its
documentation). A permanent path: verl's configurations name it."""

from moverkit.integrations.verl import compute_score

__all__ = ["compute_score"]
