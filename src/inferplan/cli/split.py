"""``inferplan split``: a plan's stages written as ``torch.export`` programs and a manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import BlocksOpt, DtypeOpt, GranularityOpt, JsonOpt, RunShapesOpt
from inferplan.cli.render import console, print_json, table, written
from inferplan.errors import InvalidFile, InvalidProfile


@app.command("split")
@friendly_errors
def split_command(
    model: Annotated[str, typer.Argument(help=(
        "The PyTorch model as module.path:factory (or file.py:factory), as for run."))],
    plan: Annotated[Path, typer.Option(
        "--plan", help="The plan (what provision --json wrote for this model).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder to write the stages to.")],
    input_shape: RunShapesOpt = None,
    blocks: BlocksOpt = None,
    granularity: GranularityOpt = None,
    dtype: DtypeOpt = "float32",
    seed: Annotated[int, typer.Option(
        "--seed", help="torch.manual_seed before the factory, as run does.", min=0)] = 0,
    weights: Annotated[Path | None, typer.Option(
        "--weights", help="A state dict (torch.save(model.state_dict(), FILE)) to use "
        "instead of the seeded weights.")] = None,
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Write each path node's stage as a torch.export program.

    One .pt2 file per node of the plan's path (its weights inside) and manifest.json: the
    tensors each stage takes and returns, in path order.
    """
    from inferplan.codesign.planfile import load_plan
    from inferplan.profiles.cuts import (
        check_factory,
        parse_block_spec,
        parse_granularity,
        parse_shape,
    )

    # everything that needs no torch first
    check_factory(model)
    loaded = load_plan(plan)
    if not input_shape:
        raise InvalidProfile("give the shape of each input (--input-shape)", field="input-shape")
    parsed = [parse_shape(s) for s in input_shape]
    if weights is not None and not weights.is_file():
        raise InvalidFile("file not found", source=str(weights))
    try:
        from inferplan.runtime.artefacts import MANIFEST, export_stages
    except ImportError:
        raise InvalidProfile("splitting a model needs torch (pip install 'inferplan[torch]')"
                             ) from None  # fmt: skip
    artefacts = export_stages(
        model, tuple(s for s, _ in parsed), loaded, out, blocks=parse_block_spec(blocks),
        dtype=dtype, input_dtypes=tuple(d for _, d in parsed), seed=seed, weights=weights,
        granularity=parse_granularity(granularity),
    )  # fmt: skip
    if as_json:
        print_json(artefacts.manifest)
    else:
        from inferplan.units import listed

        rows = []
        graph = artefacts.manifest["cuts"] == "graph"
        for s in artefacts.manifest["stages"]:
            if graph:
                held = listed(s["layers"]) or "-"
            else:
                first, last = s["blocks"]
                held = f"{first + 1}..{last}" if last > first else "-"
            shapes = ["x".join(map(str, t["shape"])) for t in s["outputs"]]
            rows.append([s["node"], held, s["file"], ", ".join(shapes)])
        console.print(table(f"{artefacts.manifest['model']}: one program per path node",
                            ["node", "layers" if graph else "blocks", "file", "passes on"],
                            rows))  # fmt: skip
    written(out / MANIFEST)
