"""Formatting for people: quantities with SI prefixes (tables, captions, figure labels), and
the one notation of a link, ``s -> a1``."""

from __future__ import annotations

import math

__all__ = ["link_name", "si"]


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
