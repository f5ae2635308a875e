"""Formatting for people: quantities with SI prefixes (tables, captions, figure labels), the
one notation of a link, ``s -> a1``, and a list of names cut short."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["COST_UNIT", "ETC_UNIT", "cost", "etc", "etc_unit", "latency_sum", "link_name",
           "listed", "si"]  # fmt: skip


def si(value: float, unit: str = "") -> str:
    """``12.3 G`` style formatting with an SI prefix.

    Examples
    --------
    >>> si(1.25e9, "FLOP/s"), si(0.0206, "s"), si(0.0), si(0.3662, "bit/s")
    ('1.25 GFLOP/s', '20.6 ms', '0', '0.3662 bit/s')
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    prefixes = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")]
    if not unit.startswith(COUNTED):  # no milli-bits: `mbit/s` would read as megabits
        prefixes += [(1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]
    for scale, prefix in prefixes:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}".strip()
    return f"{value:.4g} {unit}".strip()


COUNTED = ("bit", "FLOP", "B")
"""Units of things counted (bits, operations, bytes), never shown with a prefix below one:
``0.37 bit/s``, not ``366 mbit/s``."""

COST_UNIT = "price units"
"""The unit of a cost: the unit the network's prices are in (a price of 1e-9 per FLOP/s
makes 1 GFLOP/s added cost 1)."""


def cost(value: float) -> str:
    """A cost as output shows it, with its unit.

    Examples
    --------
    >>> cost(87.27234), cost(0.0)
    ('87.2723 price units', '0 price units')
    """
    return f"{value:.6g} {COST_UNIT}"


ETC_UNIT = "ETC units"
"""The unit of a co-inference cost, the energy-time cost (ETC): ``beta_t`` times its seconds
plus ``beta_e`` times its joules (:func:`etc_unit` says so with the system's weights)."""


def etc(value: float) -> str:
    """A co-inference cost (ETC) as output shows it, with its unit.

    Examples
    --------
    >>> etc(0.1222594), etc(0.0)
    ('0.122259 ETC units', '0 ETC units')
    """
    return f"{value:.6g} {ETC_UNIT}"


def etc_unit(energy_weight: float) -> str:
    """What an ETC unit is, for a system of energy weight ``beta_e``.

    Examples
    --------
    >>> etc_unit(0.2)
    'ETC units: 0.8 x seconds + 0.2 x joules (beta_t = 1 - beta_e, beta_e = 0.2)'
    """
    return (f"{ETC_UNIT}: {1 - energy_weight:.4g} x seconds + {energy_weight:.4g} x joules "
            f"(beta_t = 1 - beta_e, beta_e = {energy_weight:.4g})")  # fmt: skip


def latency_sum(
    total: float, compute: float, transfer: float, propagation: float, bound: float | None
) -> str:
    """A latency as the sum of its parts (seconds), and its bound if any.

    Examples
    --------
    >>> latency_sum(0.1028, 0.056, 0.0268, 0.02, 0.11)
    '102.8 ms = 56 ms compute + 26.8 ms transfers + 20 ms link delays (bound 110 ms)'
    """
    within = "" if bound is None else f" (bound {si(bound, 's')})"
    return (f"{si(total, 's')} = {si(compute, 's')} compute + {si(transfer, 's')} transfers + "
            f"{si(propagation, 's')} link delays{within}")  # fmt: skip


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
