"""Human judgments: reading a TSV of them (WMT17 segment-level DA and files laid out like it), and
WMT17's to-English system-level test sets (:class:`TestSet`: references, every rated system's
output, the human system-level DA scores), read from the extract in moverkit's repository
(:data:`EXTRACT`, ``data/`` of a checkout, not in the wheel: the first 500 segments of each test
set, the 65 rated systems of the 7 to-English pairs, their human scores; made by
``data/extract_wmt17_system_level.py``, provenance in ``data/README.md``) or from the full ``WMT17/`` folder of the public repository
AIPHES/ACL20-Reference-Free-MT-Evaluation (``references/``, ``system-outputs/<lp>/``,
``DA-syslevel.csv``). Only WMT17 is read: the other years are kept for independent checks.

A library module: ``moverkit.finetune``, ``moverkit combine`` and the benchmarks (``benchmarks/`` of the repository) stand on it
(the agreement of scores with them is :mod:`moverkit.judgments.correlation`'s)."""

from __future__ import annotations

import codecs
import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from moverkit.facts.specs import spec
from moverkit.formats.lines import read_lines, split_lines, table_label


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
    hold (:func:`moverkit.formats.lines.table_label`); a missing column is named along with the header's
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


UNSEEN_PAIRS = ("fi-en", "lv-en")
"""Language pairs outside the five that moverkit's shipped statistics were fitted on."""


CHECKOUT_DATA = Path(__file__).resolve().parents[2] / "data"
"""The ``data/`` folder of the repository checkout moverkit runs from (``pip install -e .``); a
wheel does not hold it (the benchmarks' data are 1.6 MB, of no use to scoring)."""

EXTRACT = CHECKOUT_DATA / "wmt17_system_level_to_en.tsv.gz"
"""The extract's texts: ``lp, system, sid, text`` (``system`` is ``reference`` for the
references), written by ``data/extract_wmt17_system_level.py``."""

EXTRACT_HUMAN = CHECKOUT_DATA / "wmt17_system_level_to_en_human.tsv"
"""The extract's human system-level scores: ``lp, system, human``."""

REFERENCE = "reference"
"""The ``system`` of the reference rows in :data:`EXTRACT`."""


@dataclass(frozen=True)
class TestSet:
    """One language pair: the references and, aligned with them, each system's output and its
    human system-level score."""

    lp: str
    references: list[str]
    outputs: dict[str, list[str]]
    human: dict[str, float]


def read_wmt17(folder: str | Path, segments: int | None = None) -> list[TestSet]:
    """The to-English test sets of a ``WMT17/`` folder (see the module doc), each cut to its first
    ``segments`` segments when given (the same segments for every system). Systems without a human
    score are left out; an output whose length is not the reference's is an error naming it."""
    folder = Path(folder)
    human: dict[str, dict[str, float]] = {}
    for line in read_lines(folder / "DA-syslevel.csv")[1:]:
        if not line.strip():
            continue
        lp, score, system = line.split()
        if lp.endswith("-en"):
            human.setdefault(lp, {})[system] = float(score)
    sets = []
    for lp in sorted(human):
        source = lp.split("-")[0]
        references = read_lines(folder / "references" / f"newstest2017-{source}en-ref.en")
        outputs = {}
        for path in sorted((folder / "system-outputs" / lp).glob(f"newstest2017.*.{lp}")):
            system = path.name[len("newstest2017.") : -len(f".{lp}")]
            if system not in human[lp]:
                continue
            lines = read_lines(path)
            if len(lines) != len(references):
                raise ValueError(f"{path} has {len(lines)} lines, the references {len(references)}")
            outputs[system] = lines[:segments]
        missing = sorted(set(human[lp]) - set(outputs))
        if missing:
            raise ValueError(f"{lp}: no system output for {', '.join(missing)} in {folder / 'system-outputs' / lp}")
        sets.append(TestSet(lp, references[:segments], outputs, {s: human[lp][s] for s in outputs}))
    return sets


def read_extract(
    texts: str | Path = EXTRACT, human: str | Path = EXTRACT_HUMAN, segments: int | None = None
) -> list[TestSet]:
    """The test sets of the repository's extract (or of files in its format), as
    :func:`read_wmt17` reads them from the full folder, each cut to its first ``segments`` segments
    when given; more segments than the extract holds is an error. Every system of ``human`` must
    have the same segments as the references of its language pair. Without the files (a wheel
    install) the error says where they are."""
    import gzip

    for path in (Path(texts), Path(human)):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: the WMT17 system-level extract is in moverkit's repository (data/), not in the "
                "wheel; run from a checkout (git clone, then pip install -e .). moverkit bench system-level also "
                "reads the full WMT17/ folder of AIPHES/ACL20-Reference-Free-MT-Evaluation (--wmt17)"
            )

    scores: dict[str, dict[str, float]] = {}
    for line in read_lines(Path(human))[1:]:
        lp, system, score = line.split("\t")
        scores.setdefault(lp, {})[system] = float(score)
    with gzip.open(texts, "rt", encoding="utf-8", newline="") as f:
        rows = split_lines(f.read())
    by_lp: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for row in rows[1:]:
        lp, system, sid, text = row.split("\t")
        by_lp.setdefault(lp, {}).setdefault(system, []).append((int(sid), text))
    if sorted(by_lp) != sorted(scores):
        raise ValueError(f"{texts} and {human} hold different language pairs")
    sets = []
    for lp in sorted(by_lp):
        systems = by_lp[lp]
        sids = [sid for sid, _ in systems.get(REFERENCE, [])]
        if not sids:
            raise ValueError(f"{texts}: no references for {lp}")
        if segments is not None and segments > len(sids):
            raise ValueError(
                f"{texts} holds the first {len(sids)} segments of {lp}, fewer than the {segments} asked for; "
                "read the full WMT17 folder (--wmt17) for more"
            )
        if sorted(set(systems) - {REFERENCE}) != sorted(scores[lp]):
            raise ValueError(f"{lp}: the systems of {texts} are not those of {human}")
        outputs = {}
        for system in sorted(scores[lp]):
            if [sid for sid, _ in systems[system]] != sids:
                raise ValueError(f"{lp}: {system} does not have the segments of the references")
            outputs[system] = [text for _, text in systems[system]][:segments]
        references = [text for _, text in systems[REFERENCE]][:segments]
        sets.append(TestSet(lp, references, outputs, {s: scores[lp][s] for s in outputs}))
    return sets


def segment_scores(test_set: TestSet, metric: str, **kwargs) -> dict[str, list[float]]:
    """Each system's segment scores (the metric's main output): one call over all systems."""
    from moverkit.integrations.registry import REGISTRY

    systems = list(test_set.outputs)
    predictions = [text for s in systems for text in test_set.outputs[s]]
    references = test_set.references * len(systems)
    scores = REGISTRY[metric].function(predictions, references, **kwargs)[spec(metric).main]
    n = len(test_set.references)
    return {s: scores[i * n : (i + 1) * n] for i, s in enumerate(systems)}
