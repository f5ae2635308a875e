"""Built-in PyTorch models whose blocks are layers, with weights built in code.

``alexnet`` is torchvision's single-tower AlexNet in the 8 blocks of the built-in ``alexnet``
profile (5 convolutions with their pools, 3 fully-connected layers); ``mlp-WIDTHxDEPTH`` is the
co-inference paper's equal-width MLP, one ``Linear`` (+ ReLU) per block. Both run where a
``MODULE:FACTORY`` is accepted, by name, with a default input shape. Naming one
(:func:`builtin_model`: its blocks, input shape and size) needs no torch, so the commands
check a built-in model against their files before torch is imported.

Examples
--------
>>> import torch
>>> net = mlp(16, 3)
>>> [name for name, _ in net.named_children()]
['fc1', 'fc2', 'fc3']
>>> net(torch.zeros(1, 16)).shape
torch.Size([1, 16])
>>> builtin_model("mlp-16x3").input_shape, builtin_model("mlp-16x3").blocks
((1, 16), ('fc1', 'fc2', 'fc3'))
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inferplan.errors import InvalidArgument, InvalidProfile
from inferplan.profiles.zoo import builtin_profile

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "ALEXNET_BLOCKS",
    "BuiltinModel",
    "alexnet",
    "builtin_model",
    "check_inferences",
    "check_weights",
    "is_builtin_model",
    "memory_bytes",
    "mlp",
    "mlp_blocks",
]


def memory_bytes() -> int | None:
    """This machine's physical memory in bytes, or this process's address-space limit
    (``ulimit -v``) where that is less (``None`` where the OS says neither)."""
    try:
        physical: int | None = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        physical = None
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        soft = -1
    limits = [x for x in (physical, soft if soft >= 0 else None) if x is not None]
    return min(limits) if limits else None


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
    import torch

    from inferplan.profiles.from_torch import torch_dtype

    limit = memory_bytes()
    need = params * torch.empty((), dtype=torch_dtype(dtype)).element_size()
    if limit is not None and need > limit:
        raise InvalidProfile(
            f"{name} has {params:,} parameters, {need / 2**30:,.1f} GiB of {dtype} weights: "
            f"more than this machine's memory ({limit / 2**30:,.1f} GiB)"
        )


ALEXNET_BLOCKS = ("conv1", "conv2", "conv3", "conv4", "conv5", "fc6", "fc7", "fc8")
"""The names of :func:`alexnet`'s blocks (each convolution with its pool, if any)."""


def alexnet(num_classes: int = 1000) -> nn.Sequential:
    """AlexNet (single tower) as the 8 blocks :data:`ALEXNET_BLOCKS` for 3x224x224 images."""
    from torch import nn

    def conv(cin: int, cout: int, kernel: int, stride: int, padding: int, pool: bool) -> nn.Module:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding),
            nn.ReLU(),
        ]
        if pool:
            layers.append(nn.MaxPool2d(3, stride=2))
        return nn.Sequential(*layers)

    blocks = [
        conv(3, 64, 11, 4, 2, True),
        conv(64, 192, 5, 1, 2, True),
        conv(192, 384, 3, 1, 1, False),
        conv(384, 256, 3, 1, 1, False),
        conv(256, 256, 3, 1, 1, True),
        nn.Sequential(nn.AdaptiveAvgPool2d((6, 6)), nn.Flatten(), nn.Linear(9216, 4096), nn.ReLU()),
        nn.Sequential(nn.Linear(4096, 4096), nn.ReLU()),
        nn.Linear(4096, num_classes),
    ]
    return nn.Sequential(OrderedDict(zip(ALEXNET_BLOCKS, blocks, strict=True)))


def mlp(width: int, depth: int) -> nn.Sequential:
    """``depth`` blocks ``fc1..fcN`` of ``width x width`` (ReLU after every block but the last)."""
    from torch import nn

    if width < 1 or depth < 1:
        raise InvalidProfile(f"mlp needs width >= 1 and depth >= 1, got {width}, {depth}")
    blocks: list[tuple[str, nn.Module]] = []
    for k, name in enumerate(mlp_blocks(depth), start=1):
        linear = nn.Linear(width, width)
        blocks.append((name, linear if k == depth else nn.Sequential(linear, nn.ReLU())))
    return nn.Sequential(OrderedDict(blocks))


def mlp_blocks(depth: int) -> tuple[str, ...]:
    """The names of the blocks of :func:`mlp` ``(width, depth)``: ``fc1 .. fcDEPTH``."""
    return tuple(f"fc{k}" for k in range(1, depth + 1))


@dataclass(frozen=True)
class BuiltinModel:
    """A built-in model: its factory (no arguments), the shape of its one input, its number of
    parameters and the names of its blocks (one layer each)."""

    name: str
    factory: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    params: int
    blocks: tuple[str, ...]


def is_builtin_model(name: str) -> bool:
    """Whether ``name`` names a built-in model rather than a ``MODULE:FACTORY``."""
    return ":" not in name


def builtin_model(name: str) -> BuiltinModel:
    """``alexnet`` or ``mlp-WIDTHxDEPTH``, sized from its profile (whose limits, such as the
    most layers an MLP may have, apply) before anything is built."""
    key = name.strip().lower()
    if key == "alexnet":
        return BuiltinModel("alexnet", alexnet, (1, 3, 224, 224),
                            sum(builtin_profile("alexnet").params), ALEXNET_BLOCKS)  # fmt: skip
    if key.startswith("mlp-"):
        width, sep, depth = key[4:].partition("x")
        if sep and width.isascii() and width.isdigit() and depth.isascii() and depth.isdigit():
            profile = builtin_profile(key)  # the size limits of the profile of this name
            w, d = int(width), int(depth)
            return BuiltinModel(key, lambda: mlp(w, d), (1, w), sum(profile.params),
                                mlp_blocks(d))  # fmt: skip
    raise InvalidProfile(
        f"unknown model {name!r} (built-in: alexnet, mlp-WIDTHxDEPTH; or MODULE:FACTORY)"
    )
