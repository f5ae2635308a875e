"""The compiled kernels' machine code, kept on disk and loaded without numba.

numba compiles the loops of :mod:`inferplan.codesign.engine.kernels` once for this machine, and the
object code is kept in a cache file; every later process loads it with llvmlite alone and
calls it through :mod:`ctypes`. Importing numba and readying its compiler costs about a
second in every process that solves (importing numba, scipy.linalg for numba's BLAS check,
and numba's target set-up), against a few hundredths of a second to import llvmlite and load
the object: on a large network read from tables that is most of what a one-off command waits
for.

What makes this possible is that the kernels allocate nothing: every array is given by the
caller (``_nrt=False``: no numba runtime), so their object code refers to no symbol outside
itself. Each entry point's argument types are spelt once, in :data:`SIGNATURES`. With numba's
calling convention an argument list becomes *fields*: a C-contiguous array is its two null
pointers, size, item size, data pointer, shape and strides, a scalar itself; the result and
an exception slot are passed by pointer first. A small trampoline, compiled into the same
object, takes all the fields as one ``int64`` vector and makes the call, so that a call from
Python passes one pointer. A caller that solves many times packs the arguments that do not
change once (:meth:`Kernel.frame`); each call then takes one buffer that holds its arrays and
the field vector (:meth:`Frame.new`), so that it asks numpy for one address.

The cache file is named by a hash of the kernels' source, this module's source, the numba and
llvmlite versions and the host CPU, so that a change to any of them compiles afresh; it lives
in ``$INFERPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/inferplan``, else ``~/.cache/inferplan``.
It holds the code's SHA-256: a damaged file is compiled again. A folder that cannot be
written only means that the process compiles for itself.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from inferplan.arrays import IntArray

__all__ = ["SIGNATURES", "Call", "Frame", "Kernel", "cache_dir", "cache_path", "kernel", "loaded"]

_F8, _I8 = "f8", "i8"
_F1, _F2, _F3, _I1 = "f8[::1]", "f8[:, ::1]", "f8[:, :, ::1]", "i8[::1]"

# fmt: off
SIGNATURES: dict[str, tuple[str, ...]] = {
    "psg": (
        _F2, _F1, _I8, _I8,  # work_t, D, source, target
        _F1, _F1, _I1, _I1,  # capacity, bandwidth, link_src, link_dst
        _I1, _F1, _F1, _F1, _F1, _I1,  # seg_ptr, seg_start/slope/value, node_cap, node_table
        _I1, _F1, _F1, _F1, _F1, _I1,  # the same of the links (lseg_*, link_cap, link_table)
        _I1, _I1, _I1, _I1,  # out_ptr, out_links, in_ptr, in_links
        _I1, _F2, _F1,  # linear (links of one piece, uncapped), need_t, limit
        _F3, _F2, _F8,  # node and link tables, beta
        _F2, _F1,  # req_t, wanted
        _F2, _F1, _F1, _I1, _F1,  # label, out, tail, queue, keys
        _I1, _I1, _I1, _I1,  # path, partition, used, count
    ),
    "throughput": (
        _F2, _F1, _I8, _I8,  # work_t, D, source, target
        _I1, _I1, _I1, _I1, _I1, _I1,  # link_src, link_dst, out_ptr, out_links, in_ptr, in_links
        _F2, _F1, _F1, _F1,  # need_t, capacity, bandwidth, limit
        _F2, _F1, _F1, _I1,  # label, out, tail, stack
        _I1, _I1, _I1,  # path, partition, count
    ),
}
# fmt: on
"""Each kernel entry point's argument types (numba's spelling: ``f8`` and ``i8`` scalars,
C-contiguous ``float64``/``int64`` arrays); each returns a ``float64``."""

_HERE = Path(__file__).resolve().parent
_DTYPES = {"f8": np.dtype(np.float64), "i8": np.dtype(np.int64)}
_lock = threading.Lock()
_loaded: dict[str, Kernel] = {}
_engines: list[Any] = []  # llvmlite's execution engines: they own the loaded code


def cache_dir() -> Path:
    """Where the kernels' object code is kept (see the module docstring)."""
    if os.environ.get("INFERPLAN_CACHE_DIR"):
        return Path(os.environ["INFERPLAN_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "inferplan"
    try:
        return Path.home() / ".cache" / "inferplan"
    except RuntimeError:  # no home folder: the system's temporary folder
        return Path(tempfile.gettempdir()) / "inferplan"


def _host() -> tuple[str, str, str]:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features().flatten()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), features


def _machine() -> Any:
    """llvmlite's target machine for this host, as numba's JIT uses it."""
    import llvmlite.binding as llvm

    triple, cpu, features = _host()
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, codemodel="jitdefault"
    )


def cache_path(name: str) -> Path:
    """The cache file of the entry point ``name`` for this source, numba and CPU."""
    import importlib.metadata

    digest = hashlib.sha256()
    for source in ("kernels.py", "native.py"):
        digest.update((_HERE / source).read_bytes())
    for package in ("numba", "llvmlite"):
        digest.update(importlib.metadata.version(package).encode())
    digest.update("\0".join(_host()).encode())
    return cache_dir() / f"kernels-{name}-{digest.hexdigest()[:20]}.o"


def _ndim(kind: str) -> int:
    """The number of dimensions of an argument type (``0`` for a scalar)."""
    return kind.count(",") + 1 if "[" in kind else 0


def _width(kind: str) -> int:
    """How many fields an argument of type ``kind`` takes."""
    ndim = _ndim(kind)
    return 5 + 2 * ndim if ndim else 1


def _numba_type(kind: str) -> Any:
    from numba.core import types

    scalar = types.float64 if kind.startswith("f8") else types.int64
    ndim = _ndim(kind)
    return types.Array(scalar, ndim, "C") if ndim else scalar


def _trampoline(name: str, entry: str, params: Sequence[str]) -> str:
    """LLVM IR of ``inferplan_<name>(ptr fields)``: loads the fields (``params`` are the
    entry's LLVM parameter types, result and exception pointers first) and calls ``entry``."""
    lines, arguments = [], []
    for k, kind in enumerate(params):
        lines.append(f"  %p{k} = getelementptr i64, ptr %fields, i64 {k}")
        lines.append(f"  %v{k} = load i64, ptr %p{k}")
        if kind == "ptr":
            lines.append(f"  %a{k} = inttoptr i64 %v{k} to ptr")
        elif kind == "double":
            lines.append(f"  %a{k} = bitcast i64 %v{k} to double")
        elif kind != "i64":  # pragma: no cover - numba's convention has no other kinds here
            raise RuntimeError(f"unexpected parameter type {kind!r} of {entry}")
        arguments.append(f"{kind} %{'v' if kind == 'i64' else 'a'}{k}")
    return "\n".join([
        f"declare i32 @\"{entry}\"({', '.join(params)})",
        f"define i32 @inferplan_{name}(ptr %fields) {{",
        *lines,
        f"  %status = call i32 @\"{entry}\"({', '.join(arguments)})",
        "  ret i32 %status",
        "}",
    ])  # fmt: skip


def _build(name: str) -> tuple[str, bytes]:
    """Compile the entry point ``name`` with numba, with its trampoline: the trampoline's
    symbol and the object code."""
    import llvmlite.binding as llvm
    import numba

    from inferplan.codesign.engine import kernels

    signature = numba.float64(*map(_numba_type, SIGNATURES[name]))
    options = {**kernels.OPTIONS, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    compiled = numba.njit(signature, **options)(getattr(kernels, name).py_func)
    result = compiled.overloads[signature.args]
    module = llvm.parse_assembly(result.library.get_llvm_str())
    entry = str(result.fndesc.mangled_name)
    params = [str(argument.type) for argument in module.get_function(entry).arguments]
    if len(params) != 2 + sum(map(_width, SIGNATURES[name])):  # pragma: no cover
        raise RuntimeError(f"numba's {name} takes {len(params)} fields, not as expected")
    module.link_in(llvm.parse_assembly(_trampoline(name, entry, params)))
    return f"inferplan_{name}", _machine().emit_object(module)


def _read(path: Path) -> tuple[str, bytes] | None:
    """The symbol and object code kept at ``path``; ``None`` if missing or damaged."""
    try:
        symbol, digest, code = path.read_bytes().split(b"\0", 2)
    except (OSError, ValueError):
        return None
    if hashlib.sha256(code).hexdigest().encode() != digest:
        return None
    return symbol.decode(), code


def _write(path: Path, symbol: str, code: bytes) -> None:
    """Keep ``symbol`` and ``code`` at ``path`` with the code's SHA-256, written atomically;
    a cache that cannot be written is skipped."""
    stored = b"\0".join((symbol.encode(), hashlib.sha256(code).hexdigest().encode(), code))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as file:
            file.write(stored)
        os.replace(file.name, path)
    except OSError:
        pass


def _load(symbol: str, code: bytes) -> int:
    """Load object code into a new execution engine; the address of ``symbol`` in it."""
    import llvmlite.binding as llvm

    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    address = int(engine.get_function_address(symbol))
    if not address:
        raise RuntimeError(f"the object code defines no {symbol!r}")
    _engines.append(engine)
    return address


class Kernel:
    """A kernel entry point loaded from machine code (see the module docstring).

    ``kernel(*arguments)`` packs every argument and runs once. A caller that runs it many
    times packs the arguments that stay the same once, in a :meth:`frame`, and each call
    takes a buffer from the frame for the rest.
    """

    def __init__(self, name: str, address: int) -> None:
        self.name = name
        self.kinds = SIGNATURES[name]
        self.width = sum(map(_width, self.kinds))
        self.function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(address)

    def pack(self, arguments: Sequence[Any], start: int = 0) -> IntArray:
        """The fields of ``arguments``, the entry point's arguments from position ``start``
        on; arrays must be C-contiguous and of the declared type and dimensions."""
        if start + len(arguments) > len(self.kinds):
            raise TypeError(
                f"{self.name} takes {len(self.kinds)} arguments, got {start + len(arguments)}"
            )
        fields: list[int] = []
        for position, value in enumerate(arguments, start):
            kind = self.kinds[position]
            ndim = _ndim(kind)
            if not ndim:
                scalar = np.float64(value) if kind == _F8 else np.int64(value)
                fields.append(int(scalar.view(np.int64)))
                continue
            dtype = _DTYPES[kind[:2]]
            if not (isinstance(value, np.ndarray) and value.dtype == dtype
                    and value.ndim == ndim and value.flags.c_contiguous):  # fmt: skip
                raise TypeError(f"{self.name}: argument {position} must be a C-contiguous "
                                f"{ndim}-d {dtype} array")  # fmt: skip
            fields += [0, 0, value.size, value.itemsize, value.ctypes.data,
                       *value.shape, *value.strides]  # fmt: skip
        return np.array(fields, dtype=np.int64)

    def frame(self, fixed: Sequence[Any], shapes: Sequence[tuple[int, ...]]) -> Frame:
        """A frame for calls whose first arguments are ``fixed`` (their fields packed now:
        the arrays must outlive the frame) and whose other array arguments have ``shapes``
        (in order); the other scalars are given to each call."""
        per_call = self.kinds[len(fixed) :]
        if sum(1 for kind in per_call if _ndim(kind)) != len(shapes):
            raise TypeError(f"{self.name}: {len(shapes)} shapes for the arrays of "
                            f"{len(per_call)} per-call arguments")  # fmt: skip
        head = self.pack(fixed).tolist()
        # the buffer: the per-call arrays, then the field vector (the result and exception
        # pointers, every argument's fields), then the result's and the exception's slots
        offset, template, pointers = 0, [0, 0, *head], [0, 1]
        scalars: list[tuple[int, bool]] = []
        arrays: list[tuple[int, tuple[int, ...], np.dtype[Any]]] = []
        remaining = iter(shapes)
        for kind in per_call:
            if not _ndim(kind):
                scalars.append((len(template), kind == _F8))
                template.append(0)
                continue
            shape = next(remaining)
            if len(shape) != _ndim(kind):
                raise TypeError(f"{self.name}: shape {shape} for a {kind} argument")
            size = math.prod(shape)
            strides = [8 * math.prod(shape[k + 1 :]) for k in range(len(shape))]
            pointers.append(len(template) + 4)
            template += [0, 0, size, 8, 8 * offset, *shape, *strides]
            arrays.append((offset, tuple(shape), _DTYPES[kind[:2]]))
            offset += size
        fields_at = offset
        slots = fields_at + len(template)
        template[0], template[1] = 8 * slots, 8 * (slots + 1)
        slotted = tuple((fields_at + k, real) for k, real in scalars)
        return Frame(self, tuple(fixed), slots + 2, fields_at,
                     np.array(template, dtype=np.int64), np.array(pointers), slotted,
                     tuple(arrays))  # fmt: skip

    def __call__(self, *arguments: Any) -> float:
        if len(arguments) != len(self.kinds):
            raise TypeError(f"{self.name} takes {len(self.kinds)} arguments, "
                            f"got {len(arguments)}")  # fmt: skip
        return self.frame(arguments, ()).new().run()


# A call whose buffer is at most this large keeps it for the thread's next call of the same
# frame: on small instances making the buffer costs more than the solve.
REUSE_BYTES = 1 << 20


@dataclass(frozen=True, eq=False)
class Frame:
    """The fields of a kernel's calls that stay the same, and the layout of one buffer that
    holds the rest: the per-call arrays and the field vector itself, so that a call asks numpy
    for one address (made by :meth:`Kernel.frame`)."""

    kernel: Kernel
    fixed: tuple[Any, ...]  # the fixed arguments, kept alive while their fields are used
    size: int
    fields_at: int
    template: IntArray
    pointers: IntArray
    scalars: tuple[tuple[int, bool], ...]  # buffer positions, and whether each is a float
    arrays: tuple[tuple[int, tuple[int, ...], np.dtype[Any]], ...]
    kept: dict[int, Call] = field(default_factory=dict)  # by thread: small buffers only

    def call(self) -> Call:
        """A call to fill and run: this thread's last one when its buffer is small (its
        arrays then hold that call's values, to be overwritten), else :meth:`new`."""
        if 8 * self.size > REUSE_BYTES:
            return self.new()
        thread = threading.get_ident()
        if thread not in self.kept:
            self.kept[thread] = self.new()
        return self.kept[thread]

    def new(self) -> Call:
        """A call with a fresh buffer: its arrays are :attr:`Call.arrays`, to fill."""
        buffer = np.empty(self.size)
        fields = buffer[self.fields_at :].view(np.int64)
        base = buffer.ctypes.data
        fields[: self.template.size] = self.template
        fields[self.pointers] += base
        arrays = [np.ndarray(shape, dtype, buffer, 8 * offset)
                  for offset, shape, dtype in self.arrays]  # fmt: skip
        return Call(self, buffer, fields, base + 8 * self.fields_at, arrays)


@dataclass(frozen=True)
class Call:
    """One call of a kernel, its arrays in :attr:`arrays` (see :meth:`Frame.new`)."""

    frame: Frame
    buffer: npt.NDArray[np.float64]
    fields: IntArray
    address: int
    arrays: list[npt.NDArray[Any]]
    given: list[int] = field(default_factory=list)
    """A caller's note of what its arrays hold (the ids of the read-only arrays it last
    copied into them, kept alive in :attr:`kept`), so that it may skip copying them again."""
    kept: list[Any] = field(default_factory=list)

    def run(self, *scalars: float) -> float:
        """Run the kernel with the per-call ``scalars``; its ``float64`` result."""
        frame = self.frame
        if len(scalars) != len(frame.scalars):
            raise TypeError(f"{frame.kernel.name} takes {len(frame.scalars)} per-call "
                            f"scalars, got {len(scalars)}")  # fmt: skip
        for (slot, real), value in zip(frame.scalars, scalars, strict=False):  # equal lengths
            if real:
                self.buffer[slot] = value  # a float64 field: the buffer holds its bits
            else:
                self.fields[slot - frame.fields_at] = value
        status = frame.kernel.function(self.address)
        if status != 0:
            raise RuntimeError(f"the compiled {frame.kernel.name} kernel failed ({status})")
        return float(self.buffer[-2])


def kernel(name: str) -> Kernel:
    """The compiled entry point ``name`` (``"psg"`` or ``"throughput"``): loaded from the
    cache, or compiled with numba (and cached) when it is not there. Needs numba and llvmlite
    (the ``fast`` extra)."""
    if name in _loaded:  # loaded already: no lock to take
        return _loaded[name]
    with _lock:
        if name not in _loaded:
            path = cache_path(name)
            stored = _read(path)
            address = None
            if stored is not None:
                try:
                    address = _load(*stored)
                except RuntimeError:  # not loadable here after all: compiled again below
                    address = None
            if address is None:
                symbol, code = _build(name)
                _write(path, symbol, code)
                address = _load(symbol, code)
            _loaded[name] = Kernel(name, address)
        return _loaded[name]


def loaded() -> bool:
    """Whether this process has loaded a compiled kernel already."""
    return bool(_loaded)
