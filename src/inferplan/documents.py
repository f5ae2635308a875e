"""Reading and writing the structured files inferplan uses (JSON and YAML).

This is the one place where files become plain Python data and pydantic validation errors become
:class:`~inferplan.errors.InferplanError` messages naming the file and the field.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from inferplan.errors import InferplanError, InvalidFile

__all__ = ["field_path", "read_document", "validate_document", "write_document"]

ModelT = TypeVar("ModelT", bound=BaseModel)


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    return yaml


def read_document(path: str | Path) -> Any:
    """Parse a JSON or YAML file (chosen by suffix; YAML otherwise, which also reads JSON)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidFile("file not found", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidFile(f"cannot read file ({exc})", source=str(path)) from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidFile(
                f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                source=str(path),
            ) from None
    try:
        return _yaml().load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidFile(f"malformed YAML{where}: {problem}", source=str(path)) from None


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return value


def write_document(data: Mapping[str, Any], path: str | Path) -> None:
    """Write ``data`` as JSON (``.json``) or YAML (anything else)."""
    path = Path(path)
    plain = _plain(data)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(plain, indent=2) + "\n", encoding="utf-8")
        return
    buffer = io.StringIO()
    _yaml().dump(plain, buffer)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def field_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic location tuple as ``nodes[2].capacity``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _kind(value: Any) -> Any:
    return value.get("kind") if isinstance(value, Mapping) else None


def _data_path(data: Any, loc: Sequence[int | str]) -> list[int | str]:
    """The part of a pydantic location that names places in ``data``: without the tags a
    discriminated union adds (``cost.modules.size`` is ``cost.size`` in the file) and the
    names of validator functions."""
    out: list[int | str] = []
    here = data
    for part in loc:
        tag = isinstance(part, str) and (part.startswith("function-") or part == _kind(here))
        if tag and isinstance(here, Mapping) and part not in here:
            continue
        out.append(part)
        try:
            here = here[part]
        except (KeyError, IndexError, TypeError):
            here = None
    return out


def _kind_of(value: Any) -> str:
    if value is None:
        return "nothing (an empty document or null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def validate_document(
    model: type[ModelT],
    data: Any,
    *,
    source: str | None,
    error: type[InferplanError],
) -> ModelT:
    """Validate ``data`` against ``model``; raise ``error`` naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = _data_path(data, first["loc"])
        kind = first["type"]
        if kind == "missing":
            message = "missing field"
        elif kind == "extra_forbidden":
            message = "unknown field"
        elif kind in ("model_type", "dict_type"):
            what = "the top level" if not loc else "it"
            message = f"{what} must be a mapping of fields, got {_kind_of(first.get('input'))}"
        elif kind == "value_error":  # a model's own check: its message says what is wrong
            message = str(first.get("ctx", {}).get("error", first["msg"]))
        else:
            message = first["msg"]
            if "input" in first:
                message += f", got {first['input']!r}"
        raise error(message, source=source, field=field_path(loc) or None) from None
