"""Formatting for people: quantities with SI prefixes (tables, captions, figure labels), the
one notation of a link, ``s -> a1``, and a list of names cut short."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["link_name", "listed", "si"]


def si(value: float, unit: str = "") -> str:
    """``12.3 G`` style formatting with an SI prefix.

    Examples
    --------
    >>> si(1.25e9, "FLOP/s"), si(0.0206, "s"), si(0.0)
    ('1.25 GFLOP/s', '20.6 ms', '0')
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    prefixes = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"),
                (1e-6, "µ"), (1e-9, "n")]  # fmt: skip
    for scale, prefix in prefixes:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}".strip()
    return f"{value:.4g} {unit}".strip()


def link_name(source: str, target: str | None = None) -> str:
    """A link as tables, messages and figures show it: ``source -> target``; given one
    argument, a link id ``"u->v"`` (as a bottleneck names it) in that notation.

    Examples
    --------
    >>> link_name("s", "a1"), link_name("s->a1")
    ('s -> a1', 's -> a1')
    """
    if target is None:
        source, _, target = source.partition("->")
    return f"{source} -> {target}"


def listed(names: Sequence[str], shown: int = 4) -> str:
    """Names (the layers a stage runs, the tensors a link sends) for a table cell or a
    message: the first ``shown`` and how many there are in all.

    Examples
    --------
    >>> listed(["conv1", "relu"]), listed(["a", "b", "c", "d", "e"], shown=2)
    ('conv1, relu', 'a, b, ... (5 in all)')
    """
    if len(names) <= shown:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f", ... ({len(names)} in all)"
