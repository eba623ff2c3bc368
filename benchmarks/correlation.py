"""``moverkit bench correlation``: agreement of metrics with human judgments, per group."""

from __future__ import annotations

from benchmarks import CorrelationRow, rows_and_suites
from benchmarks._shared import command_parser, judgments, score_row
from moverkit.formats.options import emit, progress
from moverkit.judgments import Judgments
from moverkit.judgments.correlation import correlate

HELP = "Pearson and Kendall per group with human judgments"


def correlation_table(
    rows: list[CorrelationRow], data: Judgments, log=None
) -> dict[str, dict[str, tuple[float, float]]]:
    """``{label: {group: (pearson, kendall), ..., "avg": (...)}}``; ``log(line)``, when given, hears
    of each row as it ends. The cache of token clouds and sentence vectors is on meanwhile, so the
    rows that read one encoder's layer (BERTScore-F1-b and TWMD-b, say) encode each text once (a
    score moves in its last digits only: :mod:`moverkit._core.encoding.cache`)."""
    from moverkit._core.encoding import cache_enabled

    with cache_enabled():
        return _correlation_table(rows, data, log)


def _correlation_table(rows: list[CorrelationRow], data: Judgments, log) -> dict[str, dict[str, tuple[float, float]]]:
    table = {}
    for row in rows:
        row_data = data if row.inputs is None else row.inputs(data)
        groups = row_data.by_group()
        scores = score_row(row, row_data)
        per_group = {
            g: correlate([scores[i] for i in members], [row_data.human[i] for i in members])
            for g, members in groups.items()
        }
        per_group["avg"] = tuple(sum(v[k] for v in per_group.values()) / len(per_group) for k in (0, 1))
        table[row.label] = per_group
        if log is not None:
            log(f"done: {row.label} (avg Pearson {100 * per_group['avg'][0]:.2f})")
    return table


def format_table(table: dict, rows: list[CorrelationRow]) -> str:
    """Markdown, one line per row, ``tau / r`` per group in percent (the Tempered-WMD paper's
    Table 2 layout). Distances are marked: their correlations are negative. The columns are every
    group of any row (rows on other inputs, such as long documents, may lack some: "–")."""
    groups = list(dict.fromkeys(g for row in rows for g in table[row.label] if g != "avg")) + ["avg"]
    lines = ["| metric | " + " | ".join(groups) + " |", "|---" * (len(groups) + 1) + "|"]
    for row in rows:
        mark = " (distance)" if not row.higher_is_better else ""
        values = [table[row.label].get(g) for g in groups]
        cells = ["–" if v is None else f"{100 * v[1]:.1f} / {100 * v[0]:.1f}" for v in values]
        lines.append(f"| {row.label}{mark} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def register(which) -> None:
    corr = command_parser(which, "correlation", HELP, command, limit=True)
    corr.add_argument("--rows", nargs="*", help="row labels to run (default: all; see --list)")
    corr.add_argument("--list", action="store_true", help="list the row labels and exit")


def command(args) -> int:
    rows, _ = rows_and_suites()
    if args.list:
        print("\n".join(f"{r.label}\t{r.metric}.{r.output} {r.kwargs}" for r in rows))
        return 0
    if args.rows:  # checked before the data are read
        missing = sorted(set(args.rows) - {r.label for r in rows})
        if missing:
            raise ValueError(f"unknown row(s) {', '.join(missing)}; see 'moverkit bench correlation --list'")
        rows = [r for r in rows if r.label in args.rows]
    data = judgments(args)
    report = format_table(correlation_table(rows, data, log=progress), rows)
    header = f"Kendall tau / Pearson r (x100) with human judgments of {args.data.name} ({len(data.human)} segments)"
    return emit(f"{header}\n\n{report}", args.out)
