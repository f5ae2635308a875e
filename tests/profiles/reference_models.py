"""VGG-16, ResNet-50 (v1.5) and AlexNet written in plain torch, as torchvision defines them.

torchvision does not work with the torch the project pins, so the tests carry their own copies.
Module names follow torchvision's, so block groupings read the same.
"""

from __future__ import annotations

import torch
from torch import nn

VGG16_BLOCKS = (
    "features.0,features.2,features.5,features.7,features.10,features.12,features.14,"
    "features.17,features.19,features.21,features.24,features.26,features.28,"
    "avgpool+classifier.0,classifier.3,classifier.6"
)
RESNET50_BLOCKS = ",".join(
    ["conv1+bn1+relu+maxpool"]
    + [f"layer{s}.{k}" for s, n in enumerate((3, 4, 6, 3), start=1) for k in range(n)]
    + ["avgpool+fc"]
)
ALEXNET_BLOCKS = (
    "features.0,features.3,features.6,features.8,features.10,"
    "avgpool+classifier.1,classifier.4,classifier.6"
)


class VGG16(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
            for _ in range(convs):
                layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(inplace=True)]
                channels = width
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
            nn.Linear(4096, 1000),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class Bottleneck(nn.Module):
    def __init__(self, channels: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, 4 * width, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or channels != 4 * width:
            self.downsample = nn.Sequential(
                nn.Conv2d(channels, 4 * width, 1, stride=stride, bias=False),
                nn.BatchNorm2d(4 * width),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = 64
        for stage, (width, count) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), 1):
            blocks = []
            for k in range(count):
                blocks.append(Bottleneck(channels, width, 2 if k == 0 and stage > 1 else 1))
                channels = 4 * width
            setattr(self, f"layer{stage}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2048, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class AlexNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(3, 2),
        )  # fmt: skip
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(True),
            nn.Linear(4096, 1000),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class TinyUNet(nn.Module):
    """Two encoder stages, two decoder stages, a skip from each encoder stage to its decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Conv2d(3, 8, 3, padding=1)
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1))
        self.dec2 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.Upsample(scale_factor=2))
        self.dec1 = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        d2 = self.dec2(self.enc2(e1))
        return self.dec1(torch.cat([d2, e1], dim=1))


class Reused(nn.Module):
    """``shared`` runs before and after ``middle``: no cut between them can run."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.shared = nn.Linear(8, 8)
        self.middle = nn.Linear(8, 8)
        self.last = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(self.shared(self.middle(self.shared(self.first(x)))))
