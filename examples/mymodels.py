"""Example PyTorch models for the docs: ``inferplan profile examples/mymodels.py:make_net``.

Each factory builds its model on whatever device is current (``inferplan`` builds it on the
meta device to profile it, with real weights to run it), so none loads weights here.
"""

from __future__ import annotations

import torch
from torch import nn


def make_net(classes: int = 10) -> nn.Module:
    """A small convolutional network for 3-channel images of any size (1,3,32,32 in the docs):
    four top-level blocks, so four blocks to plan."""
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1)),
        nn.Sequential(nn.Flatten(), nn.Linear(64, classes)),
    )


class UNet(nn.Module):
    """A two-level U-Net: the skip connections cross the cuts between encoder and decoder, so
    only some cuts are valid (``inferplan profile ... --cuts`` lists them)."""

    def __init__(self, channels: int = 3, width: int = 16) -> None:
        super().__init__()
        self.down1 = _double(channels, width)
        self.down2 = _double(width, 2 * width)
        self.bottom = _double(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = _double(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = _double(2 * width, width)
        self.head = nn.Conv2d(width, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(nn.functional.max_pool2d(d1, 2))
        b = self.bottom(nn.functional.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return torch.sigmoid(self.head(u1))


def _double(inputs: int, outputs: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, padding=1), nn.ReLU(),
        nn.Conv2d(outputs, outputs, 3, padding=1), nn.ReLU(),
    )  # fmt: skip
