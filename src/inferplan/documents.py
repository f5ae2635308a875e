"""Reading and writing the structured files inferplan uses (JSON and YAML).

This is the one place where files become plain Python data and pydantic validation errors become
:class:`~inferplan.errors.InferplanError` messages naming the file and the field.

Every document is checked to be nested at most :data:`MAX_DEPTH` lists and mappings deep, without
recursion: JSON data is checked once parsed (both parsers refuse, with an error caught here,
what would exhaust their stack), unless the caller vouches for its shape (a flat list of flat
mappings cannot be deep), and its text is scanned to locate a problem; YAML is limited while
it is composed and its data checked after aliases are resolved (an alias may nest a deep
collection in another, or in itself). No inferplan file needs more than a few levels; the
check keeps a crafted file from exhausting the interpreter's stack anywhere downstream.
"""

from __future__ import annotations

import difflib
import gc
import io
import json
import math
import os
import re
import stat
import sys
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from inferplan.errors import InferplanError, InvalidFile

if TYPE_CHECKING:  # pydantic and ruamel.yaml load when a model or a YAML file is first used
    from pydantic import BaseModel
    from ruamel.yaml import YAML

__all__ = [
    "MAX_DEPTH",
    "check_json_nesting",
    "collection_paused",
    "decode_text",
    "field_path",
    "open_regular",
    "path_exists",
    "read_bytes",
    "read_document",
    "read_text",
    "validate_document",
    "write_document",
]

ModelT = TypeVar("ModelT", bound="BaseModel")

MAX_DEPTH = 100
"""The deepest nesting of lists and mappings a document may have."""

_TOO_DEEP = f"nested deeper than {MAX_DEPTH} lists or mappings"
# JSON strings (skipped whole, so brackets inside them do not count) and brackets.
_JSON_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_TOKENS = re.compile(rf"{_JSON_STRINGS.pattern}|[\[\]{{}}]")
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def _yaml() -> YAML:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.max_depth = MAX_DEPTH + 1  # ruamel counts the scalars inside the deepest collection
    return yaml


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"at line {line}, column {column}"


def check_json_nesting(text: str, source: str) -> None:
    """Refuse JSON text nested deeper than :data:`MAX_DEPTH` before it reaches the parser."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    # Fast path (regular expressions and numpy): the brackets outside strings, their depths.
    brackets = _NOT_BRACKETS.sub("", _JSON_STRINGS.sub("", text)).encode("ascii")
    codes = np.frombuffer(brackets, dtype=np.uint8)
    opens = (codes == ord("[")) | (codes == ord("{"))
    if np.cumsum(np.where(opens, 1, -1)).max(initial=0) <= MAX_DEPTH:
        return
    depth = 0  # too deep: find where, for the message
    for token in _JSON_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidFile(f"{_TOO_DEEP} {_where(text, token.start())}", source=source)
        elif bracket in "]}":
            depth -= 1


def _children(value: Any) -> list[Any] | None:
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return None


def _check_nesting(data: Any, source: str) -> None:
    """Refuse data nested deeper than :data:`MAX_DEPTH`, or containing itself (a YAML alias to
    an enclosing collection), in time linear in its distinct collections, without recursion."""
    root = _children(data)
    if root is None:
        return
    done: dict[int, int] = {}  # id -> depth of a finished collection (aliases share them)
    path = [id(data)]
    stack = [(iter(root), [0])]  # per open collection: its children left, its deepest child
    while stack:
        children, deepest = stack[-1]
        for child in children:
            nested = _children(child)
            if nested is None:
                continue
            key = id(child)
            if key in path:
                raise InvalidFile("an alias refers to a collection that contains it", source=source)
            if key not in done:
                if len(path) == MAX_DEPTH:
                    raise InvalidFile(_TOO_DEEP, source=source)
                path.append(key)
                stack.append((iter(nested), [0]))
                break
            if len(path) + done[key] > MAX_DEPTH:
                raise InvalidFile(_TOO_DEEP, source=source)
            deepest[0] = max(deepest[0], done[key])
        else:
            stack.pop()
            done[path.pop()] = deepest[0] + 1
            if stack:
                stack[-1][1][0] = max(stack[-1][1][0], deepest[0] + 1)


def path_exists(path: str | Path) -> bool:
    """Whether ``path`` names an existing file; ``False`` for text that cannot be a path (too
    long, or with a NUL byte), so that a name can be tried as a path first."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


_SPECIAL = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}  # fmt: skip


def open_regular(path: str | Path) -> io.BufferedReader:
    """Open ``path`` for reading in binary, refusing anything but a regular file.

    The file is opened without blocking and checked before a byte is read, so that a FIFO, a
    device or a socket given as a file is refused at once instead of blocking for ever (or
    reading without end); every file inferplan reads goes through here.

    Raises
    ------
    InvalidFile
        If ``path`` is missing, a folder, a special file or unreadable.

    Examples
    --------
    >>> import os, tempfile
    >>> fifo = os.path.join(tempfile.mkdtemp(), "pipe.json")
    >>> os.mkfifo(fifo)
    >>> open_regular(fifo)
    Traceback (most recent call last):
    inferplan.errors.InvalidFile: .../pipe.json: cannot read file (a FIFO, not a regular file)
    """
    source = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InvalidFile("file not found", source=source) from None
    except (OSError, ValueError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidFile(f"cannot read file ({problem})", source=source) from None
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind != stat.S_IFREG:
        os.close(fd)
        what = "a folder" if kind == stat.S_IFDIR else _SPECIAL.get(kind, "a special file")
        raise InvalidFile(f"cannot read file ({what}, not a regular file)", source=source)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(path: str | Path) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`).

    Raises
    ------
    InvalidFile
        If ``path`` is missing, not a regular file or unreadable.
    """
    with open_regular(path) as handle:
        try:
            return handle.read()
        except OSError as exc:
            problem = exc.strerror or exc
            raise InvalidFile(f"cannot read file ({problem})", source=str(path)) from None


def read_text(path: str | Path) -> str:
    """The UTF-8 text of the regular file ``path``, line ends made ``\\n``.

    Raises
    ------
    InvalidFile
        If ``path`` is missing, not a regular file or unreadable, or not UTF-8 text (naming
        the line and the byte).
    """
    return decode_text(read_bytes(path), Path(path))


# The fast parser reads an integer outside [-2**63, 2**64) as the nearest float, whose
# magnitude is then at least 2**63; the standard library reads it exactly.
_LEAST_ROUNDED = float(2**63)


def _beyond_64_bits(data: Any) -> bool:
    """Whether data parsed by the fast parser may have held an integer outside ``[-2**63,
    2**64)``, which it reads as a float, rounded: whether any float in ``data`` is that large
    (a float written that large is a false alarm, read again exactly). A walk over the parsed
    values, not the text: only the generic path (and a refused shallow shape) takes it."""
    stack = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is float:
            if not -_LEAST_ROUNDED < value < _LEAST_ROUNDED:
                return True
        elif kind is list:
            stack.extend(value)
        elif kind is dict:
            stack.extend(value.values())
    return False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (if it runs; it resumes after).

    Parsing a large document makes millions of objects and no reference cycles, and every
    few hundred new containers would start a collection over the young ones, every so often
    over all of them: passes that find nothing to free (0.02-0.03 s of orjson's 0.33 s on a
    network file of half a million links, more while the columns are read from it). A block
    that drops the document before it ends frees it without those passes too."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _parse_json(raw: bytes) -> tuple[Any, bool]:
    """Parse JSON with orjson when it is installed (about 2.8 times faster than the standard
    library on a large network file), else with the standard library; and whether the parse
    was the fast one (whose integers beyond 64 bits are rounded floats: see
    :func:`_beyond_64_bits`)."""
    try:
        import orjson
    except ImportError:
        return json.loads(raw.decode("utf-8")), False
    return orjson.loads(raw), True


def _read_json(text: str, source: str) -> Any:
    """Parse JSON text with the standard library, refusing deep nesting first: the reference
    behaviour, whose messages name the line and column of the problem."""
    check_json_nesting(text, source)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidFile(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=source
        ) from None
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise InvalidFile(_unreadable_value(exc), source=source) from None


def read_document(path: str | Path, *, shallow: Callable[[Any], bool] | None = None) -> Any:
    """Parse a JSON or YAML file (chosen by suffix; YAML otherwise, which also reads JSON).

    JSON is parsed first by the fastest parser at hand; what it refuses (malformed text,
    ``NaN``, deep nesting) is parsed again by the standard library, which accepts or refuses
    it with the messages of :func:`_read_json`, and so is data in which it may have rounded
    an integer beyond 64 bits (:func:`_beyond_64_bits`). ``shallow``, when given, is a check
    of the parsed data's shape that bounds its nesting (a flat list of flat mappings, say)
    and takes every number it accepts as a float (so that a rounded integer reads as the
    exact one would): when it passes, the walks over the data are skipped; when it raises,
    the error is raised again from the exact parse if the fast one may have rounded.
    """
    path = Path(path)
    raw = read_bytes(path)
    if path.suffix.lower() == ".json":

        def exact() -> Any:
            return _read_json(decode_text(raw, path), str(path))

        try:
            data, fast = _parse_json(raw)
        except (ValueError, RecursionError):
            data, fast = exact(), False
        if shallow is not None:
            try:
                if shallow(data):
                    return data
            except InferplanError:
                if not (fast and _beyond_64_bits(data)):
                    raise
                data, fast = exact(), False  # name the value as written
                if shallow(data):
                    return data
        if fast and _beyond_64_bits(data):
            data = exact()
            if shallow is not None and shallow(data):
                return data
        try:
            _check_nesting(data, str(path))
        except InvalidFile:
            check_json_nesting(decode_text(raw, path), str(path))  # names the line and column
            raise
        return data
    from ruamel.yaml.composer import MaxDepthExceededError
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml().load(decode_text(raw, path))
    except MaxDepthExceededError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InvalidFile(f"{_TOO_DEEP}{where}", source=str(path)) from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidFile(f"malformed YAML{where}: {problem}", source=str(path)) from None
    except ValueError as exc:
        raise InvalidFile(_unreadable_value(exc), source=str(path)) from None
    _check_nesting(data, str(path))
    return data


def decode_text(raw: bytes, path: str | Path) -> str:
    """The UTF-8 text of a file's bytes, line ends made ``\\n`` (as :meth:`Path.read_text`
    reads); bytes that are not UTF-8 are an :class:`~inferplan.errors.InvalidFile` naming
    ``path``, the line and the byte."""
    try:
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InvalidFile(
            f"line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})", source=str(path)
        ) from None


def _unreadable_value(exc: ValueError) -> str:
    return f"cannot read a value: {str(exc).split(';')[0]}"


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
    """Render a pydantic location tuple as ``nodes[2].capacity`` (a key that is not printable
    text, such as one with a line break, is quoted: ``'a\\nb'``)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if part.isprintable() and part.strip() == part and part else repr(part)
            out += f".{name}" if out else name
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


def _beyond_float(value: Any) -> bool:
    integer = isinstance(value, int) and not isinstance(value, bool)
    return integer and abs(value) > sys.float_info.max


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _kind_of(value: Any) -> str:
    if value is None:
        return "nothing (an empty document or null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _typo_first(errors: Sequence[Any]) -> Any:
    """The error to report: an unknown field ahead of a missing field of the same mapping
    (``capcity`` given where ``capacity`` is missing: the typo is the news)."""
    first = errors[0]
    if first["type"] == "missing":
        parent = tuple(first["loc"][:-1])
        for other in errors:
            if other["type"] == "extra_forbidden" and tuple(other["loc"][:-1]) == parent:
                return other
    return first


def _nearest(loc: Sequence[Any], errors: Sequence[Any], model: type[BaseModel]) -> str:
    """`` (did you mean 'NAME'?)`` for the field of the mapping at ``loc[:-1]`` nearest to the
    unknown ``loc[-1]``: among the fields missing there, else (top level) the model's."""
    parent = tuple(loc[:-1])
    names = [str(e["loc"][-1]) for e in errors
             if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]  # fmt: skip
    here = _model_at(model, parent)
    if not names and here is not None:
        names = [info.alias or name for name, info in here.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model of the mapping at ``loc`` (field names and list indices) in a document of
    ``model``, or ``None`` where it is not one model."""
    here: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {} if here is None else here.model_fields
        info = next((f for name, f in fields.items() if part in (name, f.alias)), None)
        if info is None:
            return None
        here = _inner_model(info.annotation)
    return here


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The one model inside an annotation (``list[M]``, ``M | None``), or ``None``."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = {m for m in map(_inner_model, typing.get_args(annotation)) if m is not None}
    return found.pop() if len(found) == 1 else None


def validate_document(
    model: type[ModelT],
    data: Any,
    *,
    source: str | None,
    error: type[InferplanError],
) -> ModelT:
    """Validate ``data`` against ``model``; raise ``error`` naming the first bad field."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = _typo_first(errors)
        loc = _data_path(data, first["loc"])
        kind = first["type"]
        if kind == "missing":
            message = "missing field"
        elif kind == "extra_forbidden":
            message = "unknown field" + _nearest(first["loc"], errors, model)
        elif kind in ("model_type", "dict_type"):
            what = "the top level" if not loc else "it"
            message = f"{what} must be a mapping of fields, got {_kind_of(first.get('input'))}"
        elif kind == "value_error":  # a model's own check: its message says what is wrong
            message = str(first.get("ctx", {}).get("error", first["msg"]))
        elif _beyond_float(first.get("input")):
            digits = len(str(abs(first["input"])))
            message = (
                f"must be a number of magnitude below {sys.float_info.max:.4g} (the floating-point "
                f"range), got an integer of {digits} digits"
            )
        else:
            message = first["msg"]
            if "input" in first:
                message += f", got {_shown(first['input'])}"
        raise error(message, source=source, field=field_path(loc) or None) from None
