"""The one place that imports matplotlib, with the house style of every figure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inferplan.errors import InferplanError, InvalidArgument

__all__ = ["STYLE", "styled_figure"]

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
