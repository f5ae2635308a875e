"""Small seeded test models for the runtime: a ResNet-style CNN (skip connections), a
U-Net-style model (several tensors across a cut), an MLP, and two models with parallel
branches (cut at ideals of their layer graphs), each in a few milliseconds on CPU.

Factories take no arguments, so they work as ``tests.runtime.models:NAME`` on the command line.
"""

from __future__ import annotations

import time

import torch
from torch import nn

__all__ = [
    "Broken",
    "Hangs",
    "Inception",
    "ResidualBlock",
    "TinyResNet",
    "TinyUNet",
    "TwoBranch",
    "broken",
    "hangs",
    "inception",
    "mlp",
    "resnet",
    "two_branch",
    "unet",
    "wide",
]


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(out, out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut = (
            nn.Conv2d(channels, out, 1, stride=stride, bias=False)
            if stride != 1 or channels != out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + self.shortcut(x))


class TinyResNet(nn.Module):
    """Stem, two residual blocks (one downsampling), pooling and a classifier; 3x16x16 input.
    With ``--blocks depth=2`` the cuts inside a block carry both of its branches."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.block1 = ResidualBlock(8, 8, 1)
        self.block2 = ResidualBlock(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(self.block1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyUNet(nn.Module):
    """Two encoder levels and two decoder levels with skips; 3x16x16 input. The cuts between
    ``enc1`` and ``dec1`` carry ``enc1``'s output beside the main path."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.dec2 = nn.Sequential(nn.ConvTranspose2d(16, 8, 2, stride=2), nn.ReLU())
        self.dec1 = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        d2 = self.dec2(self.enc2(e1))
        return self.dec1(torch.cat([e1, d2], dim=1))


class Broken(nn.Module):
    """Profiles and splits like an MLP, but its second layer raises when it runs for real."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(_explode(self.fc2(self.fc1(x))))


@torch.fx.wrap
def _explode(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "meta":
        raise RuntimeError("boom in fc2")
    return x


class Hangs(Broken):
    """Like :class:`Broken`, but its second layer never returns when it runs for real."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(_stall(self.fc2(self.fc1(x))))


@torch.fx.wrap
def _stall(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "meta":
        time.sleep(3600)
    return x


class TwoBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.a1 = nn.Linear(16, 16)
        self.a2 = nn.Linear(16, 8)
        self.b1 = nn.Linear(16, 8)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.stem(x))
        a = self.a2(torch.relu(self.a1(h)))
        return self.head(torch.cat([a, self.b1(h)], dim=1)), h  # two outputs, one read too


class Inception(nn.Module):
    """Two modules of four branches (1x1; 1x1 -> 3x3; 1x1 -> 5x5; pool -> 1x1) and a head."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.m1 = self._module(channels)
        self.m2 = self._module(4 * channels)
        self.head = nn.Linear(16 * channels, 10)

    @staticmethod
    def _module(c: int) -> nn.ModuleDict:
        return nn.ModuleDict({
            "b1": nn.Conv2d(c, c, 1), "b2a": nn.Conv2d(c, c, 1),
            "b2b": nn.Conv2d(c, c, 3, padding=1),
            "b3a": nn.Conv2d(c, c, 1), "b3b": nn.Conv2d(c, c, 5, padding=2),
            "b4": nn.Conv2d(c, c, 1),
        })  # fmt: skip

    @staticmethod
    def _run(m: nn.ModuleDict, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.max_pool2d(x, 3, stride=1, padding=1)
        return torch.cat([m["b1"](x), m["b2b"](m["b2a"](x)), m["b3b"](m["b3a"](x)),
                          m["b4"](pooled)], dim=1)  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._run(self.m2, self._run(self.m1, torch.relu(self.stem(x))))
        return self.head(y.mean(dim=(2, 3)))


def resnet() -> TinyResNet:
    return TinyResNet()


def unet() -> TinyUNet:
    return TinyUNet()


def mlp() -> nn.Sequential:
    """Four ``Linear`` layers with ReLUs; input 1x16."""
    return nn.Sequential(
        nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4),
    )  # fmt: skip


def wide() -> nn.Sequential:
    """A ReLU and a ``Linear`` to one number: an input of 1x2^21 (8 MiB), an output of 4 bytes."""
    return nn.Sequential(nn.ReLU(), nn.Linear(2**21, 1))


def broken() -> Broken:
    return Broken()


def hangs() -> Hangs:
    return Hangs()


def two_branch() -> TwoBranch:
    """Input 2x8; two outputs."""
    return TwoBranch()


def inception() -> Inception:
    """Input 1x3x8x8; cut at ideals with ``--blocks depth=2``."""
    return Inception()
