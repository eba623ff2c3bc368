"""Bench rows of twmd: the Tempered-WMD paper's Table 2 family (SBERT, CKA, TWMD, TRWMD, each
without and with batch centering; BERTScore's rows come from centered_bertscore), and TWMD's time
against the encoder alone."""

from __future__ import annotations

from benchmarks import CorrelationRow
from benchmarks._shared import metric_run, over_the_encoder

# Temperatures are the module's defaults, the paper's: 0.02 without centering, 0.10 (TWMD) and
# 0.15 (TRWMD) with batch centering; one Sinkhorn step.
CORRELATION_ROWS = [
    CorrelationRow(label, "twmd", variant, {"variant": variant, "centering": centering})
    for variant, name in (("sbert", "SBERT"), ("cka", "CKA"), ("twmd", "TWMD"), ("trwmd", "TRWMD"))
    for label, centering in ((name, "none"), (f"{name}-b", "batch"))
]

SPEED_SUITES = [
    over_the_encoder(
        "twmd",
        "twmd vs the encoder alone",
        {"twmd (batch centering, 1 Sinkhorn step)": metric_run("twmd")},
        [],
        "twmd (batch centering, 1 Sinkhorn step)",
        "<= 1.15",
    )
]
