"""Shared by the device-edge tests: a small system, and an edge server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from inferplan.runtime.edge import BackgroundEdge, EdgeService, create_app
from inferplan.runtime.layered import LayeredModel, ModelSpec, build_layers, load_model_system

MLP = "tests.runtime.models:mlp"
MLP_SHAPE = (1, 16)


def system_data(**overrides: Any) -> dict[str, Any]:
    """A system whose layers come from the model (its input uploaded at 32 bits per element):
    a slow device, a 3-level channel, a free download; the optimal and the 1-sla placement of
    the test MLP are both M = N = 4 with finite thresholds (the tests check this)."""
    data: dict[str, Any] = {
        "device": {"cpu_hz": 1.0e5, "kappa": 1.0e-28, "tx_power_w": 0.1, "bandwidth_hz": 1.0e5},
        "edge": {"cpu_hz": 1.0e8},
        "downlink_bps": 1.0e12,
        "inferences_per_update": 1000,
        "energy_weight": 0.5,
        "channel": {"kind": "discrete", "snr": [0.05, 1.0, 30.0], "prob": [0.3, 0.4, 0.3]},
        "layers": {"input_bits_per_element": 32},
    }
    data.update(overrides)
    return data


def write_system(path: Path, **overrides: Any) -> Path:
    path.write_text(json.dumps(system_data(**overrides)), encoding="utf-8")
    return path


def spec(model: str = MLP, shape: tuple[int, ...] = MLP_SHAPE, blocks: Any = None) -> ModelSpec:
    return ModelSpec(model, input_shapes=(shape,), blocks=blocks)


def reference_model(model_spec: ModelSpec, seed: int = 0) -> LayeredModel:
    """The model as the edge builds it (same seed): the tests' oracle for outputs."""
    return build_layers(model_spec, weights=True, seed=seed)


@contextlib.contextmanager
def running_edge(
    tmp_path: Path,
    model_spec: ModelSpec | None = None,
    *,
    token: str | None = None,
    max_body_bytes: int | None = None,
    **system: Any,
) -> Iterator[tuple[BackgroundEdge, EdgeService]]:
    """An edge for ``model_spec`` (the test MLP by default) on 127.0.0.1, stopped on exit."""
    model_spec = model_spec or spec()
    layered = build_layers(model_spec, weights=True)
    path = write_system(tmp_path / "system.json", **system)
    service = EdgeService(
        layered, load_model_system(path, layered.profile), max_body_bytes=max_body_bytes
    )
    edge = BackgroundEdge(create_app(service, token=token), timeout_s=20.0).start()
    try:
        yield edge, service
    finally:
        edge.stop()


def run_stages(layered: LayeredModel, values: tuple[torch.Tensor, ...], first: int, last: int):
    """Layers ``first..last`` (1-based) of ``layered`` on ``values``."""
    with torch.no_grad():
        for stage in layered.stages[first - 1 : last]:
            values = stage(*values)
    return values
