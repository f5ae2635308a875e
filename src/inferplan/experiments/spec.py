"""Sweep spec files: which study, which parameter space, which seed.

A spec is a YAML (or JSON) document::

    study: provisioning        # a registered study, or package.module:function
    seed: 7                    # the sweep seed (default 0)
    seed_from: [topology]      # parameters a point's seed depends on (default: the study's)
    metric: ratio              # what summary.csv and summary.png report (default: the study's)
    group_by: method           # the column that splits the summary (default: the study's)
    replicates: [topology]     # parameters that only index repeats (default: the study's)
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
import reprlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferplan.documents import field_path, read_document, validate_document
from inferplan.errors import InferplanError, InvalidFile
from inferplan.experiments.engine import Sweep, resolve_function
from inferplan.experiments.space import (
    MAX_POINTS,
    SAMPLE_INDEX,
    Distribution,
    Scalar,
    grid_points,
    linspace,
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
    metric: str | None = None
    group_by: str | None = None
    replicates: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, Any] | None = None
    sample: _Sample | None = None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


# Values quoted in messages are shortened, so that a huge or aliased structure (a YAML alias
# bomb) cannot make an error message itself explode.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 2, 6, 6
_SHORT.maxstring, _SHORT.maxlong, _SHORT.maxother = 60, 40, 60


def _show(value: Any) -> str:
    return _SHORT.repr(value)


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"about 1e{len(str(n)) - 1}"


def _too_many() -> str:
    return f"more than the {MAX_POINTS:,} points a sweep may have; split it into smaller sweeps"


def _numbers(spec: Any, count: int | tuple[int, int], where: str) -> list[int | float]:
    """A list of ``count`` finite numbers (integers of any size stay exact)."""
    lo, hi = (count, count) if isinstance(count, int) else count
    ok = (
        isinstance(spec, list)
        and lo <= len(spec) <= hi
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in spec)
        and all(isinstance(x, int) or math.isfinite(x) for x in spec)
    )
    if not ok:
        size = str(lo) if lo == hi else f"{lo} or {hi}"
        raise InvalidFile(
            f"must be a list of {size} finite numbers, got {_show(spec)}", field=where
        )
    return list(spec)


def _floats(values: list[int | float], spec: Any, where: str) -> list[float]:
    try:
        return [float(x) for x in values]
    except OverflowError:
        raise InvalidFile(
            f"must be numbers within floating point (about 1.8e308), got {_show(spec)}", field=where
        ) from None


def _integers(values: list[int | float], what: str, spec: Any, where: str) -> list[int]:
    if not all(isinstance(x, int) or float(x).is_integer() for x in values):
        raise InvalidFile(f"{what}, got {_show(spec)}", field=where)
    return [int(x) for x in values]


def _range_length(start: int, stop: int, step: int) -> int:
    # len(range(...)) overflows beyond sys.maxsize; this does not.
    if step > 0:
        return max(0, (stop - start + step - 1) // step)
    return max(0, (start - stop - step - 1) // -step)


def _check_values_finite(values: list[Any], where: str) -> None:
    for k, item in enumerate(values):
        if not _is_scalar(item):
            raise InvalidFile(
                f"must be a number, a string or a boolean, got {_show(item)}", field=f"{where}[{k}]"
            )
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidFile(f"must be a finite number, got {item}", field=f"{where}[{k}]")


Axis = tuple[int, Callable[[], Sequence[Scalar]]]


def _axis(value: Any, where: str) -> Axis:
    """Check one grid axis (or ``choice``) and size it; its values are made only when asked
    for, so that a huge grid is refused before any of it is built."""
    if _is_scalar(value):
        _check_values_finite([value], where)
        return 1, lambda: [value]
    if isinstance(value, list):
        if not value:
            raise InvalidFile("must not be empty", field=where)
        _check_values_finite(value, where)
        return len(value), lambda: list(value)
    if not isinstance(value, Mapping):
        raise InvalidFile(f"must be a value, a list or a mapping, got {_show(value)}", field=where)
    kind, spec = _single(value, where, ("range", "linspace"))
    field = f"{where}.{kind}"
    if kind == "range":
        bounds = _integers(
            _numbers(spec, (2, 3), field), "must be integers with a non-zero step", spec, field
        )
        if len(bounds) == 3 and bounds[2] == 0:
            raise InvalidFile(
                f"must be integers with a non-zero step, got {_show(spec)}", field=field
            )
        start, stop, step = (*bounds, 1) if len(bounds) == 2 else bounds
        count = _range_length(start, stop, step)
        make: Callable[[], Sequence[Scalar]] = lambda: list(range(start, stop, step))  # noqa: E731
    else:
        numbers = _numbers(spec, 3, field)
        given = numbers[2]
        if not ((isinstance(given, int) or given.is_integer()) and given >= 1):
            raise InvalidFile(f"count must be a positive integer, got {given!r}", field=field)
        first, last = _floats(numbers[:2], spec, field)
        count = int(given)
        make = lambda: linspace(first, last, count)  # noqa: E731
    if count == 0:
        raise InvalidFile(f"gives no values ({_show(spec)})", field=field)
    if count > MAX_POINTS:
        raise InvalidFile(f"gives {_count(count)} values, {_too_many()}", field=field)
    return count, make


def _single(value: Mapping[str, Any], where: str, kinds: Sequence[str]) -> tuple[str, Any]:
    if len(value) != 1 or next(iter(value)) not in kinds:
        raise InvalidFile(
            f"must be a value, a list or one of {{{', '.join(kinds)}: ...}}, got {_show(value)}",
            field=where,
        )
    return next(iter(value.items()))


#: 64-bit integers: what numpy draws from, and what a Parquet column holds.
_INT64 = 2**63


def _distribution(value: Any, where: str) -> Distribution:
    if _is_scalar(value):
        _check_values_finite([value], where)
        return Distribution("fixed", values=(value,))
    if not isinstance(value, Mapping):
        raise InvalidFile(f"must be a value or a distribution, got {_show(value)}", field=where)
    kind, spec = _single(value, where, ("uniform", "log_uniform", "integers", "choice"))
    field = f"{where}.{kind}"
    if kind == "choice":
        return Distribution("choice", values=tuple(_axis(spec, field)[1]()))
    numbers = _numbers(spec, 2, field)
    if kind == "integers":
        low, high = _integers(numbers, "bounds must be integers", spec, field)
        if not -_INT64 <= low < high <= _INT64:
            raise InvalidFile(
                f"bounds must be 64-bit integers, -2**63 <= low < high <= 2**63, got {_show(spec)}",
                field=field,
            )
        return Distribution(kind, low=low, high=high)
    low_f, high_f = _floats(numbers, spec, field)
    if not low_f < high_f:
        raise InvalidFile(f"low must be below high, got {_show(spec)}", field=field)
    if kind == "log_uniform" and low_f <= 0:
        raise InvalidFile(f"bounds must be positive, got {_show(spec)}", field=field)
    return Distribution(kind, low=low_f, high=high_f)


#: The most values the options of a sweep may hold (counting repeats of an aliased value).
MAX_OPTION_VALUES = 100_000


def _check_options(options: Mapping[str, Any]) -> None:
    """Options are plain JSON (they go into ``sweep.json``): finite numbers, string keys, and
    at most :data:`MAX_OPTION_VALUES` values, counted without expanding shared (aliased) ones."""
    stack: list[tuple[str, Any]] = [("options", options)]
    seen = 0
    while stack:
        where, value = stack.pop()
        seen += 1
        if seen > MAX_OPTION_VALUES:
            raise InvalidFile(
                f"hold more than {MAX_OPTION_VALUES:,} values (a YAML alias bomb?)", field="options"
            )
        if isinstance(value, Mapping):
            for key in value:
                if not isinstance(key, str):
                    raise InvalidFile(f"keys must be strings, got {_show(key)}", field=where)
            stack.extend((f"{where}.{k}", v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((f"{where}[{k}]", v) for k, v in reversed(list(enumerate(value))))
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidFile(f"must be a finite number, got {value}", field=where)
        elif not _is_scalar(value):
            raise InvalidFile(
                f"must be a number, a string, a boolean, null, a list or a mapping, got "
                f"{_show(value)}",
                field=where,
            )


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
    _check_options(spec.options)
    study = STUDIES.get(spec.study)
    if study is None:
        if ":" not in spec.study:
            raise InvalidFile(
                f"unknown study {_show(spec.study)} (known: {', '.join(STUDIES)}, or "
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
        axes = {k: _axis(v, f"grid.{k}") for k, v in spec.grid.items()}
        size = math.prod(count for count, _ in axes.values())
        if size > MAX_POINTS:
            product = " x ".join(
                f"{_count(count)} {k!r}" for k, (count, _) in axes.items() if count > 1
            )
            raise InvalidFile(f"has {_count(size)} points ({product}), {_too_many()}", field="grid")
        params = grid_points({k: make() for k, (_, make) in axes.items()})
    else:
        assert spec.sample is not None
        if spec.sample.size > MAX_POINTS:
            raise InvalidFile(f"is {_count(spec.sample.size)}, {_too_many()}", field="sample.size")
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
    for key, listed in (("seed_from", seed_from), ("replicates", spec.replicates)):
        for k, name in enumerate(listed or []):
            if name not in names:
                raise InvalidFile(f"{name!r} is not a parameter of this sweep",
                                  field=f"{key}[{k}]")  # fmt: skip
    replicates = spec.replicates
    if replicates is None:
        replicates = list(study.replicates) if study is not None else []
    points = make_points(params, sweep_seed=spec.seed, seed_from=seed_from)
    return Sweep(
        function=function,
        points=points,
        options=options,
        seed=spec.seed,
        study=spec.study,
        seed_from=tuple(seed_from) if seed_from is not None else None,
        metric=spec.metric or (study.metric if study is not None else None),
        group_by=spec.group_by or (study.group_by if study is not None else None),
        replicates=tuple(dict.fromkeys([*replicates, SAMPLE_INDEX])),
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
