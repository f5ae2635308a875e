"""Workloads, catalogs and time models refuse bad values with one clear message."""

from __future__ import annotations

import math

import pytest

from inferplan.codesign.serving import (
    Catalog,
    GpuType,
    MeasuredTable,
    RequestClass,
    Roofline,
    StepWork,
    Workload,
)
from inferplan.errors import InvalidArgument


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"requests_per_s": -1.0}, "requests_per_s"),
        ({"requests_per_s": math.nan}, "requests_per_s"),
        ({"classes": (RequestClass(10, 10, 0.6),)}, "classes"),
        ({"classes": (RequestClass(0, 10, 1.0),)}, "classes[0].prompt_tokens"),
        ({"classes": (RequestClass(5, 10, math.nan),)}, "classes[0].share"),
        ({"tpot_s": 0.0}, "tpot_s"),
        ({"ttft_s": math.inf}, "ttft_s"),
    ],
)
def test_bad_workloads(kwargs, field) -> None:
    values = {"requests_per_s": 1.0, "classes": (RequestClass(10, 10, 1.0),)} | kwargs
    with pytest.raises(InvalidArgument) as info:
        Workload(**values)
    assert info.value.field == field


def test_mean_context_weights_each_output_token() -> None:
    w = Workload(1.0, (RequestClass(10, 2, 0.5), RequestClass(20, 4, 0.5)))
    # tokens at contexts 11, 12 (half the requests) and 21..24 (the other half)
    steps = [11, 12, 21, 22, 23, 24]
    assert math.isclose(w.mean_context, sum(steps) / len(steps))


def test_catalog_checks() -> None:
    with pytest.raises(InvalidArgument, match="price_per_hour"):
        GpuType("x", 1e12, 1e12, 1e9, 0.0)
    with pytest.raises(InvalidArgument, match="listed twice"):
        Catalog((GpuType("x", 1, 1, 1, 1), GpuType("x", 1, 1, 1, 1)))
    two = GpuType("x", 10.0, 4.0, 3.0, 2.0, {1: 1.0, 2: 0.5}).hardware(2)
    assert (two.flops, two.memory_bandwidth, two.memory, two.price_per_hour) == (10, 4, 6, 4)


def test_time_models() -> None:
    work = StepWork("decode", flops=6.0, bytes_moved=10.0, layers=2, batch=3.0)
    assert Roofline(2.0, 5.0).seconds(work) == 3.0  # compute-bound: 6 / 2 > 10 / 5
    table = MeasuredTable.of(decode={2: 1.0, 4: 2.0}, prefill={1: 1.0})
    assert table.seconds(work) == 3.0  # 1.5 per layer, linear between batches 2 and 4
    with pytest.raises(InvalidArgument, match="outside the measured batches"):
        table.seconds(StepWork("decode", 0, 0, 1, 8.0))
