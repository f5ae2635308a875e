"""A small layer-shape calculator: walk a network's layers, track tensor shapes, count work.

The built-in profiles are computed with it from their layer definitions, so nobody has to trust a
typed-in table. Convolutions and fully-connected layers count ``2`` FLOPs per multiply-accumulate
(MAC); activations, normalisation and pooling are not counted, as in the usual published totals.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BlockBuilder", "Tensor"]


@dataclass(frozen=True)
class Tensor:
    """An activation of shape channels x height x width (a vector has ``height = width = 1``)."""

    channels: int
    height: int = 1
    width: int = 1

    @property
    def elements(self) -> int:
        return self.channels * self.height * self.width


def _out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


@dataclass
class BlockBuilder:
    """Accumulates the MACs and parameters of the layers of one block while tracking the shape.

    Examples
    --------
    >>> b = BlockBuilder(Tensor(3, 32, 32))
    >>> b.conv(16, kernel=3, padding=1)
    Tensor(channels=16, height=32, width=32)
    >>> b.pool(2)
    Tensor(channels=16, height=16, width=16)
    >>> b.macs, b.params
    (442368, 448)
    """

    shape: Tensor
    macs: int = 0
    params: int = 0

    def conv(
        self, out_channels: int, kernel: int, stride: int = 1, padding: int = 0, bias: bool = True
    ) -> Tensor:
        """A square 2-D convolution (optionally followed by batch-norm, which is not counted)."""
        s = self.shape
        h, w = _out(s.height, kernel, stride, padding), _out(s.width, kernel, stride, padding)
        weights = s.channels * kernel * kernel * out_channels
        self.macs += weights * h * w
        self.params += weights + (out_channels if bias else 0)
        self.shape = Tensor(out_channels, h, w)
        return self.shape

    def batchnorm(self) -> Tensor:
        """Batch normalisation: two parameters per channel, no counted FLOPs."""
        self.params += 2 * self.shape.channels
        return self.shape

    def pool(self, kernel: int, stride: int | None = None, padding: int = 0) -> Tensor:
        """Max or average pooling: changes the shape only."""
        s, stride = self.shape, stride or kernel
        h, w = _out(s.height, kernel, stride, padding), _out(s.width, kernel, stride, padding)
        self.shape = Tensor(s.channels, h, w)
        return self.shape

    def adaptive_pool(self, height: int, width: int) -> Tensor:
        """Adaptive pooling to a fixed spatial size."""
        self.shape = Tensor(self.shape.channels, height, width)
        return self.shape

    def linear(self, out_features: int, bias: bool = True) -> Tensor:
        """A fully-connected layer on the flattened input."""
        n_in = self.shape.elements
        self.macs += n_in * out_features
        self.params += n_in * out_features + (out_features if bias else 0)
        self.shape = Tensor(out_features)
        return self.shape

    def absorb(self, branch: BlockBuilder) -> None:
        """Add a finished branch's MACs and parameters to this block."""
        self.macs += branch.macs
        self.params += branch.params
