"""The one place that imports matplotlib, with the house style of every figure."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from inferplan.errors import InferplanError, InvalidArgument

__all__ = ["STYLE", "drawn", "drawn_segments", "hits", "place_clear", "styled_figure"]

#: Small type sized for a two-column paper; TrueType fonts embedded in PDFs.
STYLE: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "savefig.dpi": 300,
}


@contextmanager
def styled_figure(paths: Sequence[str | Path], **kwargs: Any) -> Iterator[Any]:
    """A matplotlib ``Figure`` (not attached to pyplot) drawn in :data:`STYLE` and saved to
    each of ``paths`` on leaving the block (format by suffix: png, pdf, svg, ...).

    Raises
    ------
    InferplanError
        If matplotlib is not installed, or a path's suffix names no image format.
    """
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise InferplanError("drawing needs matplotlib: pip install 'inferplan[plots]'") from None
    # rcParams are read when artists are created, so the whole drawing happens in the context.
    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]
        figure = Figure(**kwargs)
        known = figure.canvas.get_supported_filetypes()
        for path in paths:
            suffix = Path(path).suffix.lower().lstrip(".")
            if suffix not in known:
                raise InvalidArgument(
                    f"cannot draw a figure as {suffix or 'a file without suffix'!r}: use one of "
                    + ", ".join(sorted(known)),
                    source=str(path),
                )
        yield figure
        for path in paths:
            figure.savefig(str(path), bbox_inches="tight")


def drawn(figure: Any) -> Any:
    """Draw ``figure`` (on an Agg canvas if it has none that renders) so that its artists
    have their final extents; its renderer."""
    if not hasattr(figure.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(figure)
    figure.canvas.draw()
    return figure.canvas.get_renderer()


def drawn_segments(
    figure: Any, above: float = -math.inf
) -> list[tuple[float, float, float, float]]:
    """Every straight piece of every line and arrow drawn in ``figure``'s axes (of those
    drawn at a z-order of at least ``above``), in display coordinates (the figure must have
    been drawn: ``figure.canvas.draw()``)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    pieces = []
    parts: Any
    for ax in figure.axes:
        for artist in [*ax.lines, *ax.patches, *ax.texts]:
            if artist.get_zorder() < above:
                continue
            if isinstance(artist, Line2D) and artist.get_visible():
                parts = [artist.get_transform().transform(artist.get_xydata())]
            elif isinstance(artist, FancyArrowPatch) and artist.get_visible():
                parts = artist.get_path().to_polygons(closed_only=False)
            elif getattr(artist, "arrow_patch", None) is not None:  # an annotation's arrow
                parts = artist.arrow_patch.get_path().to_polygons(closed_only=False)
            else:
                continue
            for part in parts:
                points = np.asarray(part, dtype=float)
                finite = np.isfinite(points).all(axis=1)
                for k in range(len(points) - 1):
                    if finite[k] and finite[k + 1]:
                        (ax_, ay), (bx, by) = points[k], points[k + 1]
                        pieces.append((float(ax_), float(ay), float(bx), float(by)))
    return pieces


def hits(box: Any, segments: Sequence[tuple[float, float, float, float]], pad: float = 1.0) -> bool:
    """Whether any of ``segments`` passes through ``box`` (a display-space ``Bbox``, grown by
    ``pad`` pixels), sampled every pixel along each segment."""
    x0, y0, x1, y1 = box.x0 - pad, box.y0 - pad, box.x1 + pad, box.y1 + pad
    for ax_, ay, bx, by in segments:
        steps = max(2, int(max(abs(bx - ax_), abs(by - ay))) + 1)
        t = np.linspace(0.0, 1.0, steps)
        xs, ys = ax_ + t * (bx - ax_), ay + t * (by - ay)
        if np.any((xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)):
            return True
    return False


def place_clear(
    figure: Any,
    labels: Sequence[tuple[Any, Sequence[tuple[float, float]]]],
    above: float = -math.inf,
) -> None:
    """Move each label (an annotation placed in offset points) to the first of its candidate
    offsets where its box crosses no drawn line or arrow (of those drawn at a z-order of at
    least ``above``: labels on an opaque box hide the ones below) and no label placed before
    it; a label with no clear candidate keeps its first."""
    renderer = drawn(figure)
    segments = drawn_segments(figure, above)
    placed: list[Any] = []
    for label, candidates in labels:
        for offset in candidates:
            label.xyann = offset
            box = label.get_window_extent(renderer)
            if not hits(box, segments) and not any(box.overlaps(other) for other in placed):
                break
        else:
            label.xyann = candidates[0]
        placed.append(label.get_window_extent(renderer))


# Where a label may sit (offset points from its node or its arrow's middle), first choice first.
BESIDE_NODE = [(0.0, 27.0), (0.0, -27.0), (0.0, 38.0), (0.0, -38.0), (34.0, 24.0),
                (-34.0, 24.0), (34.0, -24.0), (-34.0, -24.0)]  # fmt: skip
BELOW_NODE = [BESIDE_NODE[1], BESIDE_NODE[0], *BESIDE_NODE[2:]]


def beside_arrow(dx: float, dy: float) -> list[tuple[float, float]]:
    """Offsets (points) from an arrow's middle to either side of it, nearest first."""
    length = math.hypot(dx, dy) or 1.0
    nx, ny = -dy / length, dx / length
    return [(side * d * nx, side * d * ny) for d in (10.0, 16.0, 24.0, 32.0) for side in (1, -1)]
