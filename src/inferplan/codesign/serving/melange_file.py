"""Mélange's input files (JSON or YAML) read into a GPU-mix problem
(:class:`~inferplan.codesign.serving.gpu_mix.GpuMixProblem`).

::

    {"gpu_info": {"A10G": {"cost": 1.01, "tputs": [[2, 1], [5, 2]]},
                  "A100-80GB": {"cost": 3.67, "tputs": [[20, 20], [40, 20]]}},
     "workload_distribution": [[0.2, 0.1], [0.5, 0.2]],
     "total_request_rate": 30.0,
     "slice_factor": 1}

``workload_distribution[i][j]`` is the share of requests in the bucket of the ``i``-th input
length and the ``j``-th output length (the shares sum to 1, to :data:`SHARE_TOLERANCE`);
``gpu_info[type].cost`` is the type's price, $/h, and ``tputs[i][j]`` the most requests/s of
that bucket one GPU of the type serves within the latency objective (0: it cannot serve that
size; Mélange itself divides by it); ``total_request_rate`` is the workload's requests/s and
``slice_factor`` (default 1) the slices each bucket is cut into. Buckets are named ``"i,j"``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from inferplan.codesign.serving.gpu_mix import GpuMixProblem, ProfiledGpu
from inferplan.documents import read_document, validate_document
from inferplan.errors import InvalidFile

__all__ = ["SHARE_TOLERANCE", "load_melange", "melange_from_dict"]

SHARE_TOLERANCE = 1e-6
"""How far the shares of ``workload_distribution`` may sum from 1."""

_Rate = Annotated[float, Field(strict=False, ge=0, allow_inf_nan=False)]
_Price = Annotated[float, Field(strict=False, gt=0, allow_inf_nan=False)]
_Matrix = Annotated[list[Annotated[list[_Rate], Field(min_length=1)]], Field(min_length=1)]


class _Gpu(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cost: _Price
    tputs: _Matrix


class _MelangeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpu_info: Annotated[dict[Annotated[str, Field(min_length=1)], _Gpu], Field(min_length=1)]
    workload_distribution: _Matrix
    total_request_rate: _Rate
    slice_factor: Annotated[int, Field(strict=True, ge=1)] = 1


def _shape_problem(rows: list[list[float]], columns: int) -> str | None:
    for i, row in enumerate(rows):
        if len(row) != columns:
            return f"[{i}] has {len(row)} columns, not {columns}"
    return None


def melange_from_dict(data: object, *, source: str | None = None) -> GpuMixProblem:
    """The GPU-mix problem of Mélange-format data, naming ``source`` (the file) in errors.

    Raises
    ------
    InvalidFile
        Naming the field: a missing or unknown field, a negative or non-finite number, a
        price that is not positive, rows of unequal length, a type's ``tputs`` not shaped as
        the workload's buckets, shares not summing to 1.

    Examples
    --------
    >>> problem = melange_from_dict({
    ...     "gpu_info": {"A10G": {"cost": 1.01, "tputs": [[2, 1], [5, 2]]}},
    ...     "workload_distribution": [[0.25, 0.25], [0.5, 0]], "total_request_rate": 8})
    >>> problem.bucket_names, problem.bucket_rates
    (('0,0', '0,1', '1,0', '1,1'), (2.0, 2.0, 4.0, 0.0))
    >>> melange_from_dict({"gpu_info": {"A10G": {"cost": 1.01, "tputs": [[2, 1]]}},
    ...     "workload_distribution": [[0.5, 0.4]], "total_request_rate": 8}, source="w.json")
    Traceback (most recent call last):
    inferplan.errors.InvalidFile: w.json: workload_distribution: the shares sum to 0.9, not 1
    """
    doc = validate_document(_MelangeFile, data, source=source, error=InvalidFile)
    shares = doc.workload_distribution
    columns = len(shares[0])
    bad = _shape_problem(shares, columns)
    if bad:
        raise InvalidFile(f"row {bad}", source=source, field="workload_distribution")
    for name, gpu in doc.gpu_info.items():
        where = f"gpu_info.{name}.tputs"
        bad = _shape_problem(gpu.tputs, columns)
        if len(gpu.tputs) != len(shares):
            bad = f"has {len(gpu.tputs)} rows, not {len(shares)}"
        elif bad:
            bad = f"row {bad}"
        if bad:
            shape = f"{len(shares)} x {columns}"
            raise InvalidFile(f"{bad} (the workload's buckets are {shape})", source=source,
                              field=where)  # fmt: skip
    total = math.fsum(share for row in shares for share in row)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise InvalidFile(f"the shares sum to {total:.6g}, not 1", source=source,
                          field="workload_distribution")  # fmt: skip
    rate = doc.total_request_rate
    names = tuple(f"{i},{j}" for i in range(len(shares)) for j in range(columns))
    rates = tuple(share * rate for row in shares for share in row)
    types = tuple(
        ProfiledGpu(name, gpu.cost, tuple(mu for row in gpu.tputs for mu in row))
        for name, gpu in doc.gpu_info.items()
    )
    return GpuMixProblem(rates, types, doc.slice_factor, names)


def load_melange(path: str | Path) -> GpuMixProblem:
    """Read a Mélange input file (JSON, or YAML).

    Raises
    ------
    InvalidFile
        If the file cannot be read or a field is bad (see :func:`melange_from_dict`).
    """
    return melange_from_dict(read_document(path), source=str(path))
