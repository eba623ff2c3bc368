"""Extract what ``moverkit bench system-level`` needs from a WMT17 folder (standard library only).

Reads the ``WMT17/`` folder of the public repository AIPHES/ACL20-Reference-Free-MT-Evaluation
(``DA-syslevel.csv``, ``references/newstest2017-XXen-ref.en``,
``system-outputs/XX-en/newstest2017.SYSTEM.XX-en``) and writes, for the to-English language pairs
only and the systems with a human system-level DA score:

* ``wmt17_system_level_to_en.tsv.gz``: columns ``lp``, ``system``, ``sid``, ``text``; the first
  ``--segments`` segments (default 500) of each test set, once as ``system`` = ``reference`` (the
  human reference) and once per rated system (its output). ``sid`` is the 1-based line number in
  newstest2017. Tab-separated UTF-8, one header row, no quoting (a text never holds a tab or a line
  break: the extraction refuses one); gzip level 9 with no name or time in its header, so the same
  input gives the same bytes.
* ``wmt17_system_level_to_en_human.tsv``: columns ``lp``, ``system``, ``human``: the system-level DA
  score (the z-score average of WMT17's ``DA-syslevel.csv``, as written there) of every rated
  system. These are scores of the full test sets, not of the cut.

Usage (from the repository root; the output folder is the one the bench reads by default)::

    python data/extract_wmt17_system_level.py PATH/WMT17 --segments 500 --out metrics/bench/data
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
from pathlib import Path

TEXTS = "wmt17_system_level_to_en.tsv.gz"
HUMAN = "wmt17_system_level_to_en_human.tsv"
REFERENCE = "reference"
"""The ``system`` of the reference rows (no WMT17 system has this name: theirs end in ``.<id>``)."""


def lines_of(path: Path) -> list[str]:
    """One text per line as ``moverkit.lines.read_lines`` reads it: split at ``\\n`` only, a
    ``\\r`` before it dropped, no text after a final ``\\n``, a byte order mark dropped."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        lines = f.read().split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def human_scores(folder: Path) -> dict[str, dict[str, str]]:
    """``{lp: {system: score as written}}`` of the to-English rows of ``DA-syslevel.csv``."""
    human: dict[str, dict[str, str]] = {}
    for line in lines_of(folder / "DA-syslevel.csv")[1:]:
        if not line.strip():
            continue
        lp, score, system = line.split()
        if lp.endswith("-en"):
            float(score)  # a malformed score is an error here, not in the bench
            human.setdefault(lp, {})[system] = score
    return human


def extract(folder: Path, segments: int) -> tuple[list[tuple[str, str, int, str]], list[tuple[str, str, str]]]:
    """The rows of the two files (see the module doc)."""
    human = human_scores(folder)
    texts, scores = [], []
    for lp in sorted(human):
        source = lp.split("-")[0]
        references = lines_of(folder / "references" / f"newstest2017-{source}en-ref.en")
        if len(references) < segments:
            raise ValueError(f"{lp}: {len(references)} references, fewer than --segments {segments}")
        rows = [(lp, REFERENCE, sid + 1, text) for sid, text in enumerate(references[:segments])]
        for system in sorted(human[lp]):
            if system == REFERENCE:
                raise ValueError(f"{lp}: a system is named {REFERENCE!r}, the name of the reference rows")
            path = folder / "system-outputs" / lp / f"newstest2017.{system}.{lp}"
            if not path.is_file():
                raise ValueError(f"{lp}: no system output for {system} ({path})")
            outputs = lines_of(path)
            if len(outputs) != len(references):
                raise ValueError(f"{path} has {len(outputs)} lines, the references {len(references)}")
            rows += [(lp, system, sid + 1, text) for sid, text in enumerate(outputs[:segments])]
            scores.append((lp, system, human[lp][system]))
        for lp_, system, sid, text in rows:
            if "\t" in text or "\n" in text or "\r" in text:
                raise ValueError(f"{lp_} {system} segment {sid} holds a tab or a line break")
        texts += rows
    return texts, scores


def write(out: Path, texts, scores) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    body = "lp\tsystem\tsid\ttext\n" + "".join(f"{lp}\t{s}\t{sid}\t{t}\n" for lp, s, sid, t in texts)
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as f:
        f.write(body.encode("utf-8"))
    (out / TEXTS).write_bytes(raw.getvalue())
    human = "lp\tsystem\thuman\n" + "".join(f"{lp}\t{s}\t{h}\n" for lp, s, h in scores)
    (out / HUMAN).write_bytes(human.encode("utf-8"))
    return out / TEXTS, out / HUMAN


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wmt17", type=Path, help="the WMT17/ folder (DA-syslevel.csv, references/, system-outputs/)")
    parser.add_argument("--segments", type=int, default=500, help="keep the first N segments of each test set (500)")
    parser.add_argument("--out", type=Path, default=Path("metrics/bench/data"), help="output folder")
    args = parser.parse_args(argv)
    if args.segments < 1:
        parser.error("--segments must be >= 1")
    texts, scores = extract(args.wmt17, args.segments)
    for path in write(args.out, texts, scores):
        print(f"{path}: {path.stat().st_size:,} bytes", file=sys.stderr)
    lps = sorted({lp for lp, _, _ in scores})
    print(f"{len(lps)} language pairs, {len(scores)} systems, {args.segments} segments each", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
