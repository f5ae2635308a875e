"""A plan's stages as deployment artefacts: one ``torch.export`` program per path node and a
manifest that chains them (``inferplan split``).

The model is built as ``inferplan run`` builds it (:func:`~inferplan.runtime.measure.build_model`:
``torch.manual_seed(seed)`` before the factory), or from a state dict, and cut at the plan's
cuts (:mod:`inferplan.runtime.split`). Path node ``l`` computes blocks ``partition[l-1] + 1 ..
partition[l]``, or in a plan cut at ideals of the layer graph the layers ``layers[l]``; its
program's ``forward`` takes the tensors crossing into it, positionally (stage 0: the model's
inputs), and returns those crossing out of it as a tuple (the last stage: the model's outputs),
each list in the order the manifest gives. A node that only forwards gets a program that
returns its inputs.
Each program is saved with ``torch.export.save`` and holds its own weights, so a deployment
needs torch and the files, not the model's code:

```python
import json, torch
manifest = json.load(open("DIR/manifest.json"))
values = (x,)
for stage in manifest["stages"]:
    values = torch.export.load("DIR/" + stage["file"]).module()(*values)
```

Shapes are fixed: each program takes exactly the shapes and dtypes its manifest entry lists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from inferplan.codesign.plan import Plan
from inferplan.documents import open_regular
from inferplan.errors import InvalidFile
from inferplan.profiles.cuts import BlockSpec, Granularity
from inferplan.profiles.from_torch import load_module_factory
from inferplan.runtime.measure import build_model
from inferplan.runtime.split import TensorSpec, trace_model

__all__ = ["MANIFEST", "Artefacts", "export_stages", "load_weights"]

MANIFEST = "manifest.json"
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Artefacts:
    """What :func:`export_stages` wrote: the folder and the manifest (``DIR/manifest.json``)."""

    folder: Path
    manifest: dict[str, Any]

    @property
    def files(self) -> tuple[Path, ...]:
        """The stage programs in path order, then the manifest."""
        return (*(self.folder / s["file"] for s in self.manifest["stages"]),
                self.folder / MANIFEST)  # fmt: skip


class _Forward(torch.nn.Module):
    """A node that holds no blocks: its inputs, passed on as they are."""

    def forward(self, *values: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(values)


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load the state dict saved at ``path`` (``torch.save(model.state_dict(), path)``) into
    ``model``; every key must match (read with ``weights_only=True``: nothing is unpickled)."""
    where = str(path)
    handle = open_regular(where)
    try:
        with handle:
            state = torch.load(handle, weights_only=True, map_location="cpu")
    except Exception as exc:  # torch.load raises many kinds for a file that is not a state dict
        raise InvalidFile(f"cannot load: {type(exc).__name__}: {exc}".strip(": ").splitlines()[0],
                          source=where) from None  # fmt: skip
    if not isinstance(state, dict):
        raise InvalidFile(f"must hold a state dict, got {type(state).__name__}", source=where)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = "; ".join(lines[1:]) or lines[0]
        raise InvalidFile(f"not this model's weights: {detail}", source=where) from None


def _tensors(names: Sequence[str], specs: Sequence[TensorSpec]) -> list[dict[str, Any]]:
    return [{"name": name, "shape": list(s.shape), "dtype": s.dtype}
            for name, s in zip(names, specs, strict=True)]  # fmt: skip


def _file_name(k: int, node: str) -> str:
    return f"stage{k}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', node)}.pt2"


def export_stages(
    model: str,
    input_shapes: Sequence[Shape],
    plan: Plan,
    folder: str | Path,
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
    seed: int = 0,
    weights: str | Path | None = None,
    granularity: Granularity = "blocks",
) -> Artefacts:
    """Write one ``torch.export`` program per node of ``plan.path`` and ``manifest.json``.

    Parameters
    ----------
    model
        ``module.path:factory`` or ``file.py:factory``.
    input_shapes, blocks, dtype, input_dtypes, granularity
        As for ``inferplan run``: they define the profile the plan was made for.
    plan
        The plan; its partition must cover the profile's blocks (or, cut at ideals, its
        layers form a chain of ideals of the profile's layer graph).
    folder
        Where to write (made if missing).
    seed
        ``torch.manual_seed(seed)`` before the factory, as ``inferplan run`` does.
    weights
        A state dict file to load instead of the seeded weights.

    Raises
    ------
    InferplanError
        For a plan that does not fit the model, or a weights file that is not the model's.
    """
    name = model.rpartition(":")[2]
    if weights is None:
        module = build_model(model, seed=seed, dtype=dtype)
    else:
        module = load_module_factory(model, device="cpu").eval()
        load_weights(module, weights)
        if dtype != "float32":
            module = module.to(TensorSpec((), dtype).torch_dtype)
    traced = trace_model(module, input_shapes, blocks=blocks, dtype=dtype,
                         granularity=granularity,
                         input_dtypes=input_dtypes, name=name)  # fmt: skip
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    stages = []
    graph = plan.cuts == "graph"
    for k, (node, stage) in enumerate(zip(plan.path, traced.plan_stages(plan), strict=True)):
        module = stage.module.eval() if stage.module is not None else _Forward()
        example = tuple(torch.zeros(s.shape, dtype=s.torch_dtype) for s in stage.receives_specs)
        program = torch.export.export(module, example)
        file = _file_name(k, node)
        torch.export.save(program, out / file)
        nxt = plan.path[k + 1] if k + 1 < len(plan.path) else None
        held: dict[str, Any] = (
            {"layers": list(plan.layers[k])} if graph
            else {"blocks": [plan.cut_indices[k - 1] if k else 0, plan.cut_indices[k]]}
        )  # fmt: skip
        stages.append({
            "node": node,
            **held,
            "file": file,
            "inputs": _tensors(stage.receives, stage.receives_specs),
            "outputs": _tensors(stage.sends, stage.sends_specs),
            "next": None if nxt is None else {"node": nxt, "link": f"{node}->{nxt}"},
        })  # fmt: skip
    manifest: dict[str, Any] = {"model": name, "cuts": plan.cuts,
                                "blocks": list(traced.profile.blocks),
                                "stages": stages}  # fmt: skip
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return Artefacts(out, manifest)
