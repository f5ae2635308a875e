"""Point functions for the engine's tests (importable by worker processes as
``tests.experiments.points:...``)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def draw(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Two rows per point from the point's own generator, so rows depend on seed and params."""
    rng = np.random.default_rng(seed)
    return [{"k": k, "value": float(rng.random()) * params["x"]} for k in range(2)]


def draw_rows(points: Any) -> list[dict[str, Any]]:
    """The rows a sweep of :func:`draw` over ``points`` gives, computed from the documented rule
    (point id, seed and parameters in front), independently of the engine."""
    rows = []
    for point in points:
        rng = np.random.default_rng(point.seed)
        for k in range(2):
            value = float(rng.random()) * point.params["x"]
            rows.append({"point": point.id, "seed": point.seed, **point.params, "k": k,
                         "value": value})  # fmt: skip
    return rows


def slow_draw(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """:func:`draw`, slowly enough that a test can kill the process mid-sweep."""
    time.sleep(float(options.get("sleep", 0.05)))
    return draw(params, seed, options)


def flaky(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`draw`, but raises for the ``x`` listed in the file ``options["fail_file"]`` (if it
    exists), so that a test can make points fail once and then succeed."""
    path = Path(options["fail_file"])
    if path.exists() and params["x"] in json.loads(path.read_text()):
        raise ValueError(f"x = {params['x']} is cursed")
    return draw(params, seed, options)


def bad_rows(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> Any:
    """Rows of every kind a point function may wrongly return, by ``x``."""
    return [None, 5, {"a": object()}, [{"a": 1}, "b"], {"a": np.float64(0.5), "b": np.int64(3)}][
        params["x"]
    ]


def marked_sleep(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Write this process's id into ``options["marks"]``, then sleep ``options["sleep"]`` s:
    a test can see which processes run points, and kill the sweep while they do."""
    marks = Path(options["marks"])
    (marks / f"{os.getpid()}").write_text(str(params["x"]))
    time.sleep(float(options["sleep"]))
    return {"pid": os.getpid()}


def die(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """End the worker process at ``x == options["die_at"]``, as a crash or an OOM kill would."""
    if params["x"] == options["die_at"]:
        os._exit(3)
    return {"x": params["x"]}
