"""The heatmap of one alignment (a similarity matrix or a transport plan, tokens or sentences on
both axes), drawn with matplotlib (imported only when a figure is drawn)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from moverkit.demo.widgets import Heatmap

LABEL_CHARS = 30
"""Axis labels (tokens, sentences) longer than this end in an ellipsis."""

DPI = 100
"""Pixels per inch of the drawn figure (matplotlib's default, as Gradio sends it)."""

_CHAR = 0.085  # inches of one character of a 9 pt tick label (0.6 em, and some room for wide letters)
_CELL = 0.45  # inches of one heatmap cell, at least, while the plot fits
_PLOT = (12.0, 10.0)  # the largest width and height of the matrix itself, in inches
_TICK = 0.2  # inches between two labels, at least (a 9 pt line is 0.125 in)
_SHORT_LABEL = 8  # characters a label keeps, at least, in a figure fitted to a narrow width

HEATMAP_CSS = "#heatmap .matplotlib img {max-width: 100%; width: auto; height: auto; margin: 0 auto}"
"""The heatmap shows at its drawn size (9 pt labels), which the page asks to fit its width
(:func:`heatmap_figure`'s ``max_width``); never wider than its box, so that the title and the
colour bar stay in view."""


@dataclass(frozen=True)
class _Layout:
    rows: list[str]
    columns: list[str]
    cell_width: float
    cell_height: float
    upright: bool
    size: tuple[float, float]
    colorbar: str  # where the colour bar sits: "right", or "bottom" in a narrow figure


def _layout(rows: list[str], columns: list[str], width: float | None) -> _Layout:
    """Label lengths, cell sizes and figure size (inches). ``width`` None: the figure grows with
    its labels (a matrix up to :data:`_PLOT`); else the figure is ``width`` wide, its labels
    shortened to fit and its colour bar below the matrix."""
    chars = LABEL_CHARS if width is None else max(_SHORT_LABEL, min(LABEL_CHARS, int(0.3 * width / _CHAR)))
    rows = [shorten(t, chars) for t in rows]
    columns = [shorten(t, chars) for t in columns]
    row_chars = max((len(label) for label in rows), default=1)
    column_chars = max((len(label) for label in columns), default=1)
    flat = max(_CELL, _CHAR * column_chars + 0.2)  # a cell as wide as the longest column label
    row_block = _CHAR * row_chars + 0.8  # the row labels and the axis label
    if width is None:
        upright = len(columns) * flat <= _PLOT[0]
        cell_width = flat if upright else min(_CELL, _PLOT[0] / max(len(columns), 1))
        right, below = 1.4, 0.0  # the colour bar and its label
    else:
        cell_width = max(width - row_block - 0.3, 0.5) / max(len(columns), 1)
        upright = flat <= cell_width
        right, below = 0.3, 0.9
    cell_height = min(0.35, _PLOT[1] / max(len(rows), 1))
    label_height = 0.5 if upright else 0.71 * _CHAR * column_chars + 0.4
    natural = max(5.0, row_block + len(columns) * cell_width + right)
    height = max(3.0, 0.6 + len(rows) * cell_height + label_height + 0.5 + below)
    size = (natural if width is None else width, height)
    return _Layout(rows, columns, cell_width, cell_height, upright, size, "right" if width is None else "bottom")


def heatmap_figure(alignment: dict, heatmap: Heatmap, title: str, max_width: float | None = None):
    """A matplotlib figure of one alignment matrix: rows are the prediction's tokens (or
    sentences), columns the reference's; when the matrix is small, every cell that does not
    round to zero carries its value, in black or white as the cell's luminance asks (where the
    value fits its cell).

    Labels stay readable: longer than :data:`LABEL_CHARS` they end in "…"; column labels are
    horizontal while a cell can be as wide as the longest, else at 45°; the figure grows with the
    number of labels (up to a 12 x 10 inch matrix), and past that only every k-th label is shown,
    so that none overlaps.

    ``max_width``: the pixels (at :data:`DPI`) the figure may take, the width of its box on the
    page. A figure that would be wider is drawn that wide: labels shortened (to 30% of the width,
    at least 8 characters), cells narrower (every k-th label where they do not fit), the colour
    bar below the matrix; so that on a phone the title, every column and the scale are in view."""
    import numpy as np
    from matplotlib.figure import Figure

    layout = _layout(list(alignment[heatmap.rows]), list(alignment[heatmap.columns]), None)
    if max_width is not None and layout.size[0] * DPI > max_width:
        layout = _layout(list(alignment[heatmap.rows]), list(alignment[heatmap.columns]), max_width / DPI)
    rows, columns, cell_width, cell_height = layout.rows, layout.columns, layout.cell_width, layout.cell_height
    matrix = np.asarray(alignment[heatmap.matrix], dtype=np.float64).reshape(len(rows), len(columns))
    fig = Figure(figsize=layout.size, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    if layout.colorbar == "right":
        ax.set_title(title)
    else:  # over the whole figure: the matrix sits right of its labels, and a title over it alone gets cut
        fig.suptitle(title, fontsize=10)
    if matrix.size == 0:
        ax.text(0.5, 0.5, "nothing to align: a text has no scored token", ha="center", va="center", wrap=True)
        ax.set_axis_off()
        return fig
    image = ax.imshow(matrix, cmap=heatmap.colormap, aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, label=heatmap.title, location=layout.colorbar, **_colorbar_size(layout))
    column_step = math.ceil(_TICK / cell_width)
    row_step = math.ceil(_TICK / cell_height)
    ticks = range(0, len(columns), column_step)
    if layout.upright:
        ax.set_xticks(ticks, [columns[j] for j in ticks], fontsize=9)
    else:
        ax.set_xticks(ticks, [columns[j] for j in ticks], fontsize=9, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(0, len(rows), row_step), rows[::row_step], fontsize=9)
    ax.set_xlabel(heatmap.column_label)
    ax.set_ylabel(heatmap.row_label)
    if matrix.size <= 150:
        zero = format(0.0, heatmap.value_format)
        texts = {ij: format(value, heatmap.value_format) for ij, value in np.ndenumerate(matrix)}
        widest = max(len(text) for text in texts.values())
        # 8 pt where the widest value fits its cell (a digit is about 0.6 em), smaller down to 6 pt, else none;
        # a figure fitted to a phone is shown shrunk, where values under 7.5 pt blurred: none there.
        size = min(8.0, 72 * cell_width / (0.62 * widest), 72 * cell_height * 0.8)
        smallest = 6.0 if layout.colorbar == "right" else 7.5
        for (i, j), text in texts.items() if size >= smallest else ():
            if text.lstrip("-") == zero:  # a blank cell reads as zero (sparse transport plans)
                continue
            red, green, blue, _ = image.cmap(image.norm(matrix[i, j]))
            color = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=round(size, 1), color=color)
    return fig


def _colorbar_size(layout: _Layout) -> dict:
    return {} if layout.colorbar == "right" else {"fraction": 0.06, "pad": 0.02, "aspect": 30}


def pick_heatmap(alignment: dict, heatmaps: Sequence[Heatmap], title: str) -> Heatmap:
    """The heatmap called ``title``, or, where this alignment lacks its matrix (None), the next
    one that has it (e.g. Wordset-CKA has a similarity matrix but no transport plan)."""
    start = next((i for i, h in enumerate(heatmaps) if h.title == title), 0)
    ordered = [*heatmaps[start:], *heatmaps[:start]]
    return next((h for h in ordered if alignment.get(h.matrix) is not None), ordered[0])


def shorten(text: str, width: int) -> str:
    """``text``, or its first ``width - 1`` characters and "…"."""
    return text if len(text) <= width else text[: width - 1] + "…"
