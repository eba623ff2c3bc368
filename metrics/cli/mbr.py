"""``moverkit mbr``: each source's candidate chosen by minimum Bayes risk (:func:`moverkit.mbr_select`).

Two input forms. JSON lines, one source per line: ``{"candidates": [...]}``, with
``"pseudo_references": [...]`` where they are not the candidates themselves (lists may differ
in length from line to line). Or, with ``--num-candidates N``, one candidate per line, ``N``
consecutive lines per source, as ``mbrs-decode`` and ``generate(num_return_sequences=N)`` write
them. The output is JSON lines, one per source in input order: ``{"source": 1, "index": 2,
"text": "...", "expected_score": 0.812345}`` (the source's position from 1, the chosen
candidate's position from 0, its expected utility to 6 decimals), printed, or written whole to
``--out``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from moverkit.formats.options import (
    METRICS,
    add_metric_options,
    encoder_options,
    given_arguments,
    positive_int,
)

DIGITS = 6
"""Decimals of the expected scores written (the encoder runs in float32: about 7 significant digits)."""


def register(commands) -> None:
    mbr = commands.add_parser("mbr", help="choose each source's candidate by minimum Bayes risk")
    mbr.add_argument(
        "--candidates",
        required=True,
        type=Path,
        help='JSON lines, one source per line: {"candidates": [...], "pseudo_references": [...] (optional)}; '
        "with --num-candidates, one candidate per line",
    )
    mbr.add_argument(
        "--num-candidates",
        type=positive_int,
        help="read --candidates as text, N consecutive lines per source (as mbrs-decode reads them)",
    )
    mbr.add_argument(
        "--metric", choices=METRICS, default="centered_bertscore", help="the utility (default: centered_bertscore)"
    )
    mbr.add_argument(
        "--aggregate",
        action="store_true",
        help="reference aggregation, linear time (centered_bertscore and sbertscore)",
    )
    add_metric_options(mbr)
    mbr.add_argument("--out", type=Path, help="write the choices here (JSON lines) instead of printing them")
    mbr.set_defaults(run=run)


def run(args) -> int:
    from moverkit.formats.lines import check_out, write_atomic
    from moverkit.integrations.mbr import mbr_select

    check_out(args.out, [args.candidates])
    sources, references = read_sources(args.candidates, args.num_candidates)
    kwargs = given_arguments(encoder_options(args), args.arg)
    result = mbr_select(sources, metric=args.metric, pseudo_references=references, aggregate=args.aggregate, **kwargs)
    lines = [
        json.dumps(
            {"source": s + 1, "index": i, "text": text, "expected_score": round(score, DIGITS)}, ensure_ascii=False
        )
        + "\n"
        for s, (i, text, score) in enumerate(zip(result["index"], result["text"], result["expected_score"]))
    ]
    if args.out is None:
        sys.stdout.write("".join(lines))
    else:
        write_atomic(args.out, "".join(lines))
        print(f"{len(lines)} choices written to {args.out}", file=sys.stderr)
    print(f"hashcode\t{result['hashcode']}", file=sys.stderr)
    return 0


def read_sources(path: Path, num_candidates: int | None) -> tuple[list[list[str]], list[list[str]]]:
    """Each source's candidates and pseudo-references (the candidates where a line gives none), or
    an error naming the file and the line."""
    from moverkit._core.base import check_texts
    from moverkit.formats.jsonfile import loads
    from moverkit.formats.lines import read_texts

    lines = read_texts(path)
    if num_candidates is not None:
        if len(lines) % num_candidates:
            raise ValueError(
                f"{path} has {len(lines)} lines, not a multiple of --num-candidates {num_candidates} "
                "(every source needs its N consecutive candidates)"
            )
        sources = [lines[at : at + num_candidates] for at in range(0, len(lines), num_candidates)]
        return sources, sources
    sources, references = [], []
    for n, line in enumerate(lines, start=1):
        where = f"{path}, line {n}"
        record = loads(line, where)
        if not isinstance(record, dict) or not isinstance(record.get("candidates"), list):
            raise ValueError(f'{where}: each line must be a JSON object with a "candidates" list')
        given = record.get("pseudo_references", record["candidates"])
        if not isinstance(given, list):
            raise ValueError(f'{where}: "pseudo_references" must be a list of texts')
        for key, texts, into in (
            ("candidates", record["candidates"], sources),
            ("pseudo_references", given, references),
        ):
            if not texts:
                raise ValueError(f"{where}: {key} is an empty list; each source needs at least one text")
            into.append(check_texts(texts, f"{where}: {key}"))
    return sources, references
