"""The sparse rows and the HiGHS call that the layout MILPs share (:mod:`.helix`, its exact
solver's interval models, and :mod:`.helix_baselines`, Helix's per-node MILP)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scipy.optimize import Bounds, LinearConstraint, OptimizeResult, milp
from scipy.sparse import coo_matrix

from inferplan.arrays import FloatArray
from inferplan.native import native_stdout_muted

__all__ = ["Rows", "solve_milp"]


@dataclass
class Rows:
    """Constraints ``low <= sum(a x[c]) <= high``, one :meth:`add` a row."""

    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)
    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)

    def add(self, entries: list[tuple[int, float]], low: float, high: float) -> None:
        """The row of ``(column, coefficient)`` pairs ``entries`` within ``[low, high]``."""
        r = len(self.lb)
        for c, a in entries:
            self.rows.append(r)
            self.cols.append(c)
            self.vals.append(a)
        self.lb.append(low)
        self.ub.append(high)

    def constraint(self, columns: int) -> LinearConstraint:
        """The rows over ``columns`` columns, for :func:`scipy.optimize.milp`."""
        shape = (len(self.lb), columns)
        a = coo_matrix((self.vals, (self.rows, self.cols)), shape=shape).tocsr()
        return LinearConstraint(a, self.lb, self.ub)


def solve_milp(
    objective: FloatArray,
    rows: Rows,
    integrality: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
    seconds: float,
) -> OptimizeResult:
    """Minimise ``objective`` subject to ``rows`` and the bounds by HiGHS within ``seconds``
    (a relative gap of 1e-9), quiet: descriptor 1 is muted while it runs, since HiGHS's
    debugging lines go there whatever its options say (:mod:`inferplan.native`)."""
    with native_stdout_muted():
        return milp(
            objective,
            constraints=rows.constraint(len(objective)),
            integrality=integrality,
            bounds=Bounds(lower, upper),
            options={"time_limit": max(seconds, 0.01), "mip_rel_gap": 1e-9, "disp": False},
        )
