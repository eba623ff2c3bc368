"""Reading a TSV of human judgments (WMT17 segment-level DA and files laid out like it)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Judgments:
    groups: list[str]
    predictions: list[str]
    references: list[str]
    human: list[float]

    def by_group(self) -> dict[str, list[int]]:
        index: dict[str, list[int]] = {}
        for i, g in enumerate(self.groups):
            index.setdefault(g, []).append(i)
        return index


def read_judgments(
    path: str | Path,
    *,
    group: str = "lp",
    prediction: str = "hypothesis",
    reference: str = "reference",
    human: str = "human",
    limit: int | None = None,
) -> Judgments:
    """Columns by name from a tab-separated file with a header row and no quoting."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        rows = list(reader)[:limit]
    missing = {group, prediction, reference, human} - set(reader.fieldnames or [])
    if missing:
        raise ValueError(f"{path} lacks the column(s) {', '.join(sorted(missing))}; it has {reader.fieldnames}")
    return Judgments(
        groups=[r[group] for r in rows],
        predictions=[r[prediction] for r in rows],
        references=[r[reference] for r in rows],
        human=[float(r[human]) for r in rows],
    )
