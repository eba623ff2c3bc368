"""Bench rows of centered_bertscore: BERTScore and BERTScore-b, and the race against bert-score."""

from __future__ import annotations

from benchmarks import CorrelationRow
from benchmarks._shared import metric_run, over_the_encoder

CORRELATION_ROWS = [
    CorrelationRow("BERTScore-R", "centered_bertscore", "recall", {"centering": "none"}),
    CorrelationRow("BERTScore-R-b", "centered_bertscore", "recall", {"centering": "batch"}),
    CorrelationRow("BERTScore-F1", "centered_bertscore", "f1", {"centering": "none"}),
    CorrelationRow("BERTScore-F1-b", "centered_bertscore", "f1", {"centering": "batch"}),
]


def bert_score_package(predictions, references):
    """The ``bert-score`` package on the same model and layer, its scorer loaded once."""
    import bert_score

    from moverkit._core import DEFAULT_MODEL, MODEL_LAYERS, embedded_model_path

    scorer = bert_score.BERTScorer(model_type=embedded_model_path(), num_layers=MODEL_LAYERS[DEFAULT_MODEL])
    scorer.score(predictions[:2], references[:2])
    return lambda: scorer.score(predictions, references, batch_size=64)


SPEED_SUITES = [
    over_the_encoder(
        "bert-score",
        "centered_bertscore vs the bert-score package",
        {
            "centered_bertscore (batch)": metric_run("centered_bertscore", centering="batch"),
            "centered_bertscore (none)": metric_run("centered_bertscore", centering="none"),
            "bert-score package": bert_score_package,
        },
        [
            ("bert-score package", "centered_bertscore (none)", ">= 1.0"),
            ("bert-score package", "centered_bertscore (batch)", ">= 1.0"),
        ],
        "centered_bertscore (batch)",
    )
]
