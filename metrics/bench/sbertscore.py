"""Bench rows of sbertscore: SBERT and SBERT-b on WMT17, and the race against token-level BERTScore
on multi-sentence paragraphs."""

from __future__ import annotations

from . import CorrelationRow, SpeedSuite
from ._peers import metric_run

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


def on_paragraphs(factory):
    """A contender factory run on :func:`paragraphs` of the suite's pairs instead of the pairs."""

    def wrapped(predictions, references):
        return factory(*paragraphs(predictions, references))

    return wrapped


SPEED_SUITES = [
    SpeedSuite(
        f"sbertscore vs centered_bertscore on paragraphs of {PARAGRAPH_SEGMENTS} segments (same encoder)",
        {
            "sbertscore (none)": on_paragraphs(metric_run("sbertscore", centering="none")),
            "centered_bertscore (none)": on_paragraphs(metric_run("centered_bertscore", centering="none")),
            "sbertscore (batch)": on_paragraphs(metric_run("sbertscore", centering="batch")),
            "centered_bertscore (batch)": on_paragraphs(metric_run("centered_bertscore", centering="batch")),
        },
        [
            ("centered_bertscore (none)", "sbertscore (none)", ">= 2"),
            ("centered_bertscore (batch)", "sbertscore (batch)", ">= 2"),
        ],
    )
]
