"""Sweep spec files: which study, which parameter space, which seed.

A spec is a YAML (or JSON) document::

    study: provisioning        # a registered study, or package.module:function
    seed: 7                    # the sweep seed (default 0)
    seed_from: [topology]      # parameters a point's seed depends on (default: the study's)
    options: {methods: [psg, pfp, pwf]}
    grid:                      # a cartesian product (first axis varies slowest) ...
      topology: {range: [0, 20]}
      dnn: [vgg16, resnet50]
      alpha: [0.25, 0.4, 0.6, 0.8]
    # ... or a seeded random sample (not both):
    # sample:
    #   size: 100
    #   parameters:
    #     topology: {integers: [0, 1000]}
    #     dnn: {choice: [vgg16, resnet50]}
    #     alpha: {uniform: [0.2, 0.9]}

Grid axes are a list, a single value, ``{range: [start, stop, step?]}`` (integers, ``stop``
excluded) or ``{linspace: [start, stop, count]}``. Sample parameters are a single value,
``{uniform: [low, high]}``, ``{log_uniform: [low, high]}``, ``{integers: [low, high]}``
(``high`` excluded) or ``{choice: [...]}``; the sample is drawn with the sweep seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferplan.documents import field_path, read_document, validate_document
from inferplan.errors import InferplanError, InvalidFile
from inferplan.experiments.engine import Sweep, resolve_function
from inferplan.experiments.space import (
    Distribution,
    Scalar,
    grid_points,
    make_points,
    sample_points,
)
from inferplan.experiments.studies import STUDIES

__all__ = ["SweepSpec", "load_spec", "sweep_from_spec"]


class _Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: Annotated[int, Field(ge=1)]
    parameters: dict[str, Any]


class SweepSpec(BaseModel):
    """The document of a sweep spec file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    study: str
    seed: Annotated[int, Field(ge=0)] = 0
    seed_from: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, Any] | None = None
    sample: _Sample | None = None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _numbers(spec: Any, count: int | tuple[int, int], where: str) -> list[float]:
    lo, hi = (count, count) if isinstance(count, int) else count
    ok = (
        isinstance(spec, list)
        and lo <= len(spec) <= hi
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in spec)
        and all(math.isfinite(x) for x in spec)
    )
    if not ok:
        size = str(lo) if lo == hi else f"{lo} or {hi}"
        raise InvalidFile(f"must be a list of {size} finite numbers, got {spec!r}", field=where)
    return [x for x in spec]


def _single(value: Mapping[str, Any], where: str, kinds: Sequence[str]) -> tuple[str, Any]:
    if len(value) != 1 or next(iter(value)) not in kinds:
        raise InvalidFile(
            f"must be a value, a list or one of {{{', '.join(kinds)}: ...}}, got {dict(value)!r}",
            field=where,
        )
    return next(iter(value.items()))


def _axis(value: Any, where: str) -> list[Scalar]:
    if _is_scalar(value):
        return [value]
    if isinstance(value, list):
        if not value:
            raise InvalidFile("must not be empty", field=where)
        for k, item in enumerate(value):
            if not _is_scalar(item):
                raise InvalidFile(
                    f"must be a number, a string or a boolean, got {item!r}", field=f"{where}[{k}]"
                )
        return list(value)
    if isinstance(value, Mapping):
        kind, spec = _single(value, where, ("range", "linspace"))
        if kind == "range":
            bounds = _numbers(spec, (2, 3), f"{where}.range")
            if not all(float(x).is_integer() for x in bounds) or (
                len(bounds) == 3 and bounds[2] == 0
            ):
                raise InvalidFile(
                    f"must be integers with a non-zero step, got {spec!r}", field=f"{where}.range"
                )
            out: list[Scalar] = list(range(*(int(x) for x in bounds)))
        else:
            start, stop, count = _numbers(spec, 3, f"{where}.linspace")
            if not (float(count).is_integer() and count >= 1):
                raise InvalidFile(
                    f"count must be a positive integer, got {count!r}", field=f"{where}.linspace"
                )
            out = [float(x) for x in np.linspace(start, stop, int(count))]
        if not out:
            raise InvalidFile(f"gives no values ({spec!r})", field=f"{where}.{kind}")
        return out
    raise InvalidFile(f"must be a value, a list or a mapping, got {value!r}", field=where)


def _distribution(value: Any, where: str) -> Distribution:
    if _is_scalar(value):
        return Distribution("fixed", values=(value,))
    if not isinstance(value, Mapping):
        raise InvalidFile(f"must be a value or a distribution, got {value!r}", field=where)
    kind, spec = _single(value, where, ("uniform", "log_uniform", "integers", "choice"))
    if kind == "choice":
        return Distribution("choice", values=tuple(_axis(spec, f"{where}.choice")))
    low, high = _numbers(spec, 2, f"{where}.{kind}")
    if not low < high:
        raise InvalidFile(f"low must be below high, got {spec!r}", field=f"{where}.{kind}")
    if kind == "log_uniform" and low <= 0:
        raise InvalidFile(f"bounds must be positive, got {spec!r}", field=f"{where}.{kind}")
    if kind == "integers" and not (float(low).is_integer() and float(high).is_integer()):
        raise InvalidFile(f"bounds must be integers, got {spec!r}", field=f"{where}.{kind}")
    return Distribution(kind, low=low, high=high)


def _pydantic_field(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    loc = [p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    if first["type"] == "missing":
        return field_path(loc), "missing"
    if first["type"] == "extra_forbid" or first["type"] == "extra_forbidden":
        return field_path(loc), "unknown parameter"
    message = first["msg"].removeprefix("Value error, ")
    if loc and "input" in first:
        message += f", got {first['input']!r}"
    return field_path(loc), message


def sweep_from_spec(spec: SweepSpec, *, source: str | None = None) -> Sweep:
    """Turn a validated spec into a :class:`~inferplan.experiments.engine.Sweep`.

    Raises
    ------
    InferplanError
        Naming ``source`` and the spec field at fault.
    """
    try:
        return _sweep(spec)
    except InferplanError as exc:
        raise (exc.located(source) if source else exc) from None


def _sweep(spec: SweepSpec) -> Sweep:
    study = STUDIES.get(spec.study)
    if study is None:
        if ":" not in spec.study:
            raise InvalidFile(
                f"unknown study {spec.study!r} (known: {', '.join(STUDIES)}, or "
                "package.module:function)",
                field="study",
            )
        try:
            resolve_function(spec.study)
        except InferplanError as exc:
            raise InvalidFile(exc.message, field="study") from None
        function = spec.study
    else:
        function = study.function
    if (spec.grid is None) == (spec.sample is None):
        raise InvalidFile("give exactly one of grid or sample", field="grid")
    if spec.grid is not None:
        if not spec.grid:
            raise InvalidFile("must name at least one parameter", field="grid")
        prefix = "grid"
        params = grid_points({k: _axis(v, f"grid.{k}") for k, v in spec.grid.items()})
    else:
        assert spec.sample is not None
        prefix = "sample.parameters"
        dists = {
            k: _distribution(v, f"sample.parameters.{k}") for k, v in spec.sample.parameters.items()
        }
        params = sample_points(dists, spec.sample.size, seed=spec.seed)
    options = spec.options
    seed_from = spec.seed_from
    if study is not None:
        try:
            options = study.options.model_validate(spec.options).model_dump()
        except ValidationError as exc:
            where, message = _pydantic_field(exc)
            raise InvalidFile(message, field=f"options.{where}" if where else "options") from None
        _check_points(study.parameters, params, prefix)
        if study.check_value is not None:
            _check_values(study.check_value, params, prefix)
        if seed_from is None and study.seed_from is not None:
            seed_from = list(study.seed_from)
    names = {k for p in params for k in p}
    if study is not None:
        names |= set(study.parameters.model_fields)
    for k, name in enumerate(seed_from or []):
        if name not in names:
            raise InvalidFile(f"{name!r} is not a parameter of this sweep", field=f"seed_from[{k}]")
    points = make_points(params, sweep_seed=spec.seed, seed_from=seed_from)
    return Sweep(
        function=function,
        points=points,
        options=options,
        seed=spec.seed,
        study=spec.study,
        seed_from=tuple(seed_from) if seed_from is not None else None,
    )


def _check_points(model: type[BaseModel], params: list[dict[str, Scalar]], prefix: str) -> None:
    for point in params:
        try:
            model.model_validate(point)
        except ValidationError as exc:
            where, message = _pydantic_field(exc)
            if where:
                raise InvalidFile(message, field=f"{prefix}.{where}") from None
            raise InvalidFile(f"{message} (point {point})", field=prefix) from None


def _check_values(check: Any, params: list[dict[str, Scalar]], prefix: str) -> None:
    seen: set[tuple[str, Any]] = set()
    for point in params:
        for name, value in point.items():
            if (name, value) in seen:
                continue
            seen.add((name, value))
            try:
                check(name, value)
            except InferplanError as exc:
                raise InvalidFile(str(exc), field=f"{prefix}.{name}") from None


def load_spec(path: str | Path) -> Sweep:
    """Read, validate and expand a sweep spec file.

    Raises
    ------
    InferplanError
        A one-line message naming the file and the field at fault.
    """
    source = str(path)
    spec = validate_document(SweepSpec, read_document(path), source=source, error=InvalidFile)
    return sweep_from_spec(spec, source=source)
