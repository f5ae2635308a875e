"""Sweeps and the papers' studies: points, seeds, executors, the result store, resume.

See ``docs/experiments.md``. The engine (:func:`run_sweep`) runs a point function over a
parameter space locally (joblib) or on Dask, storing each point as it finishes; the studies
build on it (:func:`reproduce_codesign`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.experiments.codesign import CODESIGN_ALPHAS, codesign_sweep, reproduce_codesign
    from inferplan.experiments.engine import Sweep, SweepOutcome, execute_point, run_sweep
    from inferplan.experiments.space import Point, make_points, point_id, point_seed
    from inferplan.experiments.spec import load_spec, sweep_from_spec
    from inferplan.experiments.store import ResultStore
    from inferplan.experiments.studies import STUDIES, Study, register_study

__all__ = [
    "CODESIGN_ALPHAS",
    "STUDIES",
    "Point",
    "ResultStore",
    "Study",
    "Sweep",
    "SweepOutcome",
    "codesign_sweep",
    "execute_point",
    "load_spec",
    "make_points",
    "point_id",
    "point_seed",
    "register_study",
    "reproduce_codesign",
    "run_sweep",
    "sweep_from_spec",
]

export_lazily(
    __name__,
    {
        "inferplan.experiments.codesign": (
            "CODESIGN_ALPHAS",
            "codesign_sweep",
            "reproduce_codesign",
        ),
        "inferplan.experiments.engine": ("Sweep", "SweepOutcome", "execute_point", "run_sweep"),
        "inferplan.experiments.space": ("Point", "make_points", "point_id", "point_seed"),
        "inferplan.experiments.spec": ("load_spec", "sweep_from_spec"),
        "inferplan.experiments.store": ("ResultStore",),
        "inferplan.experiments.studies": ("STUDIES", "Study", "register_study"),
    },
)
