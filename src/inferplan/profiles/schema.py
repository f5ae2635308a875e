"""The profile-file schema as pydantic models (:mod:`inferplan.profiles.io` imports them
when it reads a profile file, so that a built-in profile, or starting the command line, does
not import pydantic)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Graph", "Layer", "ProfileFile"]


# Strict: a boolean or a quoted number in a file is a mistake, not 1.0 (ints are fine).
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]


NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]


class Layer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    flops: NonNegative
    output_bits: Positive
    params: Annotated[int, Field(ge=0, strict=True)] = 0


class Graph(BaseModel):
    model_config = ConfigDict(extra="forbid")

    layers: list[Layer]
    edges: list[tuple[str, str]]


class ProfileFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "profile"
    flops: list[Positive] | None = None
    activation_bits: list[Positive] | None = None
    input_bits: Positive | None = None
    graph: Graph | None = None
    blocks: list[str] | None = None
    params: list[Annotated[int, Field(ge=0, strict=True)]] | None = None
    seconds: list[Positive] | None = None
    bytes_per_param: Positive = 4.0
    state_bytes: list[Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]] | None = None
    flops_per_s: list[Positive] | None = None  # written beside seconds; derived, not read
