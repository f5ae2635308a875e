"""Built-in PyTorch models whose blocks are layers, with weights built in code.

``alexnet`` is torchvision's single-tower AlexNet in the 8 blocks of the built-in ``alexnet``
profile (5 convolutions with their pools, 3 fully-connected layers); ``mlp-WIDTHxDEPTH`` is the
co-inference paper's equal-width MLP, one ``Linear`` (+ ReLU) per block. Both run where a
``MODULE:FACTORY`` is accepted, by name, with a default input shape.

Examples
--------
>>> import torch
>>> net = mlp(16, 3)
>>> [name for name, _ in net.named_children()]
['fc1', 'fc2', 'fc3']
>>> net(torch.zeros(1, 16)).shape
torch.Size([1, 16])
>>> builtin_model("mlp-16x3").input_shape
(1, 16)
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from inferplan.errors import InvalidArgument, InvalidProfile
from inferplan.profiles.zoo import builtin_profile

__all__ = [
    "BuiltinModel",
    "alexnet",
    "builtin_model",
    "check_inferences",
    "check_weights",
    "is_builtin_model",
    "memory_bytes",
    "mlp",
]


def memory_bytes() -> int | None:
    """This machine's physical memory in bytes (``None`` where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_inferences(count: int, per_inference: float, what: str) -> None:
    """Refuse ``count`` inferences that each keep ``per_inference`` bytes of ``what`` in memory
    when together they exceed this machine's memory: checked before anything is made.

    Raises
    ------
    InvalidArgument
        With ``field`` ``inferences``, saying how many would fit.
    """
    limit = memory_bytes()
    if limit is not None and count * per_inference > limit:
        raise InvalidArgument(
            f"{count:,} inferences would keep {count * per_inference / 2**30:,.1f} GiB of "
            f"{what} in memory, more than this machine's {limit / 2**30:,.1f} GiB (at most "
            f"{int(limit // per_inference):,} inferences)",
            field="inferences",
        )


def check_weights(params: int, dtype: str, name: str) -> None:
    """Refuse to build a model whose weights (``params`` of ``dtype``) exceed this machine's
    memory: the one size limit of every command that builds a model, checked before a weight
    is allocated (a built-in model's count comes from its name; a factory's from a build on
    the ``meta`` device, which allocates nothing).

    Raises
    ------
    InvalidProfile
        Naming the model, its parameters and bytes, and the memory.
    """
    limit = memory_bytes()
    need = params * torch.empty((), dtype=getattr(torch, dtype)).element_size()
    if limit is not None and need > limit:
        raise InvalidProfile(
            f"{name} has {params:,} parameters, {need / 2**30:,.1f} GiB of {dtype} weights: "
            f"more than this machine's memory ({limit / 2**30:,.1f} GiB)"
        )


def alexnet(num_classes: int = 1000) -> nn.Sequential:
    """AlexNet (single tower) as 8 blocks ``conv1+pool .. fc8`` for 3x224x224 images."""

    def conv(cin: int, cout: int, kernel: int, stride: int, padding: int, pool: bool) -> nn.Module:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding),
            nn.ReLU(),
        ]
        if pool:
            layers.append(nn.MaxPool2d(3, stride=2))
        return nn.Sequential(*layers)

    return nn.Sequential(
        OrderedDict(
            [
                ("conv1", conv(3, 64, 11, 4, 2, True)),
                ("conv2", conv(64, 192, 5, 1, 2, True)),
                ("conv3", conv(192, 384, 3, 1, 1, False)),
                ("conv4", conv(384, 256, 3, 1, 1, False)),
                ("conv5", conv(256, 256, 3, 1, 1, True)),
                (
                    "fc6",
                    nn.Sequential(
                        nn.AdaptiveAvgPool2d((6, 6)), nn.Flatten(), nn.Linear(9216, 4096), nn.ReLU()
                    ),
                ),
                ("fc7", nn.Sequential(nn.Linear(4096, 4096), nn.ReLU())),
                ("fc8", nn.Linear(4096, num_classes)),
            ]
        )
    )


def mlp(width: int, depth: int) -> nn.Sequential:
    """``depth`` blocks ``fc1..fcN`` of ``width x width`` (ReLU after every block but the last)."""
    if width < 1 or depth < 1:
        raise InvalidProfile(f"mlp needs width >= 1 and depth >= 1, got {width}, {depth}")
    blocks: list[tuple[str, nn.Module]] = []
    for k in range(1, depth + 1):
        linear = nn.Linear(width, width)
        blocks.append((f"fc{k}", linear if k == depth else nn.Sequential(linear, nn.ReLU())))
    return nn.Sequential(OrderedDict(blocks))


@dataclass(frozen=True)
class BuiltinModel:
    """A built-in model: its factory (no arguments) and the shape of its one input."""

    name: str
    factory: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    params: int


def is_builtin_model(name: str) -> bool:
    """Whether ``name`` names a built-in model rather than a ``MODULE:FACTORY``."""
    return ":" not in name


def builtin_model(name: str) -> BuiltinModel:
    """``alexnet`` or ``mlp-WIDTHxDEPTH``, sized from its profile (whose limits, such as the
    most layers an MLP may have, apply) before anything is built."""
    key = name.strip().lower()
    if key == "alexnet":
        return BuiltinModel("alexnet", alexnet, (1, 3, 224, 224),
                            sum(builtin_profile("alexnet").params))  # fmt: skip
    if key.startswith("mlp-"):
        width, sep, depth = key[4:].partition("x")
        if sep and width.isascii() and width.isdigit() and depth.isascii() and depth.isdigit():
            profile = builtin_profile(key)  # the size limits of the profile of this name
            w, d = int(width), int(depth)
            return BuiltinModel(key, lambda: mlp(w, d), (1, w), sum(profile.params))
    raise InvalidProfile(
        f"unknown model {name!r} (built-in: alexnet, mlp-WIDTHxDEPTH; or MODULE:FACTORY)"
    )
