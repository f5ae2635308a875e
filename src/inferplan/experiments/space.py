"""Parameter spaces (grids and seeded random samples) and the identity and seed of each point.

A point is a plain mapping of parameter names to JSON scalars. Its id is a hash of the
canonical JSON of those parameters, and its seed is derived from the sweep seed and the
parameters named in ``seed_from`` (all of them by default), so any single point can be
recomputed alone, on any machine, in any order.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MAX_POINTS",
    "SAMPLE_INDEX",
    "Distribution",
    "Point",
    "canonical_json",
    "distinct_known",
    "grid_points",
    "linspace",
    "make_points",
    "point_id",
    "point_seed",
    "sample_points",
]

Scalar = str | int | float | bool | None

#: The most points one sweep may have. A spec is sized before any point is made, and a larger
#: one is refused with its size: a sweep's points (and its rows) are held in memory.
MAX_POINTS = 1_000_000


def canonical_json(params: Mapping[str, Any]) -> str:
    """The one JSON text of ``params``: sorted keys, no spaces, floats as their shortest repr.

    ``1`` and ``1.0`` are different texts, hence different points.
    """
    return json.dumps(
        params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _digest(params: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(canonical_json(params).encode("utf-8")).digest()


def point_id(params: Mapping[str, Any]) -> str:
    """A 16-hex-digit id of a point: the start of the SHA-256 of its canonical JSON."""
    return _digest(params).hex()[:16]


def point_seed(sweep_seed: int, params: Mapping[str, Any]) -> int:
    """The seed of a point: ``SeedSequence([sweep_seed, sha256(params)])``, 63 bits.

    63 bits so that the seed fits a signed 64-bit column in CSV, Parquet and pandas.

    Examples
    --------
    >>> point_seed(0, {"topology": 3}) == point_seed(0, {"topology": 3})
    True
    >>> point_seed(0, {"topology": 3}) != point_seed(1, {"topology": 3})
    True
    """
    return _seed(sweep_seed, _digest(params))


def _seed(sweep_seed: int, digest: bytes) -> int:
    entropy = [int(sweep_seed), int.from_bytes(digest, "big")]
    word = np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0]
    return int(word) >> 1


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its id, its parameters and its seed."""

    id: str
    params: Mapping[str, Scalar]
    seed: int


def make_points(
    params_list: Iterable[Mapping[str, Scalar]],
    *,
    sweep_seed: int,
    seed_from: Sequence[str] | None = None,
) -> tuple[Point, ...]:
    """Points of ``params_list`` (in order, duplicates dropped), seeded from ``sweep_seed``.

    ``seed_from`` names the parameters the seed depends on; points that agree on those share a
    seed, e.g. every method and target of one random topology (``seed_from=["topology"]``).
    """
    points: dict[str, Point] = {}
    shared: dict[bytes, int] = {}  # seeds by seeded digest, when points share them
    for params in params_list:
        plain = dict(params)
        digest = _digest(plain)
        pid = digest.hex()[:16]  # point_id, from the one digest
        if pid in points:
            continue
        if seed_from is None:
            seed = _seed(sweep_seed, digest)
        else:
            seeded = _digest({k: plain.get(k) for k in seed_from})
            if seeded not in shared:
                shared[seeded] = _seed(sweep_seed, seeded)
            seed = shared[seeded]
        points[pid] = Point(pid, plain, seed)
    return tuple(points.values())


def grid_points(axes: Mapping[str, Sequence[Scalar]]) -> list[dict[str, Scalar]]:
    """The cartesian product of ``axes``, the first axis varying slowest.

    Examples
    --------
    >>> grid_points({"a": [1, 2], "b": ["x"]})
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]
    """
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes.values())]


@dataclass(frozen=True)
class Distribution:
    """How one parameter of a random sample is drawn.

    ``kind`` is ``uniform`` (``low``, ``high``), ``log_uniform`` (``exp(U(ln low, ln high))``),
    ``integers`` (``low`` inclusive to ``high`` exclusive) or ``choice`` (``values``), or
    ``fixed`` (``values[0]``).
    """

    kind: str
    low: float = 0.0
    high: float = 1.0
    values: tuple[Scalar, ...] = ()

    def draw(self, rng: np.random.Generator) -> Scalar:
        if self.kind == "uniform":
            return _uniform(rng, self.low, self.high)
        if self.kind == "log_uniform":
            value = float(np.exp(rng.uniform(math.log(self.low), math.log(self.high))))
            # exp(log(x)) can round a hair beyond the bounds at the extremes of float.
            return min(max(value, self.low), self.high)
        if self.kind == "integers":
            # numpy draws from [low, high) within 64-bit integers (the spec checks the bounds).
            return int(rng.integers(int(self.low), int(self.high)))
        if self.kind == "choice":
            return self.values[int(rng.integers(len(self.values)))]
        return self.values[0]


def _uniform(rng: np.random.Generator, low: float, high: float) -> float:
    """``U(low, high)``, also where ``high - low`` overflows (e.g. ``[-1e308, 1e308]``): then
    twice a draw from the halved bounds, which consumes the same one random number."""
    if math.isfinite(high - low):
        return float(rng.uniform(low, high))
    return 2.0 * float(rng.uniform(low / 2, high / 2))


def linspace(start: float, stop: float, count: int) -> list[float]:
    """``numpy.linspace(start, stop, count)`` as floats, also where ``stop - start`` overflows
    (then twice the halved bounds' linspace, which has the same endpoints).

    Examples
    --------
    >>> linspace(-1e308, 1e308, 3)
    [-1e+308, 0.0, 1e+308]
    """
    if math.isfinite(stop - start):
        return [float(x) for x in np.linspace(start, stop, count)]
    return [2.0 * float(x) for x in np.linspace(start / 2, stop / 2, count)]


SAMPLE_INDEX = "sample"
"""The parameter that carries a sampled point's index: a replicate, never an axis."""


def sample_points(
    distributions: Mapping[str, Distribution], size: int, *, seed: int
) -> list[dict[str, Scalar]]:
    """``size`` parameter sets drawn from ``distributions`` with ``default_rng(seed)``.

    Each set also carries its index as :data:`SAMPLE_INDEX` so that equal draws stay distinct
    points. Draws are made point by point, parameters in the given order, so a larger ``size``
    extends a smaller one.
    """
    rng = np.random.default_rng(seed)
    out = []
    for k in range(size):
        params: dict[str, Scalar] = {SAMPLE_INDEX: k}
        for name, dist in distributions.items():
            params[name] = dist.draw(rng)
        out.append(params)
    return out


def distinct_known(names: Sequence[str], known: Sequence[str], what: str) -> list[str]:
    """``names`` if each is one of ``known`` and none repeats (a study's list of methods).

    Raises
    ------
    ValueError
        Naming the first unknown name and the known ones, or the repetition.
    """
    for name in names:
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}s must not repeat")
    return list(names)
