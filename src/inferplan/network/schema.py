"""The network-file schema as pydantic models: what an element-by-element check of a
network file validates against (:mod:`inferplan.network.io` builds the common shape
column-wise and imports these only when it must, so that reading a plain file, or starting
the command line, does not import pydantic)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from inferplan.network.costs import CapacityCost, LinearCost, ModuleCost, TieredCost

__all__ = ["CostFile", "LinkEntry", "NetworkFile", "NodeEntry", "TablesFile"]


# Strict: a boolean or a quoted number in a file is a mistake, not 1.0 (ints are fine).
Number = Annotated[float, Field(strict=True)]
Price = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Size = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]


class LinearCostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["linear"]
    price: Price
    max: Price = math.inf

    def build(self) -> CapacityCost:
        return LinearCost(self.price, self.max)


class ModuleCostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["modules"]
    size: Size
    price: Price
    max: Price = math.inf

    def build(self) -> CapacityCost:
        return ModuleCost(self.size, self.price, self.max)


class TieredCostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["tiers"]
    upto: list[Size]
    price: Annotated[list[Price], Field(min_length=1)]
    max: Price = math.inf

    @model_validator(mode="after")
    def _consistent(self) -> TieredCostEntry:
        self.build()  # the tiers' own checks: ordering, one price per tier
        return self

    def build(self) -> CapacityCost:
        return TieredCost(tuple(self.upto), tuple(self.price), self.max)


CostEntry = Annotated[
    LinearCostEntry | ModuleCostEntry | TieredCostEntry, Field(discriminator="kind")
]


class NodeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    capacity: Number
    price: Number | None = None
    cost: CostEntry | None = None
    memory: Number | None = None
    memory_price: Number | None = None
    memory_cost: CostEntry | None = None
    memory_bandwidth: Number | None = None  # bytes/s, for LLM serving's time model


class LinkEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    capacity: Number
    price: Number | None = None
    cost: CostEntry | None = None
    delay_s: Number = 0.0


class CostFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cost: CostEntry


class NetworkFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    nodes: list[NodeEntry]
    links: list[LinkEntry] = Field(validation_alias=AliasChoices("links", "edges"))


class TablesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    nodes: str
    links: str = Field(validation_alias=AliasChoices("links", "edges"))
