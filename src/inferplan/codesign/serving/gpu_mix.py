"""The cheapest mix of GPUs from a price list that serves a histogram of request sizes.

This is Mélange's problem (Griggs et al., "Mélange: Cost Efficient Large Language Model Serving
by Exploiting GPU Heterogeneity", 2024), the purchase of LLM serving without a network.

Requests fall into buckets ``b`` of size (prompt and output tokens), arriving at ``r_b``
requests/s. A GPU type ``t`` is rented at ``c_t`` $/h, and one GPU of it sustains at most
``mu[t, b]`` requests/s of bucket ``b``'s size within the service's latency objective (profiled;
0 when it cannot serve that size at all). Serving a rate ``q`` of bucket ``b`` on type ``t``
takes ``q / mu[t, b]`` of one such GPU, its *load*; loads on a type add up, and ``n_t`` GPUs
carry a load of up to ``n_t``. Each bucket's rate is cut into ``S`` equal slices, each served
wholly by one type (Mélange's slices; ``S = 1``: a bucket is served by one type). With
``k[b, t]`` the slices of bucket ``b`` given to type ``t``::

    k[b, t] in {0, ..., S},   sum_t k[b, t] = S          every slice is served once
    sum_b r_b / (S mu[t, b]) k[b, t] <= n_t             type t's GPUs carry their load
    n_t in {0, 1, ...}  (n_t <= available_t when given)
    minimise  sum_t c_t n_t                             $/h

A type may be a unit of ``g_t`` GPUs of one kind working as one node by tensor parallelism
(:func:`tensor_parallel`), rented, priced and profiled as a whole; a limit on the GPUs of a kind
holds over all its units: ``sum_{t of kind K} g_t n_t <= limit_K``.

A type that cannot serve a bucket (``mu = 0``) gets no slice of it. With ``fractional=True``
the ``k[b, t]`` are continuous: a bucket's rate may be split freely across types (the counts stay
integers), which bounds the sliced problem from below for every ``S``.

Exactness: the slices of one bucket are alike (the same rate, the same load on each type), so
how many of them each type takes is all that matters, and the counts ``k`` above are Mélange's
matrix of binary slice-to-type choices without its ``S!`` orderings per bucket: the two
programs have the same optima. HiGHS proves the optimum to a relative gap of
:data:`~inferplan.codesign.milp.cost.MIP_REL_GAP`; the counts of the result are then recomputed from
the assignment, as the least integers that carry each type's load (a load within
:data:`LOAD_TOLERANCE` of an integer counts as that integer: a share of ``0.2`` times ``30``
requests/s is ``6.000000000000001`` in floating point), and the result is ``"optimal"`` when
their exact price is within :data:`~inferplan.codesign.milp.cost.CERTIFIED_GAP` of HiGHS's lower
bound. HiGHS works here at the feasibility and integrality tolerance :data:`MIX_TOLERANCE`, not the
1e-10 of the co-design MILPs: at 1e-10, without presolve, its branch and bound proves wrong
bounds on this program (a free split of two buckets over three types "optimal" at $1.41/h when
two GPUs of $0.40/h carry it, its bound 1.41 too), the counts being integers over continuous
shares. A solve cut short by ``time_limit`` is ``"time_limit"`` (its best mix, if it found one);
a rate no mix can serve is ``"infeasible"``, with the reason, as data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from scipy import sparse

from inferplan.arrays import FloatArray
from inferplan.codesign.milp.cost import CERTIFIED_GAP, highs
from inferplan.errors import InvalidArgument

__all__ = [
    "LOAD_TOLERANCE",
    "MIX_TOLERANCE",
    "GpuMix",
    "GpuMixProblem",
    "GpuMixStatus",
    "ProfiledGpu",
    "gpus_needed",
    "solve_gpu_mix",
    "tensor_parallel",
]

GpuMixStatus = Literal["optimal", "time_limit", "uncertified", "infeasible"]

LOAD_TOLERANCE = 1e-9
"""A load ``L`` (in GPUs) takes ``ceil(L (1 - LOAD_TOLERANCE))`` GPUs: rounding in the rates
does not buy a GPU."""


MIX_TOLERANCE = 1e-9
"""HiGHS's feasibility and integrality tolerance for this program (see the module docstring):
the least that HiGHS's maintainers advise, at which it matched a brute force over counts on
thousands of random small problems where 1e-10 missed the optimum in one in a thousand."""


def gpus_needed(load: float) -> int:
    """The fewest GPUs that carry ``load`` (a sum of rates over sustainable rates), up to
    :data:`LOAD_TOLERANCE`.

    Examples
    --------
    >>> gpus_needed(0.2 * 30 / 2), gpus_needed(2.5), gpus_needed(0.0)
    (3, 3, 0)
    """
    return max(0, math.ceil(load * (1.0 - LOAD_TOLERANCE)))


def _finite(value: float, what: str, *, positive: bool) -> float:
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        kind = "positive" if positive else "non-negative"
        raise InvalidArgument(f"must be a {kind} finite number, got {value!r}", field=what)
    return number


def _whole(value: int, what: str, *, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = "a non-negative integer" if least == 0 else f"an integer >= {least}"
        raise InvalidArgument(f"must be {kind}, got {value!r}", field=what)


@dataclass(frozen=True)
class ProfiledGpu:
    """A GPU type of a price list, or a unit of several GPUs of one kind serving as one node.

    Parameters
    ----------
    name
        The type's name (``"A100-80GB"``).
    price_per_hour
        Its rental price, $ per hour of one unit (positive).
    rates
        Per bucket of the problem, the most requests/s of that bucket's size one unit of this
        type sustains within the latency objective (0: it cannot serve that size).
    available
        The most units of this type that can be had (``None``: no limit).
    gpus
        GPUs in one unit (1: a single GPU; more: tensor parallelism, see
        :func:`tensor_parallel`).
    kind
        The GPU the unit is made of, for limits on GPUs of a kind (default: ``name``).
    """

    name: str
    price_per_hour: float
    rates: tuple[float, ...]
    available: int | None = None
    gpus: int = 1
    kind: str = ""

    def __post_init__(self) -> None:
        where = f"types[{self.name!r}]"
        if not self.name:
            raise InvalidArgument("a GPU type needs a name", field="types")
        price = _finite(self.price_per_hour, f"{where}.price_per_hour", positive=True)
        rates = tuple(
            _finite(rate, f"{where}.rates[{b}]", positive=False)
            for b, rate in enumerate(self.rates)
        )
        if self.available is not None:
            _whole(self.available, f"{where}.available", least=0)
        _whole(self.gpus, f"{where}.gpus", least=1)
        object.__setattr__(self, "price_per_hour", price)
        object.__setattr__(self, "rates", rates)
        object.__setattr__(self, "kind", self.kind or self.name)


def tensor_parallel(gpu: ProfiledGpu, k: int, efficiency: float, *, name: str = "") -> ProfiledGpu:
    """A unit of ``k`` GPUs of ``gpu``'s kind serving as one node by tensor parallelism.

    It costs ``k`` times ``gpu``'s price and sustains ``k * efficiency`` times its rates
    (``efficiency``: the fraction of ``k`` separate GPUs' rate the unit reaches, positive; it
    may pass 1 where the unit's memory holds a larger batch). Sizes ``gpu`` cannot serve stay
    unserved: give the unit's own profiled rates as a :class:`ProfiledGpu` of ``gpus=k`` instead.

    Examples
    --------
    >>> pair = tensor_parallel(ProfiledGpu("A100-80GB", 3.67, (20.0, 40.0)), 2, 0.9)
    >>> pair.name, pair.price_per_hour, pair.rates, pair.gpus, pair.kind
    ('A100-80GBx2', 7.34, (36.0, 72.0), 2, 'A100-80GB')
    """
    _whole(k, "k", least=1)
    scale = _finite(efficiency, "efficiency", positive=True)
    return ProfiledGpu(
        name or f"{gpu.name}x{k}", k * gpu.price_per_hour, tuple(k * scale * r for r in gpu.rates),
        None if gpu.available is None else gpu.available // k, k * gpu.gpus, gpu.kind,
    )  # fmt: skip


@dataclass(frozen=True)
class GpuMixProblem:
    """Buckets of requests and the GPU types that may serve them (see the module docstring).

    Parameters
    ----------
    bucket_rates
        Requests/s of each bucket (non-negative).
    types
        The GPU types, each with one sustainable rate per bucket.
    slices
        Into how many equal slices each bucket's rate is cut, each served by one type.
    bucket_names
        A name per bucket, for results (default ``"0"``, ``"1"``, ...).
    gpu_limits
        ``(kind, n)`` pairs: at most ``n`` GPUs of that kind over all units made of it.

    Raises
    ------
    InvalidArgument
        Naming the field: a negative or non-finite number, a type's rates not one per bucket,
        two types of one name, no bucket or no type, ``slices`` below 1.
    """

    bucket_rates: tuple[float, ...]
    types: tuple[ProfiledGpu, ...]
    slices: int = 1
    bucket_names: tuple[str, ...] = field(default=())
    gpu_limits: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        rates = tuple(
            _finite(rate, f"bucket_rates[{b}]", positive=False)
            for b, rate in enumerate(self.bucket_rates)
        )
        if not rates:
            raise InvalidArgument("needs at least one bucket", field="bucket_rates")
        if not self.types:
            raise InvalidArgument("needs at least one GPU type", field="types")
        names = [gpu.name for gpu in self.types]
        for gpu in self.types:
            if names.count(gpu.name) > 1:
                raise InvalidArgument(f"two GPU types named {gpu.name!r}", field="types")
            if len(gpu.rates) != len(rates):
                raise InvalidArgument(
                    f"has {len(gpu.rates)} rates for {len(rates)} buckets",
                    field=f"types[{gpu.name!r}].rates",
                )
        _whole(self.slices, "slices", least=1)
        buckets = self.bucket_names or tuple(str(b) for b in range(len(rates)))
        if len(buckets) != len(rates) or len(set(buckets)) != len(buckets):
            raise InvalidArgument("must name each bucket once", field="bucket_names")
        kinds = {gpu.kind for gpu in self.types}
        limits = tuple((str(kind), n) for kind, n in self.gpu_limits)
        for kind, n in limits:
            where = f"gpu_limits[{kind!r}]"
            if kind not in kinds:
                raise InvalidArgument("no GPU type is of this kind", field=where)
            _whole(n, where, least=0)
        if len({kind for kind, _ in limits}) != len(limits):
            raise InvalidArgument("limits a kind twice", field="gpu_limits")
        object.__setattr__(self, "bucket_rates", rates)
        object.__setattr__(self, "types", tuple(self.types))
        object.__setattr__(self, "gpu_limits", limits)
        object.__setattr__(self, "bucket_names", tuple(buckets))

    def loads(self) -> FloatArray:
        """``loads[b, t]``: the GPUs of type ``t`` that bucket ``b``'s whole rate takes
        (``inf`` where the type cannot serve a bucket with requests, 0 for an empty bucket)."""
        rate = np.asarray(self.bucket_rates)[:, None]
        mu = np.array([gpu.rates for gpu in self.types]).T
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(rate == 0, 0.0, rate / mu)


@dataclass(frozen=True)
class GpuMix:
    """The GPUs to rent and which of them serve which bucket.

    Attributes
    ----------
    type_names, bucket_names
        The problem's GPU types and buckets, in order.
    counts
        Units of each type (GPUs, for types of one GPU).
    cost
        Their price, $/h (``inf`` when there is no mix).
    status
        ``"optimal"`` (certified), ``"time_limit"``, ``"uncertified"`` or ``"infeasible"``.
    lower_bound
        No mix costs less ($/h), as HiGHS proved.
    served
        ``served[b][t]``: requests/s of bucket ``b`` that type ``t`` serves.
    slices
        ``slices[b][t]``: the slices of bucket ``b`` type ``t`` serves (``None`` when
        fractional).
    fractional
        Whether a bucket's rate could be split freely.
    reason
        Why there is no mix, or ``""``.
    kinds, unit_gpus
        Each type's kind of GPU and GPUs per unit.
    """

    type_names: tuple[str, ...]
    bucket_names: tuple[str, ...]
    counts: tuple[int, ...]
    cost: float
    status: GpuMixStatus
    lower_bound: float
    served: tuple[tuple[float, ...], ...]
    slices: tuple[tuple[int, ...], ...] | None
    fractional: bool
    reason: str
    kinds: tuple[str, ...]
    unit_gpus: tuple[int, ...]

    def count_of(self) -> dict[str, int]:
        """Units per type name (types with none left out)."""
        return {name: n for name, n in zip(self.type_names, self.counts, strict=True) if n}

    def gpus_of(self) -> dict[str, int]:
        """GPUs per kind, over the units made of it (kinds with none left out)."""
        out: dict[str, int] = {}
        for kind, g, n in zip(self.kinds, self.unit_gpus, self.counts, strict=True):
            if n:
                out[kind] = out.get(kind, 0) + g * n
        return out

    def to_dict(self) -> dict[str, Any]:
        """The mix as plain data (``cost`` and ``lower_bound`` ``None`` when not finite)."""

        def per_bucket(rows: Sequence[Sequence[float]]) -> dict[str, dict[str, float]]:
            return {
                bucket: {t: v for t, v in zip(self.type_names, row, strict=True) if v}
                for bucket, row in zip(self.bucket_names, rows, strict=True)
            }

        return {
            "counts": self.count_of(),
            "gpus": self.gpus_of(),
            "cost": self.cost if math.isfinite(self.cost) else None,
            "status": self.status,
            "lower_bound": self.lower_bound if math.isfinite(self.lower_bound) else None,
            "fractional": self.fractional,
            "served": per_bucket(self.served),
            "slices": None if self.slices is None else per_bucket(self.slices),
            "reason": self.reason,
        }


def _no_mix(problem: GpuMixProblem, fractional: bool, status: GpuMixStatus, reason: str) -> GpuMix:
    zeros = tuple(0 for _ in problem.types)
    empty = tuple(tuple(0.0 for _ in problem.types) for _ in problem.bucket_rates)
    return GpuMix(
        tuple(gpu.name for gpu in problem.types), problem.bucket_names, zeros, math.inf,
        status, -math.inf if status != "infeasible" else math.inf, empty, None, fractional,
        reason, *_kinds(problem),
    )  # fmt: skip


def _kinds(problem: GpuMixProblem) -> tuple[tuple[str, ...], tuple[int, ...]]:
    return tuple(gpu.kind for gpu in problem.types), tuple(gpu.gpus for gpu in problem.types)


def solve_gpu_mix(
    problem: GpuMixProblem, *, fractional: bool = False, time_limit: float | None = None
) -> GpuMix:
    """The least $/h of GPUs that serves every bucket's rate (see the module docstring).

    Parameters
    ----------
    problem
        The buckets and the GPU types.
    fractional
        Let a bucket's rate be split freely across types instead of in ``problem.slices``
        equal slices.
    time_limit
        Seconds HiGHS may take (``None``: no limit).

    Returns
    -------
    GpuMix
        With status ``"infeasible"`` (and the reason) when no mix serves the rate.

    Examples
    --------
    Mélange's example: two types, four buckets of a 30 requests/s workload.

    >>> a10g = ProfiledGpu("A10G", 1.01, (2, 1, 5, 2))
    >>> a100 = ProfiledGpu("A100-80GB", 3.67, (20, 20, 40, 20))
    >>> problem = GpuMixProblem((6.0, 3.0, 15.0, 6.0), (a10g, a100))
    >>> mix = solve_gpu_mix(problem)
    >>> mix.count_of(), round(mix.cost, 2), mix.status
    ({'A10G': 3, 'A100-80GB': 1}, 6.7, 'optimal')
    >>> split = solve_gpu_mix(problem, fractional=True)
    >>> split.count_of(), round(split.cost, 2)
    ({'A10G': 1, 'A100-80GB': 1}, 4.68)
    """
    if time_limit is not None and not time_limit > 0:
        raise InvalidArgument(f"must be positive seconds, got {time_limit!r}", field="time_limit")
    loads = problem.loads()  # [b, t]
    B, T = loads.shape
    limit_of = dict(problem.gpu_limits)
    available = np.array([
        min(math.inf if gpu.available is None else gpu.available,
            limit_of[gpu.kind] // gpu.gpus if gpu.kind in limit_of else math.inf)
        for gpu in problem.types
    ])  # fmt: skip
    can = np.isfinite(loads) & (available > 0)[None, :]
    busy = np.asarray(problem.bucket_rates) > 0
    for b in np.flatnonzero(busy & ~can.any(axis=1)):
        reason = f"no GPU type serves bucket {problem.bucket_names[b]!r}"
        return _no_mix(problem, fractional, "infeasible", reason + " (every rate is 0)")
    if not busy.any():
        none = _no_mix(problem, fractional, "optimal", "")
        slices = None if fractional else tuple(tuple(0 for _ in row) for row in none.served)
        return replace(none, cost=0.0, lower_bound=0.0, slices=slices)
    pb, pt = np.nonzero(can & busy[:, None])  # the (bucket, type) pairs that may get slices
    S = problem.slices
    # n_t at most what carries every bucket it can serve
    most = np.array([gpus_needed(float(loads[pb[pt == t], t].sum())) for t in range(T)], float)
    most = np.minimum(most, available)
    prices = np.array([gpu.price_per_hour for gpu in problem.types])
    P = pb.size
    c = np.concatenate((prices, np.zeros(P)))
    cols = np.arange(P) + T
    served_once = sparse.csr_array((np.ones(P), (pb, cols)), shape=(B, T + P))
    carried = sparse.csr_array(
        (np.concatenate((-np.ones(T), loads[pb, pt] / S)),
         (np.concatenate((np.arange(T), pt)), np.concatenate((np.arange(T), cols)))),
        shape=(T, T + P),
    )  # fmt: skip
    pooled = sparse.csr_array(
        np.array([[gpu.gpus if gpu.kind == kind else 0 for gpu in problem.types] + [0] * P
                  for kind, _ in problem.gpu_limits]).reshape(-1, T + P)
    )  # fmt: skip
    pool_sizes = np.array([n for _, n in problem.gpu_limits], float)
    result = highs(
        c, A_ub=sparse.vstack((carried, pooled)), b_ub=np.concatenate((np.zeros(T), pool_sizes)),
        A_eq=served_once[busy], b_eq=np.full(int(busy.sum()), S),
        bounds=np.column_stack((np.zeros(T + P), np.concatenate((most, np.full(P, S))))),
        integrality=np.concatenate((np.ones(T), np.zeros(P) if fractional else np.ones(P))),
        time_limit=time_limit, tolerance=MIX_TOLERANCE,
    )  # fmt: skip
    if result.x is None:
        if result.status == 2:
            limits = ", ".join(
                [f"{gpu.name} <= {gpu.available}" for gpu in problem.types
                 if gpu.available is not None]
                + [f"{kind} GPUs <= {n}" for kind, n in problem.gpu_limits]
            )  # fmt: skip
            return _no_mix(problem, fractional, "infeasible",
                           f"the GPUs available ({limits}) cannot carry the rate")  # fmt: skip
        return _no_mix(problem, fractional, "time_limit", str(result.message))
    share = np.zeros((B, T))
    share[pb, pt] = np.clip(result.x[T:], 0.0, S)
    if fractional:  # HiGHS's crumbs of 1e-15 would each buy a GPU: a share that small is none
        share[share < LOAD_TOLERANCE * S] = 0.0
        total = share.sum(axis=1, keepdims=True)
        share = np.divide(share * S, total, out=np.zeros_like(share), where=total > 0)
    else:
        share = np.rint(share)
    used = np.where(share > 0, loads, 0.0) * share / S
    counts = tuple(gpus_needed(float(used[:, t].sum())) for t in range(T))
    cost = float(sum(n * gpu.price_per_hour for n, gpu in zip(counts, problem.types, strict=True)))
    bound = getattr(result, "mip_dual_bound", None)
    lower = float(bound) if bound is not None and math.isfinite(bound) else -math.inf
    status: GpuMixStatus
    if result.status != 0:
        status = "time_limit"
    elif cost <= lower + CERTIFIED_GAP * max(abs(lower), 1.0) and all(
        n <= limit for n, limit in zip(counts, available, strict=True)
    ) and all(
        sum(gpu.gpus * n for gpu, n in zip(problem.types, counts, strict=True)
            if gpu.kind == kind) <= size
        for kind, size in problem.gpu_limits
    ):  # fmt: skip
        status = "optimal"
    else:
        status = "uncertified"
    rates = np.asarray(problem.bucket_rates)[:, None] * share / S
    return GpuMix(
        tuple(gpu.name for gpu in problem.types), problem.bucket_names, counts, cost, status,
        min(lower, cost), tuple(tuple(float(v) for v in row) for row in rates),
        None if fractional else tuple(tuple(int(k) for k in row) for row in share), fractional,
        "", *_kinds(problem),
    )  # fmt: skip

