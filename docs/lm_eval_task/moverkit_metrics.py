"""The metrics of moverkit_wmt16.yaml: importing moverkit.lm_eval registers every moverkit metric
(its per-item function and its aggregation) with lm-evaluation-harness; the task's ``!function``
entries name these."""

from moverkit.lm_eval import centered_bertscore, twmd

__all__ = ["centered_bertscore", "twmd"]
