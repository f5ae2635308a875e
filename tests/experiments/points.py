"""Point functions for the engine's tests (importable by worker processes as
``tests.experiments.points:...``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np


def draw(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Two rows per point from the point's own generator, so rows depend on seed and params."""
    rng = np.random.default_rng(seed)
    return [{"k": k, "value": float(rng.random()) * params["x"]} for k in range(2)]


def slow_draw(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """:func:`draw`, slowly enough that a test can kill the process mid-sweep."""
    time.sleep(float(options.get("sleep", 0.05)))
    return draw(params, seed, options)
