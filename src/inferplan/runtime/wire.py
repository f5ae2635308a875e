"""Tensors on the wire between a device and its edge server: safetensors, never pickle.

An activation (the tensors crossing one cut) travels as a safetensors file whose keys are
``"0", "1", ...`` in the cut's fixed order; a layer's weights travel as a safetensors file of its
``state_dict``. Decoding parses only the safetensors header and raw buffers, so a malicious body
cannot run code; :func:`decode_tensors` then checks the count, shapes and dtypes against what
the receiver expects and raises :class:`WireError` with a one-line reason otherwise.

Examples
--------
>>> import torch
>>> data = encode_tensors([torch.ones(2, 3)])
>>> decode_tensors(data, [((2, 3), "float32")])[0].shape
torch.Size([2, 3])
>>> decode_tensors(data, [((3, 2), "float32")])
Traceback (most recent call last):
...
inferplan.runtime.wire.WireError: tensor 0 has shape 2x3, expected 3x2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as _load
from safetensors.torch import save as _save

from inferplan.errors import InvalidArgument

__all__ = [
    "CONTENT_TYPE",
    "SERVICE_HEADER",
    "WireError",
    "decode_state",
    "decode_tensors",
    "dtype_name",
    "encode_state",
    "encode_tensors",
    "shape_text",
]

CONTENT_TYPE = "application/vnd.safetensors"
SERVICE_HEADER = "X-Service-Seconds"
"""The header of an ``/infer`` answer that carries the edge's service time in seconds."""

Spec = tuple[Sequence[int], Any]
"""The expected ``(shape, dtype)`` of one tensor; ``dtype`` a ``torch.dtype`` or its name."""


class WireError(InvalidArgument):
    """A body that is not the tensors the receiver expects."""


def dtype_name(dtype: Any) -> str:
    """``"float32"`` for ``torch.float32`` or ``"float32"``."""
    return str(dtype).removeprefix("torch.")


def shape_text(shape: Sequence[int]) -> str:
    """``"1x3x32x32"`` (``"scalar"`` for a 0-d tensor)."""
    return "x".join(str(int(d)) for d in shape) or "scalar"


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    # safetensors wants dense, contiguous, CPU tensors that share no storage with each other.
    return tensor.detach().to("cpu").contiguous().clone()


def encode_tensors(tensors: Sequence[torch.Tensor]) -> bytes:
    """The tensors (in order) as safetensors bytes with keys ``"0", "1", ...``."""
    return bytes(_save({str(k): _plain(t) for k, t in enumerate(tensors)}))


def encode_state(state: Mapping[str, torch.Tensor]) -> bytes:
    """A ``state_dict`` as safetensors bytes."""
    return bytes(_save({key: _plain(t) for key, t in state.items()}))


def _decode(data: bytes) -> dict[str, torch.Tensor]:
    if not data:
        raise WireError("empty body (expected a safetensors file)")
    try:
        return dict(_load(data))
    except (SafetensorError, ValueError, RuntimeError, TypeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WireError(f"body is not a safetensors file: {reason}") from None


def decode_state(data: bytes) -> dict[str, torch.Tensor]:
    """A ``state_dict`` from safetensors bytes (no check of its keys)."""
    return _decode(data)


def decode_tensors(data: bytes, specs: Sequence[Spec]) -> tuple[torch.Tensor, ...]:
    """The tensors of an activation, checked against ``specs`` (one ``(shape, dtype)`` each).

    Raises
    ------
    WireError
        The body is not safetensors, or holds other keys, shapes or dtypes than expected.
    """
    tensors = _decode(data)
    keys = [str(k) for k in range(len(specs))]
    if sorted(tensors) != sorted(keys):
        raise WireError(
            f"expected {len(specs)} tensor(s) with keys {', '.join(keys)}, "
            f"got {', '.join(sorted(tensors)) or 'none'}"
        )
    out = []
    for key, (shape, dtype) in zip(keys, specs, strict=True):
        tensor = tensors[key]
        if tuple(tensor.shape) != tuple(int(d) for d in shape):
            raise WireError(
                f"tensor {key} has shape {shape_text(tensor.shape)}, expected {shape_text(shape)}"
            )
        if dtype_name(tensor.dtype) != dtype_name(dtype):
            raise WireError(
                f"tensor {key} has dtype {dtype_name(tensor.dtype)}, expected {dtype_name(dtype)}"
            )
        out.append(tensor)
    return tuple(out)
