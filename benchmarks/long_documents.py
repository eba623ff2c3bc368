"""Bench rows on long documents: texts past the model's 512-token limit, built offline from WMT17.

A document is :data:`DOCUMENT_SEGMENTS` consecutive segments of one language pair (in the file's
order), its prediction the segments' hypotheses joined, its reference their references joined, its
human score the mean of theirs; only documents whose prediction and reference both exceed the
limit are kept. On them: token-level metrics truncated (what bert-score does: the first 512 tokens
only) against encoded whole in windows (``long_texts="window"``), and sbertscore (every sentence
encoded on its own).
"""

from __future__ import annotations

from benchmarks import CorrelationRow, SpeedSuite
from benchmarks._shared import metric_run
from moverkit.judgments import Judgments

DOCUMENT_SEGMENTS = 40
"""Segments per document: about 1,100 tokens of WMT17 news (25 to 30 tokens a segment), so a
truncated metric sees under half of each."""


def _n_tokens(texts: list[str]) -> list[int]:
    """Token counts by the embedded model's tokenizer, special tokens included."""
    from moverkit._core import get_encoder
    from moverkit._core.encoding import CallTokenizer

    return CallTokenizer.of(get_encoder(), long_texts="window").count(list(texts))  # whole: nothing cut


def long_documents(data: Judgments, size: int = DOCUMENT_SEGMENTS) -> Judgments:
    """Documents of ``size`` consecutive segments per group (a last, shorter run is dropped), the
    human score of each the mean of its segments'; only those longer than the model's limit on
    both sides."""
    from moverkit._core import get_encoder

    groups, predictions, references, human = [], [], [], []
    for group, members in data.by_group().items():
        for start in range(0, len(members) - size + 1, size):
            chunk = members[start : start + size]
            groups.append(group)
            predictions.append(" ".join(data.predictions[i] for i in chunk))
            references.append(" ".join(data.references[i] for i in chunk))
            human.append(sum(data.human[i] for i in chunk) / size)
    limit = get_encoder().max_length
    long = [k for k, (p, r) in enumerate(zip(_n_tokens(predictions), _n_tokens(references))) if min(p, r) > limit]
    return Judgments(
        groups=[groups[k] for k in long],
        predictions=[predictions[k] for k in long],
        references=[references[k] for k in long],
        human=[human[k] for k in long],
    )


def document_pairs(predictions: list[str], references: list[str]) -> tuple[list[str], list[str]]:
    """The speed suite's inputs: :func:`long_documents` of the pairs (one group, human scores unused)."""
    data = Judgments(["all"] * len(predictions), list(predictions), list(references), [0.0] * len(predictions))
    documents = long_documents(data)
    return documents.predictions, documents.references


def _rows(label: str, metric: str, output: str, **kwargs) -> list[CorrelationRow]:
    return [
        CorrelationRow(f"{label} truncate (docs)", metric, output, dict(kwargs), inputs=long_documents),
        CorrelationRow(
            f"{label} window (docs)", metric, output, {**kwargs, "long_texts": "window"}, inputs=long_documents
        ),
    ]


CORRELATION_ROWS = [
    *_rows("BERTScore-F1-b", "centered_bertscore", "f1", centering="batch"),
    *_rows("TWMD-b", "twmd", "twmd", centering="batch"),
    CorrelationRow("sBERTScore-F1-b (docs)", "sbertscore", "f1", {"centering": "batch"}, inputs=long_documents),
]

TRUNCATE, WINDOW = "centered_bertscore (batch, truncate)", "centered_bertscore (batch, window)"
SBERTSCORE = "sbertscore (batch)"

SPEED_SUITES = [
    SpeedSuite(
        "long-documents",
        f"long documents ({DOCUMENT_SEGMENTS} segments, over 512 tokens): truncate vs window vs sbertscore",
        {
            TRUNCATE: metric_run("centered_bertscore", centering="batch"),
            WINDOW: metric_run("centered_bertscore", centering="batch", long_texts="window"),
            "twmd (batch, window)": metric_run("twmd", centering="batch", long_texts="window"),
            SBERTSCORE: metric_run("sbertscore", centering="batch"),
        },
        [(WINDOW, TRUNCATE, None), (SBERTSCORE, WINDOW, None), (SBERTSCORE, TRUNCATE, None)],
        inputs=document_pairs,
    )
]
