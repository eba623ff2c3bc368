"""Extract what ``moverkit bench system-level`` needs from a WMT17 folder.

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
  score (the z-score average of WMT17's ``DA-syslevel.csv``; Python's shortest repr of the float,
  which is the number as written there for every WMT17 score) of every rated system. These are
  scores of the full test sets, not of the cut.

The folder is read by ``moverkit.judgments.read_wmt17``, the reader moverkit scores with, so run it
where moverkit is installed (a checkout installed with ``pip install -e .``).

Usage (from the repository root; the output folder is the one the bench reads by default)::

    python data/extract_wmt17_system_level.py PATH/WMT17 --segments 500 --out data
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


def extract(folder: Path, segments: int) -> tuple[list[tuple[str, str, int, str]], list[tuple[str, str, float]]]:
    """The rows of the two files (see the module doc), from the folder as the bench reads it
    (:func:`moverkit.judgments.read_wmt17`: the same parsing, the same checks)."""
    from moverkit.judgments import read_wmt17

    texts, scores = [], []
    for test_set in read_wmt17(folder):
        lp, references = test_set.lp, test_set.references
        if len(references) < segments:
            raise ValueError(f"{lp}: {len(references)} references, fewer than --segments {segments}")
        rows = [(lp, REFERENCE, sid + 1, text) for sid, text in enumerate(references[:segments])]
        for system in sorted(test_set.outputs):
            if system == REFERENCE:
                raise ValueError(f"{lp}: a system is named {REFERENCE!r}, the name of the reference rows")
            rows += [(lp, system, sid + 1, text) for sid, text in enumerate(test_set.outputs[system][:segments])]
            scores.append((lp, system, test_set.human[system]))
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
    human = "lp\tsystem\thuman\n" + "".join(f"{lp}\t{s}\t{h!r}\n" for lp, s, h in scores)
    (out / HUMAN).write_bytes(human.encode("utf-8"))
    return out / TEXTS, out / HUMAN


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wmt17", type=Path, help="the WMT17/ folder (DA-syslevel.csv, references/, system-outputs/)")
    parser.add_argument("--segments", type=int, default=500, help="keep the first N segments of each test set (500)")
    parser.add_argument("--out", type=Path, default=Path("data"), help="output folder")
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
