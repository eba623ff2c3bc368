"""Human judgments: reading a TSV of them (WMT17 segment-level DA and files laid out like it). A
library module: ``moverkit.finetune`` and ``moverkit.bench`` both stand on it (the agreement of
scores with them is :mod:`moverkit.correlation`'s)."""

from __future__ import annotations

import codecs
import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from .lines import table_label


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
    """Columns by name from a tab-separated UTF-8 file with a header row and no quoting (blank
    lines are skipped; the first ``limit`` rows with ``limit``).

    Errors name the file, the line (the header is line 1) and the column: a row whose number of
    fields is not the header's, a human score that is not a finite number, bytes that are not
    UTF-8, a field longer than csv's limit (131,072 characters), a group that a report table cannot
    hold (:func:`moverkit.lines.table_label`); a missing column is named along with the header's
    columns.
    """
    raw = Path(path).read_bytes()
    if raw.startswith(codecs.BOM_UTF8):  # as spreadsheets save "UTF-8" text
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line, line_start = raw.count(b"\n", 0, err.start) + 1, raw.rfind(b"\n", 0, err.start) + 1
        raise ValueError(
            f"{path} line {line}: not UTF-8 text "
            f"(byte 0x{raw[err.start]:02x} at byte {err.start - line_start + 1} of the line); save the file as UTF-8"
        ) from None
    reader = _Rows(path, csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE))
    header = next(reader, None)
    if header is None:
        raise ValueError(f"{path} is empty: it has no header row")
    wanted = list(dict.fromkeys((group, prediction, reference, human)))
    missing = [name for name in wanted if name not in header]
    if missing:
        raise ValueError(
            f"{path} lacks the column(s) {', '.join(map(repr, missing))}; its header (line 1) has {', '.join(header)}"
        )
    for name in wanted:
        if header.count(name) > 1:
            raise ValueError(f"{path} line 1: the header names the column {name!r} {header.count(name)} times")
    column = {name: header.index(name) for name in wanted}
    groups, predictions, references, scores = [], [], [], []
    for row in reader:
        if limit is not None and len(scores) >= limit:
            break
        if not row:  # a blank line
            continue
        line = reader.line_num
        if len(row) != len(header):
            raise ValueError(
                f"{path} line {line}: {len(row)} field{'s' if len(row) != 1 else ''}, the header has {len(header)} "
                "(fields are separated by tabs, so a text cannot hold one)"
            )
        cell = row[column[human]]
        try:
            score = float(cell)
        except ValueError:
            raise ValueError(f"{path} line {line}: column {human!r} is not a number: {cell!r}") from None
        if not math.isfinite(score):
            raise ValueError(f"{path} line {line}: column {human!r} is not a finite number: {cell!r}")
        try:
            groups.append(table_label(f"column {group!r}", row[column[group]]))  # it heads report rows
        except ValueError as err:
            raise ValueError(f"{path} line {line}: {err}") from None
        predictions.append(row[column[prediction]])
        references.append(row[column[reference]])
        scores.append(score)
    return Judgments(groups=groups, predictions=predictions, references=references, human=scores)


class _Rows:
    """A csv reader whose errors (a field over csv's limit of 131,072 characters, ...) are a
    ``ValueError`` naming the file and the line."""

    def __init__(self, path, reader):
        self.path, self.reader = path, reader

    @property
    def line_num(self) -> int:
        return self.reader.line_num

    def __iter__(self):
        return self

    def __next__(self) -> list[str]:
        try:
            return next(self.reader)
        except csv.Error as err:
            raise ValueError(f"{self.path} line {self.reader.line_num}: not a row of the TSV ({err})") from None
