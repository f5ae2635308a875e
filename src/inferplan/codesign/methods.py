"""The co-design methods: the one table of every provisioning method and what it takes.

:func:`~inferplan.codesign.provision`, the cost frontier, the sweep studies and the command line
all read :data:`METHODS`; a method's name appears nowhere else. A method name may carry a
tie-break as a suffix (``pwf-keep``, ``pfp-random``) for a method that takes one: that is the
method with ``tie_break`` fixed, as the studies compare them.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from inferplan.errors import InvalidArgument

if TYPE_CHECKING:
    from inferplan.codesign.instance import CodesignInstance
    from inferplan.codesign.plan import Plan

__all__ = [
    "METHODS",
    "OPTIONS",
    "SERVICE_METHODS",
    "TIE_BREAKS",
    "Method",
    "TieBreak",
    "get_method",
    "get_service_method",
    "method_label",
    "method_names",
    "resolve",
    "solve",
    "throughput_methods",
]

OPTIONS = ("tie_break", "seed", "time_limit", "latency")
"""Every option a method may take: ``tie_break`` and ``seed`` (which of several tied
throughput-optimal deployments a baseline follows), ``time_limit`` (seconds an exact solver
may take), ``latency`` (a bound in seconds on the plan's latency)."""

TieBreak = Literal["solver", "keep", "random"]
TIE_BREAKS: tuple[TieBreak, ...] = ("solver", "keep", "random")
"""How a baseline chooses among tied throughput-optimal deployments (its ``tie_break``)."""


@dataclass(frozen=True)
class Solver:
    """A solver function named by its module, imported when first called: reading the table
    (for names, help texts and choices) loads no solver and none of its dependencies."""

    module: str
    function: str

    def __call__(self, *args: Any, **options: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.function)(*args, **options)


@dataclass(frozen=True)
class Method:
    """A provisioning method.

    Attributes
    ----------
    name
        What users call it (``provision(..., method=name)``, ``--method name``).
    solve
        ``solve(inst, beta, **options) -> Plan``, a :class:`Solver`.
    exact
        Whether its plans are proven optimal (status ``"optimal"``) rather than a baseline's
        (``"heuristic"``).
    acyclic_only
        Whether it needs the network between source and target to be acyclic.
    options
        The options of :data:`OPTIONS` it takes.
    label
        Its name in figures and reports.
    summary
        One line for help texts.
    throughput
        ``throughput(inst) -> Deployment``, the method's way to ``T*`` (the least interval
        under the existing capacities), for the exact methods that have one: ``throughput(...,
        method=name)``.
    bounded
        ``bounded(inst, beta, latency=L, **options) -> Plan``, the method under a latency
        bound, for the methods that take ``latency``.
    lattice
        Which of ``"solve"`` and ``"throughput"`` keep no tables of every pair of cuts, so
        that they take every ideal of a layer graph up to ``max_ideals`` (T* by the lattice
        engine, :mod:`~inferplan.codesign.engine.lattice`), when no node's memory is given and
        neither a latency bound nor a random tie-break asks for the tables.
    memory_lattice
        Which of those keep no tables of pairs when a node's memory is given too (PSG's
        solve, by the subset step, :mod:`~inferplan.codesign.engine.subsets`).
    """

    name: str
    solve: Solver
    exact: bool
    acyclic_only: bool
    options: tuple[str, ...]
    label: str
    summary: str
    throughput: Solver | None = None
    bounded: Solver | None = None
    lattice: tuple[Literal["solve", "throughput"], ...] = ()
    memory_lattice: tuple[Literal["solve", "throughput"], ...] = ()


METHODS: Mapping[str, Method] = {
    m.name: m
    for m in (
        Method(name="psg", solve=Solver("inferplan.codesign.engine.psg", "solve_psg"), exact=True,
               acyclic_only=True, options=("latency",), label="PSG",
               summary="exact minimum cost (acyclic networks)",
               throughput=Solver("inferplan.codesign.engine.throughput", "throughput_optimal"),
               bounded=Solver("inferplan.codesign.latency.bound", "solve_latency"),
               lattice=("solve", "throughput"), memory_lattice=("solve",)),
        Method(name="milp", solve=Solver("inferplan.codesign.milp.cost", "solve_milp"), exact=True,
               acyclic_only=False, options=("time_limit", "latency"), label="MILP",
               summary="exact MILP (HiGHS) on any network, cycles too",
               throughput=Solver("inferplan.codesign.milp.throughput", "throughput_milp"),
               bounded=Solver("inferplan.codesign.milp.latency", "solve_milp_latency")),
        Method(name="pfp", solve=Solver("inferplan.codesign.heuristics", "solve_pfp"),
               exact=False, acyclic_only=True, options=("tie_break", "seed", "latency"),
               label="PFP",
               summary="baseline: provisioning under frozen partitioning",
               bounded=Solver("inferplan.codesign.heuristics", "solve_pfp"),
               lattice=("solve",)),
        Method(name="pwf", solve=Solver("inferplan.codesign.heuristics", "solve_pwf"),
               exact=False, acyclic_only=True, options=("tie_break", "seed"), label="PWF",
               summary="baseline: provisioning with water-filling", lattice=("solve",)),
        Method(name="psg-reference", solve=Solver("inferplan.codesign.engine.psg", "reference_psg"),
               exact=True, acyclic_only=True, options=(), label="Algorithm 1",
               summary="the paper's Algorithm 1, scalar loops (slow; for checks)"),
    )
}  # fmt: skip
"""Every provisioning method, by name."""


SERVICE_METHODS: Mapping[str, Method] = {
    m.name: m
    for m in (
        Method(name="milp", solve=Solver("inferplan.codesign.services.milp", "solve_joint_milp"),
               exact=True, acyclic_only=False, options=("time_limit",), label="joint MILP",
               summary="exact joint MILP (HiGHS) on any network, latency bounds too"),
        Method(name="fast", solve=Solver("inferplan.codesign.services.fast", "solve_joint_fast"),
               exact=False, acyclic_only=True, options=("seed",), label="fast",
               summary="best responses with PSG and a proven lower bound (acyclic networks)"),
    )
}  # fmt: skip
"""Every method that plans several services together (``provision_services(...,
method=name)``, ``provision --services``): a table of its own, since its solvers take a
:class:`~inferplan.codesign.services.joint.JointProblem` rather than one instance. ``exact`` is
whether its plans are proven optimal; the fast planner's plans carry a proven gap instead."""


def get_service_method(name: str) -> Method:
    """The method of :data:`SERVICE_METHODS` called ``name``.

    Raises
    ------
    InvalidArgument
        Naming the parameter ``method`` and the known names.
    """
    return _lookup(SERVICE_METHODS, name, " for several services")


def get_method(name: str) -> Method:
    """The method called ``name``.

    Raises
    ------
    InvalidArgument
        Naming the parameter ``method`` and the known names.
    """
    return _lookup(METHODS, name, "")


def _lookup(table: Mapping[str, Method], name: str, what: str) -> Method:
    if name not in table:
        raise InvalidArgument(
            f"unknown method {name!r}{what} (known: {', '.join(table)})", field="method"
        )
    return table[name]


def throughput_methods() -> list[str]:
    """The methods that compute ``T*`` (``throughput(..., method=name)``)."""
    return [m.name for m in METHODS.values() if m.throughput is not None]


def method_names() -> list[str]:
    """Every method name and every ``method-tiebreak`` variant, as :func:`resolve` reads them."""
    names = list(METHODS)
    for m in METHODS.values():
        if "tie_break" in m.options:
            names += [f"{m.name}-{tie}" for tie in TIE_BREAKS]
    return names


def resolve(name: str) -> tuple[Method, dict[str, Any]]:
    """The method and preset options of ``name``: a method, or ``method-tiebreak``.

    Examples
    --------
    >>> method, preset = resolve("pwf-keep")
    >>> method.name, preset
    ('pwf', {'tie_break': 'keep'})
    """
    base, _, tie = name.rpartition("-")
    if name not in METHODS and base in METHODS and tie in TIE_BREAKS:
        method = METHODS[base]
        if "tie_break" in method.options:
            return method, {"tie_break": tie}
    return get_method(name), {}


def method_label(name: str) -> str:
    """The name of ``name`` in figures and reports.

    Examples
    --------
    >>> method_label("psg"), method_label("pwf-keep")
    ('PSG', 'PWF (keep)')
    """
    method, preset = resolve(name)
    return f"{method.label} ({preset['tie_break']})" if preset else method.label


def solve(inst: CodesignInstance, beta: float, method: str, **options: Any) -> Plan:
    """Run ``method`` (a name of :func:`method_names`) on ``inst`` for target interval ``beta``.

    Options left at ``None`` are not passed; an option the method does not take is an error.

    Raises
    ------
    InvalidArgument
        For an unknown method, or an option the method does not take (naming the option).
    Infeasible
        If no plan the method can make meets ``beta`` within the capacity caps.
    """
    chosen, preset = resolve(method)
    given = {k: v for k, v in options.items() if v is not None}
    for key in given:
        if key not in chosen.options or key in preset:
            takes = ", ".join(o for o in chosen.options if o not in preset) or "no options"
            raise InvalidArgument(
                f"method {method!r} does not take {key} (it takes: {takes})", field=key
            )
    solver = chosen.bounded if "latency" in given else chosen.solve
    assert solver is not None  # a method that takes latency has a bounded solver
    bound, work = given.get("latency"), inst.most_work
    if bound is not None and 0 < bound < math.inf and not work / bound < math.inf:
        raise InvalidArgument(  # within L, some node computes at S_N / L FLOP/s at least
            f"a latency of {bound:g} s needs capacities beyond floating point (at least "
            f"{work:g} FLOP in that time): check the units of "
            "the bound, the profile and the network",
            field="latency",
        )
    plan: Plan = solver(inst, beta, **preset, **given)
    if not math.isfinite(plan.cost):  # a bound so tight its capacities overflow
        bounded = f" and a latency of {bound:g} s" if bound is not None else ""
        raise InvalidArgument(
            f"an interval of {beta:g} s{bounded} needs capacities beyond floating point (the "
            "cheapest plan costs inf): check the units of the target, the profile and the network",
            field="latency" if bounded else "interval",
        )
    return plan
