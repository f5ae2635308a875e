"""Built-in DNN profiles, computed from layer shapes with :mod:`inferplan.profiles.layers`.

``vgg16`` and ``resnet50`` are cut into blocks as in the co-design paper's study: VGG-16 into 16
blocks (13 convolutions, each max-pool folded into the convolution before it, then 3
fully-connected layers) and ResNet-50 into 18 (the stem, the 16 bottlenecks, pooling + FC).
``alexnet`` has 8 blocks (5 convolutions with their pools, 3 fully-connected layers) and ``mlp``
any number of equal-width fully-connected layers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from inferplan.errors import InvalidProfile
from inferplan.profiles.layers import BlockBuilder, Tensor
from inferplan.profiles.profile import Profile

__all__ = [
    "BUILTIN_PROFILES",
    "MLP_MAX_DEPTH",
    "alexnet",
    "builtin_profile",
    "display_name",
    "mlp",
    "resnet50",
    "vgg16",
]

FLOPS_PER_MAC = 2
MLP_MAX_DEPTH = 10_000
"""The most layers :func:`mlp` builds (each is a Python object: the size is checked first)."""


def _assemble(
    name: str,
    input_shape: Tensor,
    blocks: list[tuple[str, BlockBuilder]],
    bits_per_element: int,
    input_bits_per_element: int | None,
) -> Profile:
    input_bits = input_bits_per_element or bits_per_element
    return Profile(
        name=name,
        blocks=tuple(label for label, _ in blocks),
        flops=tuple(float(FLOPS_PER_MAC * b.macs) for _, b in blocks),
        activation_bits=(
            float(input_shape.elements * input_bits),
            *(float(b.shape.elements * bits_per_element) for _, b in blocks),
        ),
        params=tuple(b.params for _, b in blocks),
    )


def vgg16(
    *, image_size: int = 224, bits_per_element: int = 32, input_bits_per_element: int | None = None
) -> Profile:
    """VGG-16 in 16 blocks: 13 convolutions (max-pools folded in) and 3 FC layers (~15.47 GMAC)."""
    shape = Tensor(3, image_size, image_size)
    stages = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]
    blocks: list[tuple[str, BlockBuilder]] = []
    for stage, (channels, convs) in enumerate(stages, start=1):
        for k in range(1, convs + 1):
            b = BlockBuilder(shape)
            b.conv(channels, kernel=3, padding=1)
            label = f"conv{stage}_{k}"
            if k == convs:
                b.pool(2)
                label += "+pool"
            blocks.append((label, b))
            shape = b.shape
    b = BlockBuilder(shape)
    b.adaptive_pool(7, 7)
    b.linear(4096)
    blocks.append(("fc6", b))
    for label, width in (("fc7", 4096), ("fc8", 1000)):
        b = BlockBuilder(b.shape)
        b.linear(width)
        blocks.append((label, b))
    return _assemble(
        "vgg16", Tensor(3, image_size, image_size), blocks, bits_per_element, input_bits_per_element
    )


def _bottleneck(shape: Tensor, width: int, stride: int) -> BlockBuilder:
    """A ResNet v1.5 bottleneck (stride on the 3x3 convolution), with its projection if needed."""
    b = BlockBuilder(shape)
    b.conv(width, kernel=1, bias=False)
    b.batchnorm()
    b.conv(width, kernel=3, stride=stride, padding=1, bias=False)
    b.batchnorm()
    b.conv(4 * width, kernel=1, bias=False)
    b.batchnorm()
    if stride != 1 or shape.channels != 4 * width:
        projection = BlockBuilder(shape)
        projection.conv(4 * width, kernel=1, stride=stride, bias=False)
        projection.batchnorm()
        b.absorb(projection)
    return b


def resnet50(
    *, image_size: int = 224, bits_per_element: int = 32, input_bits_per_element: int | None = None
) -> Profile:
    """ResNet-50 (v1.5) in 18 blocks: stem, 16 bottlenecks (3+4+6+3), pool + FC (~4.09 GMAC)."""
    stem = BlockBuilder(Tensor(3, image_size, image_size))
    stem.conv(64, kernel=7, stride=2, padding=3, bias=False)
    stem.batchnorm()
    stem.pool(3, stride=2, padding=1)
    blocks: list[tuple[str, BlockBuilder]] = [("stem", stem)]
    shape = stem.shape
    for stage, (width, count) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for k in range(count):
            stride = 2 if (k == 0 and stage > 1) else 1
            b = _bottleneck(shape, width, stride)
            blocks.append((f"layer{stage}.{k}", b))
            shape = b.shape
    head = BlockBuilder(shape)
    head.adaptive_pool(1, 1)
    head.linear(1000)
    blocks.append(("avgpool+fc", head))
    return _assemble(
        "resnet50",
        Tensor(3, image_size, image_size),
        blocks,
        bits_per_element,
        input_bits_per_element,
    )


def alexnet(
    *, image_size: int = 224, bits_per_element: int = 32, input_bits_per_element: int | None = None
) -> Profile:
    """AlexNet (torchvision's single-tower variant) in 8 blocks (~0.71 GMAC)."""
    shape = Tensor(3, image_size, image_size)
    convs = [(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
             (256, 3, 1, 1, False), (256, 3, 1, 1, True)]  # fmt: skip
    blocks: list[tuple[str, BlockBuilder]] = []
    for k, (channels, kernel, stride, padding, pooled) in enumerate(convs, start=1):
        b = BlockBuilder(shape)
        b.conv(channels, kernel=kernel, stride=stride, padding=padding)
        label = f"conv{k}"
        if pooled:
            b.pool(3, stride=2)
            label += "+pool"
        blocks.append((label, b))
        shape = b.shape
    b = BlockBuilder(shape)
    b.adaptive_pool(6, 6)
    b.linear(4096)
    blocks.append(("fc6", b))
    for label, width in (("fc7", 4096), ("fc8", 1000)):
        b = BlockBuilder(b.shape)
        b.linear(width)
        blocks.append((label, b))
    return _assemble(
        "alexnet",
        Tensor(3, image_size, image_size),
        blocks,
        bits_per_element,
        input_bits_per_element,
    )


def mlp(
    width: int,
    depth: int,
    *,
    bits_per_element: int = 32,
    input_bits_per_element: int | None = None,
) -> Profile:
    """``depth`` fully-connected ``width x width`` layers with bias, one block each."""
    if width < 1 or depth < 1:
        raise InvalidProfile(f"mlp needs width >= 1 and depth >= 1, got {width}, {depth}")
    if depth > MLP_MAX_DEPTH:
        raise InvalidProfile(f"mlp depth {depth} exceeds the limit of {MLP_MAX_DEPTH} layers")
    if FLOPS_PER_MAC * width * (width + 1) * depth > sys.float_info.max:
        raise InvalidProfile(
            f"mlp width {width} with depth {depth} needs more FLOPs than floating point holds"
        )
    blocks: list[tuple[str, BlockBuilder]] = []
    shape = Tensor(width)
    for k in range(1, depth + 1):
        b = BlockBuilder(shape)
        b.linear(width)
        blocks.append((f"fc{k}", b))
        shape = b.shape
    return _assemble(
        f"mlp-{width}x{depth}", Tensor(width), blocks, bits_per_element, input_bits_per_element
    )


BUILTIN_PROFILES: dict[str, Callable[[], Profile]] = {
    "vgg16": vgg16,
    "resnet50": resnet50,
    "alexnet": alexnet,
}


_DISPLAY_NAMES = {"vgg16": "VGG-16", "resnet50": "ResNet-50", "alexnet": "AlexNet"}


def display_name(name: str) -> str:
    """How figures and reports write a built-in profile's name (other names as they are).

    Examples
    --------
    >>> display_name("resnet50"), display_name("my-net")
    ('ResNet-50', 'my-net')
    """
    return _DISPLAY_NAMES.get(name, name)


_MAX_DIGITS = 30  # beyond any width whose FLOPs fit in floating point


MAKE_A_PROFILE = "inferplan profile MODEL -o FILE.json writes a profile file of any model"
"""How to make a profile: said by every error about a profile's name or file."""


def _is_count(text: str) -> bool:
    return text.isascii() and text.isdecimal()


def builtin_profile(name: str) -> Profile:
    """A built-in profile by name: ``vgg16``, ``resnet50``, ``alexnet`` or ``mlp-WIDTHxDEPTH``."""
    key = name.strip().lower()
    if key in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[key]()
    if key.startswith("mlp-"):
        width, sep, depth = key[4:].partition("x")
        if sep and _is_count(width) and _is_count(depth):
            if max(len(width), len(depth)) > _MAX_DIGITS:
                raise InvalidProfile(
                    f"mlp width and depth must have at most {_MAX_DIGITS} digits, got "
                    f"{len(width)} and {len(depth)}"
                )
            return mlp(int(width), int(depth))
    known = ", ".join([*BUILTIN_PROFILES, "mlp-WIDTHxDEPTH"])
    raise InvalidProfile(f"unknown built-in profile {name!r} (known: {known}; {MAKE_A_PROFILE})")
