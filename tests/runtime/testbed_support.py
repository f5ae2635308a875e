"""Models and helpers of the testbed tests: a model whose stages do real work (a few
milliseconds of CPU each), one that fails only inside a launched rank, and what a run left."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from inferplan.runtime.testbed import leftovers

from .models import Broken

WIDE_SHAPE = (64, 512)


def wide() -> nn.Module:
    """Six blocks (``--blocks depth=1``) of a 512-2048-512 MLP on 64 rows: 268 MFLOP each (a few
    milliseconds of CPU), 1 Mbit between blocks."""
    return nn.Sequential(*[nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512))
                           for _ in range(6)])  # fmt: skip


class FailsInRank(Broken):
    """Like :class:`~tests.runtime.models.Broken`, but its second layer raises only inside a
    launched rank (``RANK`` set), so the launcher can time its blocks and the failure comes
    from a running stage."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(_explode_in_rank(self.fc2(self.fc1(x))))


@torch.fx.wrap
def _explode_in_rank(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "meta" and "RANK" in os.environ:
        raise RuntimeError("boom in a rank")
    return x


def fails_in_rank() -> nn.Module:
    return FailsInRank()


def left_by(pid: int) -> list[Path]:
    """The namespaces and cgroups of the testbed runs launched by process ``pid``."""
    return [path for _, path in leftovers() if path.name.split("-")[2] == str(pid)]
