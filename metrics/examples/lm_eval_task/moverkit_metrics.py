"""The metrics of moverkit_wmt16.yaml, made when lm-evaluation-harness loads the task (its
``!function`` tag imports this file): ``moverkit.lm_eval.metric`` checks each metric's arguments
there, by name and by value, so a wrong one stops the run before any generation. Importing
moverkit.lm_eval also registers every moverkit metric's aggregation, which the task's
``aggregation:`` entries name."""

from moverkit.lm_eval import metric

twmd = metric("twmd", temperature=0.1)  # any argument of moverkit.functional.twmd
centered_bertscore = metric("centered_bertscore")  # its F1
