"""``inferplan profile``: show a DNN profile or write it as a profile file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferplan.cli.main import app, friendly_errors
from inferplan.cli.render import console, print_json, si, table
from inferplan.profiles import load_profile, save_profile


@app.command("profile")
@friendly_errors
def profile_command(
    model: Annotated[str, typer.Argument(help="A built-in name (vgg16, resnet50, alexnet, "
                                              "mlp-WxD) or a profile file.")],  # fmt: skip
    as_json: Annotated[bool, typer.Option("--json", help="Print the profile file format.")] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to a file.")] = None,
) -> None:
    """Print a DNN profile: FLOPs and activation size per block."""
    profile = load_profile(model)
    if output is not None:
        save_profile(profile, output)
    if as_json:
        print_json(profile.to_dict())
        return
    rows = [["input", "", si(profile.activation_bits[0], "bit"), ""]]
    for k, name in enumerate(profile.blocks):
        rows.append([f"{k + 1}. {name}", si(profile.flops[k], "FLOP"),
                     si(profile.activation_bits[k + 1], "bit"), si(profile.params[k])])  # fmt: skip
    console.print(table(f"{profile.name}: {profile.n_blocks} blocks, "
                        f"{si(profile.total_flops, 'FLOP')} per inference",
                        ["block", "FLOPs", "activation after", "params"], rows))  # fmt: skip
