"""The reports of a :class:`~moverkit.comparison.Comparison`: Markdown for the terminal, one JSON
object, a PNG of the intervals and a self-contained HTML page (the PNG embedded)."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from moverkit.combination import COMBINED
from moverkit.facts.specs import spec
from moverkit.formats.lines import write_atomic


def higher_is_better(metric: str) -> bool:
    """A metric's direction (its spec's); a combination's scores are oriented higher-is-better."""
    return True if metric == COMBINED else spec(metric).higher_is_better


def _direction(metric: str) -> str:
    return "higher is better" if higher_is_better(metric) else "lower is better"


def _reference_points(metric: str, settings: dict) -> str:
    """The metric's reference points as its scores here read them: rescaled when the comparison
    rescaled with the shipped baseline, and said to be of the default settings when others ran."""
    if metric == COMBINED:
        return "z-scored components, weights fitted on human scores: 0 is the training data's mean segment"
    s = spec(metric)
    kwargs = dict(settings.get("metric_kwargs", {}).get(metric, {}))
    rescaled = kwargs.pop("rescale_with_baseline", False)
    points = s.rescaled_reference_points() if rescaled else s.reference_points()
    text = ", ".join(
        f"{name} {value:.3g}" if name != "identical texts" else f"{name} {value:g}" for name, value in points.items()
    )
    text = text.replace("a machine translation ", "a machine translation about ").replace(
        "unrelated texts ", "unrelated texts about "
    )
    if rescaled:
        text += ", rescaled"
    if kwargs:
        text += "; at the default settings, not those of this comparison"
    return text


def markdown(comparison) -> str:
    """Per metric: the ranking with clusters, each system's score and interval, then every pair."""
    out = []
    for metric, groups in comparison.ranking.items():
        scores = {row["name"]: row for row in comparison.systems if row["metric"] == metric}
        out.append(f"### {metric} ({_direction(metric)}; {_reference_points(metric, comparison.settings)})")
        out.append("")
        out.append("| rank | system | score | 95% interval |")
        out.append("|---:|---|---:|---|")
        for rank, group in enumerate(groups, 1):
            for name in group:
                row = scores[name]
                out.append(f"| {rank} | {name} | {row['score']:.4f} | [{row['ci_low']:.4f}, {row['ci_high']:.4f}] |")
        pairs = [p for p in comparison.pairs if p["metric"] == metric]
        if pairs:
            out += [
                "",
                "| A | B | A better by | 95% interval | p (bootstrap) | p (permutation) | p (Holm) | A wins |",
                "|---|---|---:|---|---:|---:|---:|---:|",
            ]
            for p in pairs:
                out.append(
                    f"| {p['a']} | {p['b']} | {p['delta']:+.4f} | [{p['ci_low']:+.4f}, {p['ci_high']:+.4f}] | "
                    f"{p['p_bootstrap']:.4f} | {p['p_permutation']:.4f} | {p['p_holm']:.4f} | {100 * p['win_rate']:.1f}% |"
                )
        out.append("")
    settings = comparison.settings
    out.append(
        f"Rank: systems in one rank are not significantly apart (paired bootstrap, Holm-corrected over "
        f"the metric's pairs, alpha {settings['alpha']}); {settings['resamples']} resamples, seed {settings['seed']}."
    )
    return "\n".join(out)


def json_text(comparison) -> str:
    return json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False) + "\n"


def write_json(comparison, path) -> None:
    write_atomic(Path(path), json_text(comparison))


def require_matplotlib() -> None:
    """The plot (PNG, and the HTML page that embeds it) needs matplotlib, which ``moverkit[demo]``
    installs: an ImportError that says so, raised before any scoring where the CLI asks."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(
            "the plot of a comparison (--png, --html, plot(), to_html()) needs matplotlib: "
            "pip install 'moverkit[demo]' (or matplotlib)"
        ) from None


def png_bytes(comparison) -> bytes:
    """One panel per metric: each system's score with its interval, best at the top."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = list(comparison.ranking)
    height = max(2.0, 0.35 * len(comparison.systems) / max(1, len(metrics)) + 1.2)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), height), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        rows = {r["name"]: r for r in comparison.systems if r["metric"] == metric}
        order = [name for group in comparison.ranking[metric] for name in group][::-1]
        y = range(len(order))
        scores = [rows[n]["score"] for n in order]
        errors = [
            [rows[n]["score"] - rows[n]["ci_low"] for n in order],
            [rows[n]["ci_high"] - rows[n]["score"] for n in order],
        ]
        ax.errorbar(scores, list(y), xerr=errors, fmt="o", capsize=3)
        ax.set_yticks(list(y), [name.replace("$", r"\$") for name in order])  # a name is text, not mathtext
        ax.set_title(f"{metric} ({_direction(metric)})", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def write_png(comparison, path) -> None:
    write_atomic(Path(path), png_bytes(comparison))


def write_html(comparison, path) -> None:
    write_atomic(Path(path), html_page(comparison))


def html_page(comparison) -> str:
    """The Markdown tables as HTML tables, and the plot as an embedded PNG: one file, no network."""
    image = base64.b64encode(png_bytes(comparison)).decode("ascii")
    body = []
    for block in markdown(comparison).split("\n\n"):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("|"):
            cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if not line.startswith("|--")]
            head, *rows = cells
            body.append(
                "<table><tr>"
                + "".join(f"<th>{html.escape(c)}</th>" for c in head)
                + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
                + "</table>"
            )
        elif lines and lines[0].startswith("###"):
            body.append(f"<h3>{html.escape(lines[0].lstrip('# '))}</h3>")
        elif lines:
            body.append(f"<p>{html.escape(' '.join(lines))}</p>")
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>moverkit compare</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}img{max-width:100%}</style></head><body>"
        f"<h2>moverkit compare</h2><img alt='scores with 95% intervals' src='data:image/png;base64,{image}'>"
        + "".join(body)
        + f"<p>hashcodes: {html.escape(json.dumps(comparison.hashcodes))}</p></body></html>\n"
    )
    return page
