"""The compiled kernels' machine code, kept on disk and loaded without numba.

numba compiles the loops of :mod:`inferplan.codesign.kernels` once for this machine, and the
object code is kept in a cache file; every later process loads it with llvmlite alone and
calls it through :mod:`ctypes`. Importing numba and readying its compiler costs about a
second in every process that solves (importing numba, scipy.linalg for numba's BLAS check,
and numba's target set-up), against a few hundredths of a second to import llvmlite and load
the object: on a large network read from tables that is most of what a one-off command waits
for.

What makes this possible is that the kernels allocate nothing: every array is given by the
caller (``_nrt=False``: no numba runtime), so their object code refers to no symbol outside
itself. An entry point is called with numba's calling convention for its signature, spelt
once in :data:`SIGNATURES`: a status (``0`` when it returned), a pointer to the ``float64``
result, an exception slot, then the arguments, each C-contiguous array flattened to its
fields (two null pointers, its size, item size, data pointer, shape and strides).

The cache file is named by a hash of the kernels' source, this module's source, the numba and
llvmlite versions and the host CPU, so that a change to any of them compiles afresh; it lives
in ``$INFERPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/inferplan``, else ``~/.cache/inferplan``.
A file that cannot be written (read-only home) only means that the process compiles for
itself; a file that cannot be read back is compiled again.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SIGNATURES", "cache_dir", "cache_path", "kernel", "loaded"]

_F8, _I8 = "f8", "i8"
_F1, _F2, _F3, _I1 = "f8[::1]", "f8[:, ::1]", "f8[:, :, ::1]", "i8[::1]"

# fmt: off
SIGNATURES: dict[str, tuple[str, ...]] = {
    "psg": (
        _F8, _F2, _F1, _F3, _F2, _F2, _I8, _I8,  # beta, req_t, wanted, tables, work_t, s, t
        _F1, _F1, _I1, _I1,  # capacity, bandwidth, link_src, link_dst
        _I1, _F1, _F1, _F1, _F1, _I1,  # seg_ptr, seg_start/slope/value, node_cap, node_table
        _F1, _F1, _I1,  # link_price, link_cap, link_table
        _I1, _I1, _I1, _I1,  # out_ptr, out_links, in_ptr, in_links
        _F2, _F1, _F1, _I1, _F1,  # label, out, tail, queue, keys
        _I1, _I1, _I1, _I1,  # path, partition, used, count
    ),
    "throughput": (
        _F1, _F1, _F2, _F1, _I8, _I8,  # capacity, bandwidth, work_t, D, s, t
        _I1, _I1, _I1, _I1, _I1, _I1,  # link_src, link_dst, out_ptr, out_links, in_ptr, in_links
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
_loaded: dict[str, Callable[..., float]] = {}
_engines: list[Any] = []  # llvmlite's execution engines: they own the loaded code


def cache_dir() -> Path:
    """Where the kernels' object code is kept (see the module docstring)."""
    if os.environ.get("INFERPLAN_CACHE_DIR"):
        return Path(os.environ["INFERPLAN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "inferplan"


def _host() -> tuple[str, str, str]:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features().flatten()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), features


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


def _numba_type(kind: str) -> Any:
    from numba.core import types

    scalar = types.float64 if kind.startswith("f8") else types.int64
    ndim = _ndim(kind)
    return types.Array(scalar, ndim, "C") if ndim else scalar


def _build(name: str) -> tuple[str, bytes]:
    """Compile the entry point ``name`` with numba: its symbol and object code."""
    import llvmlite.binding as llvm
    import numba

    from inferplan.codesign import kernels

    signature = numba.float64(*map(_numba_type, SIGNATURES[name]))
    entry = {**kernels.OPTIONS, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    compiled = numba.njit(signature, **entry)(getattr(kernels, name).py_func)
    result = compiled.overloads[signature.args]
    triple, cpu, features = _host()
    machine = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, codemodel="jitdefault"
    )
    code = machine.emit_object(llvm.parse_assembly(result.library.get_llvm_str()))
    return str(result.fndesc.mangled_name), code


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

    triple, cpu, features = _host()
    machine = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, codemodel="jitdefault"
    )
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    address = int(engine.get_function_address(symbol))
    if not address:
        raise RuntimeError(f"the object code defines no {symbol!r}")
    _engines.append(engine)
    return address


def _caller(name: str, address: int) -> Callable[..., float]:
    """A Python callable for the entry point at ``address`` (see the module docstring)."""
    kinds = SIGNATURES[name]
    fields: list[Any] = [ctypes.c_void_p, ctypes.c_void_p]  # result, exception slot
    for kind in kinds:
        ndim = _ndim(kind)
        if ndim:
            fields += [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_void_p] + [ctypes.c_int64] * (2 * ndim)  # fmt: skip
        else:
            fields.append(ctypes.c_double if kind == _F8 else ctypes.c_int64)
    function = ctypes.CFUNCTYPE(ctypes.c_int32, *fields)(address)

    def call(*args: Any) -> float:
        if len(args) != len(kinds):
            raise TypeError(f"{name} takes {len(kinds)} arguments, got {len(args)}")
        flat: list[Any] = []
        for position, (kind, value) in enumerate(zip(kinds, args, strict=True)):
            ndim = _ndim(kind)
            if not ndim:
                flat.append(float(value) if kind == _F8 else int(value))
                continue
            dtype = _DTYPES[kind[:2]]
            if not (isinstance(value, np.ndarray) and value.dtype == dtype
                    and value.ndim == ndim and value.flags.c_contiguous):  # fmt: skip
                raise TypeError(
                    f"{name}: argument {position} must be a C-contiguous {ndim}-d {dtype} array"
                )
            flat += [None, None, value.size, value.itemsize, value.ctypes.data,
                     *value.shape, *value.strides]  # fmt: skip
        result, failure = ctypes.c_double(), ctypes.c_void_p()
        status = function(ctypes.addressof(result), ctypes.addressof(failure), *flat)
        if status != 0:
            raise RuntimeError(f"the compiled {name} kernel failed (status {status})")
        return result.value

    return call


def kernel(name: str) -> Callable[..., float]:
    """The compiled entry point ``name`` (``"psg"`` or ``"throughput"``) as a Python
    callable: loaded from the cache, or compiled with numba (and cached) when it is not there.
    Needs numba and llvmlite (the ``fast`` extra)."""
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
            _loaded[name] = _caller(name, address)
        return _loaded[name]


def loaded() -> bool:
    """Whether this process has loaded a compiled kernel already."""
    return bool(_loaded)
