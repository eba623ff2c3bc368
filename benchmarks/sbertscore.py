"""Bench rows of sbertscore: SBERT and SBERT-b on WMT17, and the race against token-level BERTScore
on multi-sentence paragraphs."""

from __future__ import annotations

from benchmarks import CorrelationRow, SpeedSuite
from benchmarks._shared import encoder_floor, metric_run, sentence_encoder_floor

# WMT17 segments are (mostly) single sentences: there sBERTScore is the cosine of the two
# sentence embeddings, the "SBERT" rows of Chen et al. (2020), Table 2.
CORRELATION_ROWS = [
    CorrelationRow("sBERTScore-F1", "sbertscore", "f1", {"centering": "none"}),
    CorrelationRow("sBERTScore-F1-b", "sbertscore", "f1", {"centering": "batch"}),
]

PARAGRAPH_SEGMENTS = 5
"""Consecutive judgment rows joined into one paragraph for the speed suite."""

_SENTENCE_END = (".", "!", "?", '"', "'")


def paragraphs(predictions, references, size: int = PARAGRAPH_SEGMENTS) -> tuple[list[str], list[str]]:
    """Multi-sentence texts from single-segment pairs: every ``size`` consecutive predictions are
    joined into one paragraph, and their references into its reference. A segment without final
    punctuation gets " ." so that it stays a sentence of its own; a full paragraph therefore has
    at least ``size`` sentences (more where a segment holds several)."""

    def join(segments):
        return " ".join(s if s.rstrip().endswith(_SENTENCE_END) else s.rstrip() + " ." for s in segments)

    starts = range(0, len(predictions), size)
    return (
        [join(predictions[i : i + size]) for i in starts],
        [join(references[i : i + size]) for i in starts],
    )


SBERTSCORE, BERTSCORE = "sbertscore (none)", "centered_bertscore (none)"
SBERTSCORE_B, BERTSCORE_B = "sbertscore (batch)", "centered_bertscore (batch)"
SENTENCE_FLOOR, TOKEN_FLOOR = "sentence encoder alone (distinct sentences)", "token encoder alone (distinct paragraphs)"

SPEED_SUITES = [
    SpeedSuite(
        "sbertscore",
        f"sbertscore vs centered_bertscore on paragraphs of {PARAGRAPH_SEGMENTS} segments (same encoder)",
        {
            SENTENCE_FLOOR: sentence_encoder_floor,
            TOKEN_FLOOR: encoder_floor,
            SBERTSCORE: metric_run("sbertscore", centering="none"),
            BERTSCORE: metric_run("centered_bertscore", centering="none"),
            SBERTSCORE_B: metric_run("sbertscore", centering="batch"),
            BERTSCORE_B: metric_run("centered_bertscore", centering="batch"),
        },
        [
            (BERTSCORE, SBERTSCORE, ">= 2"),
            (BERTSCORE_B, SBERTSCORE_B, ">= 2"),
            (TOKEN_FLOOR, SENTENCE_FLOOR, None),
            (SBERTSCORE, SENTENCE_FLOOR, None),
            (BERTSCORE, TOKEN_FLOOR, None),
        ],
        inputs=paragraphs,
    )
]
