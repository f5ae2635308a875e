"""Models and helpers of the testbed tests: a model whose stages do real work (a few
milliseconds of CPU each), one that fails only inside a launched rank, and what a run left."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from inferplan.runtime.testbed.linux import leftovers, missing

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


def assert_refused_without_root(args: list[str]) -> None:
    """``inferplan ARGS`` without root (as root: in a user namespace of its own, the same files,
    no privileges) stops with the one line naming root, exit 2, and creates nothing."""
    from .pipeline_support import ROOT, env

    command = [sys.executable, "-m", "inferplan", *args]
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("no unshare to drop root with")
        command = ["unshare", "--user", *command]
    lacks = missing()
    before = list(leftovers()) if not lacks else []
    done = subprocess.run(command, cwd=ROOT, env=env("refused"), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --testbed: the testbed needs root (network namespaces, traffic control and "
        "cgroups need it; sudo resets PATH, so run a venv's command by its path: sudo "
        ".venv/bin/inferplan ...)"
    ]
    if not lacks:
        assert list(leftovers()) == before


def left_by(pid: int) -> list[Path]:
    """The namespaces and cgroups of the testbed runs launched by process ``pid``."""
    return [path for _, path in leftovers() if path.name.split("-")[2] == str(pid)]


def killed_testbed() -> str:
    """Set a testbed up in a child process and SIGKILL it (no teardown): the name of what it
    left, which :func:`leftovers` lists."""
    child = subprocess.Popen([sys.executable, "-c", """
import signal
from inferplan.runtime.testbed.linux import HostSpec, LinkSpec, Testbed, host_address
bed = Testbed([HostSpec(host_address(0), 0.5), HostSpec(host_address(1))],
              [LinkSpec(host_address(0), host_address(1), 1e6)])
bed.setup()
print(bed.name, flush=True)
signal.pause()
"""], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    name = child.stdout.readline().strip()
    child.kill()
    child.wait(10)
    child.stdout.close()
    return name
