"""Valid cuts of a traced computation graph, shared by the PyTorch and ONNX front ends.

A front end turns a model into operations in execution order. Each operation is *owned* by a
candidate block (a module, a group of modules, a node) or is *free* (a function called outside
any listed module). The candidate blocks, in order of first execution, propose the cuts
``0..M``; cut ``k`` lies after the first ``k`` of them.

The tensors crossing cut ``k`` are those made at or before it (the model's inputs count as made
at cut 0) and used after it (the model's outputs count as used after the last block); ``D_k``
is their total size. A cut is *valid* when every crossing tensor has a known size and no block
after it feeds a block before it (a module called twice, or blocks listed out of execution
order): only then can the first ``k`` blocks run on one machine and the rest on the next. The
:class:`~inferplan.profiles.profile.Profile` keeps exactly the valid cuts, merging the candidate
blocks between them. Blocks that do no counted work are then merged too, keeping, of the cuts
around them, the one with the smallest activation, because ``Q_n > 0`` is required and moving
zero work across a cut costs nothing.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from inferplan.errors import InvalidProfile
from inferplan.profiles.graph import OUTPUT, LayerGraph
from inferplan.profiles.profile import Profile

__all__ = [
    "GRANULARITIES",
    "MAX_ELEMENTS",
    "BlockSpec",
    "Cut",
    "Granularity",
    "GraphProfile",
    "Operation",
    "TensorInfo",
    "build_profile",
    "check_elements",
    "check_factory",
    "free_containers",
    "module_path",
    "owner_of",
    "parse_block_spec",
    "parse_factory_spec",
    "parse_granularity",
    "parse_shape",
]

MAX_ELEMENTS = 2**59 - 1
"""The most elements a tensor of any dtype may have: torch counts its bytes in 64-bit integers,
at up to 16 bytes an element."""

BlockSpec = int | tuple[tuple[str, ...], ...] | None
"""How to group a model into candidate blocks: ``None`` (top-level modules), a depth, or groups
of module names (each group one block)."""

Granularity = Literal["blocks", "modules", "ops"] | int
"""What a layer of the layer graph is: ``"blocks"`` (one per call of a candidate block: the
blocks' own modules), ``"modules"`` (one per call of an innermost module), ``"ops"`` (one per
operation), or a depth ``K`` (one per call of a module ``K`` levels down, or of the innermost
one above an operation less deep; coarser than the blocks when they are deeper)."""

GRANULARITIES = ("blocks", "modules", "ops")


@dataclass(frozen=True)
class TensorInfo:
    """A value flowing through the graph.

    ``bits`` is ``None`` when the size is unknown; ``constant`` values (weights, constants and
    what is computed from them alone) never cross a cut: every machine holds its own.
    """

    name: str
    shape: tuple[int, ...] | None
    dtype: str
    bits: float | None
    constant: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": None if self.shape is None else list(self.shape),
                "dtype": self.dtype, "bits": self.bits}  # fmt: skip


@dataclass(frozen=True)
class Operation:
    """One operation of the graph: its owner block (``None`` if free), values in and out, work,
    and the modules enclosing it, outermost first (what finer layer graphs group by)."""

    name: str
    owner: str | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    flops: float
    params: int = 0
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cut:
    """A candidate cut: the tensors crossing it and whether the profile offers it.

    ``index`` counts the candidate blocks before the cut (0 is the raw input); ``after`` names the
    last of them. ``valid`` cuts can run; ``kept`` ones are the profile's ``D_0..D_N``.
    """

    index: int
    after: str
    tensors: tuple[TensorInfo, ...]
    bits: float | None
    valid: bool
    kept: bool
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "after": self.after, "bits": self.bits,
                "valid": self.valid, "kept": self.kept, "reason": self.reason,
                "tensors": [t.to_dict() for t in self.tensors]}  # fmt: skip


@dataclass(frozen=True)
class GraphProfile:
    """A traced model's :class:`Profile` with the report behind it.

    Attributes
    ----------
    profile
        The blocks between consecutive kept cuts.
    cuts
        Every candidate cut ``0..M``, valid or not, with the tensors crossing it.
    warnings
        What the profile could not count (operators without a FLOP formula, ...).
    placement
        The candidate block (``1..M``) each operation runs in, by operation name; a runtime
        that splits the model at kept cuts runs an operation where this places it.
    constants
        The values computed from weights and constants alone: each stage computes its own.
    layer_placement
        The layer of the profile's layer graph (its position in ``graph.layers``) each
        operation runs in, by operation name; a runtime that splits the model at ideals runs
        an operation with its layer. Empty without a layer graph.
    values
        Every value of the graph by name (its shape, dtype and size): what a runtime that
        splits the model anywhere passes between stages.
    """

    profile: Profile
    cuts: tuple[Cut, ...]
    warnings: tuple[str, ...] = ()
    placement: Mapping[str, int] = field(default_factory=dict, repr=False)
    constants: frozenset[str] = field(default_factory=frozenset, repr=False)
    layer_placement: Mapping[str, int] = field(default_factory=dict, repr=False)
    values: Mapping[str, TensorInfo] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile.to_dict(), "cuts": [c.to_dict() for c in self.cuts],
                "warnings": list(self.warnings)}  # fmt: skip


def parse_factory_spec(text: str) -> tuple[str, str] | None:
    """``(module, factory)`` if ``text`` is ``dotted.module.path:factory`` or
    ``path/to/file.py:factory``, else ``None``.

    Only a name of this form is ever imported (which runs that Python code); anything else is
    looked up as a built-in profile or a file.

    Examples
    --------
    >>> parse_factory_spec("torchvision.models:resnet18"), parse_factory_spec("net.py:make")
    (('torchvision.models', 'resnet18'), ('net.py', 'make'))
    >>> parse_factory_spec("a b:c"), parse_factory_spec("vgg16"), parse_factory_spec("x:1")
    (None, None, None)
    """
    module, sep, factory = text.rpartition(":")
    if not sep or not factory.isidentifier():
        return None
    is_file = module.endswith(".py") and len(module) > 3
    if is_file or all(part.isidentifier() for part in module.split(".")):
        return module, factory
    return None


def check_factory(spec: str) -> tuple[str, str]:
    """``spec``'s ``(module, factory)`` (:func:`parse_factory_spec`) if that module can be
    found, checked without importing it (nor torch): a ``file.py`` that is there, or a module
    on the import path with the current directory first (its parent packages are imported).

    Raises
    ------
    InvalidProfile
        For a name of another form, a file that is not there or a module not found.
    """
    parsed = parse_factory_spec(spec)
    if parsed is None:
        raise InvalidProfile(f"expected module.path:factory or file.py:factory, got {spec!r}")
    module = parsed[0]
    if module.endswith(".py"):
        if not Path(module).is_file():
            raise InvalidProfile(f"file not found: {module}")
        return parsed
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(module)
    except (Exception, SystemExit) as exc:  # a parent package runs arbitrary code
        raise InvalidProfile(f"cannot import {module!r}: {type(exc).__name__}: {exc}"
                             ) from None  # fmt: skip
    finally:
        sys.path.remove(os.getcwd())
    if found is None:
        raise InvalidProfile(f"cannot import {module!r}: ModuleNotFoundError: No module named "
                             f"{module!r}")  # fmt: skip
    return parsed


def check_elements(shape: Sequence[int], field: str, what: str = "input shape") -> None:
    """Refuse a ``shape`` whose tensor would have more than :data:`MAX_ELEMENTS` elements.

    Examples
    --------
    >>> check_elements((2**40, 2**30), "input_shapes")
    Traceback (most recent call last):
    inferplan.errors.InvalidProfile: input_shapes: input shape 1099511627776x1073741824 has ...
    """
    if math.prod(shape) > MAX_ELEMENTS:
        dims = "x".join(map(str, shape))
        dims = dims if len(dims) <= 60 else f"{dims[:57]}..."
        raise InvalidProfile(
            f"{what} {dims} has more elements than a tensor can hold (2**59 - 1)", field=field
        )


def parse_shape(text: str) -> tuple[tuple[int, ...], str | None]:
    """Parse ``1,3,224,224`` or ``1x3x224x224``, optionally with ``:dtype`` (``1,128:int64``).

    Examples
    --------
    >>> parse_shape("1x3x32x32")
    ((1, 3, 32, 32), None)
    >>> parse_shape("2,16:int64")
    ((2, 16), 'int64')
    """
    dims_text, _, dtype = text.strip().partition(":")
    parts = [p for p in dims_text.replace("x", ",").split(",") if p.strip()]
    digits = [p.strip() for p in parts]
    if not digits or not all(d.isascii() and d.isdigit() and int(d) > 0 for d in digits):
        raise InvalidProfile(
            f"input shape must be positive integers like 1,3,224,224, got {text!r}",
            field="input_shapes",
        )
    shape = tuple(int(d) for d in digits)
    check_elements(shape, "input_shapes")
    return shape, (dtype.strip() or None)


def parse_block_spec(text: str | None) -> BlockSpec:
    """Parse a ``--blocks`` value: ``depth=2`` (or ``2``), or groups ``a+b,c,d``.

    Examples
    --------
    >>> parse_block_spec("depth=2")
    2
    >>> parse_block_spec("conv1+bn1, layer1")
    (('conv1', 'bn1'), ('layer1',))
    """
    if text is None or not text.strip():
        return None
    value = text.strip()
    depth = value.removeprefix("depth=").strip()
    if depth.isdigit():
        if int(depth) < 1:
            raise InvalidProfile(f"depth must be at least 1, got {depth}", field="blocks")
        return int(depth)
    groups = tuple(tuple(name.strip() for name in group.split("+")) for group in value.split(","))
    if any(not name for group in groups for name in group):
        raise InvalidProfile(f"empty module name in {text!r}", field="blocks")
    return groups


def parse_granularity(text: str | int | None) -> Granularity:
    """Parse a ``--granularity`` value: ``blocks`` (the default), ``modules``, ``ops``, or a
    depth ``depth=K`` (or ``K``).

    Examples
    --------
    >>> parse_granularity(None), parse_granularity("ops"), parse_granularity("depth=3")
    ('blocks', 'ops', 3)
    >>> parse_granularity("fine")
    Traceback (most recent call last):
    inferplan.errors.InvalidProfile: granularity: must be blocks, modules, ops or depth=K ...
    """
    if text is None or isinstance(text, int):
        value: str | int = "blocks" if text is None else text
    else:
        value = text.strip().removeprefix("depth=").strip() or "blocks"
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int):
        if value < 1:
            raise InvalidProfile(f"depth must be at least 1, got {value}", field="granularity")
        return value
    if value not in GRANULARITIES:
        raise InvalidProfile(
            f"must be blocks, modules, ops or depth=K (K >= 1), got {text!r}", field="granularity"
        )
    return value  # type: ignore[return-value]


def module_path(names: Sequence[str]) -> list[str]:
    """The modules enclosing an operation, outermost first, from the qualified names a tracer
    recorded (``''`` for the root is dropped).

    Containers that are never called (a ``ModuleList``) are not recorded; they are added from
    the names, so that depths count name levels.

    Examples
    --------
    >>> module_path(["", "layers.0", "layers.0.attn"])
    ['layers', 'layers.0', 'layers.0.attn']
    """
    path: dict[str, None] = {}
    for qualified in names:
        parts = qualified.split(".") if qualified else []
        path.update(dict.fromkeys(".".join(parts[: k + 1]) for k in range(len(parts))))
    return list(path)


def owner_of(path: Sequence[str], spec: BlockSpec) -> str | None:
    """The candidate block of an operation inside the modules ``path`` (outermost first)."""
    if not path:
        return None
    if spec is None or isinstance(spec, int):
        return path[min(spec or 1, len(path)) - 1]
    for name in reversed(path):  # the innermost listed module wins
        for group in spec:
            if name in group:
                return "+".join(group)
    return None


def free_containers(ops: Sequence[Operation], spec: BlockSpec) -> list[Operation]:
    """At a depth (or the default top level), an operation of a module whose submodules are
    blocks themselves is free rather than a block around them: it runs where its inputs are
    made (a model's own ``forward`` code between its layers would otherwise make one block
    that comes both before and after them).

    Examples
    --------
    >>> ops = [Operation("pos", "m", (), ("p",), 0.0),
    ...        Operation("l0", "m.h.0", ("p",), ("a",), 1.0)]
    >>> [op.owner for op in free_containers(ops, 3)]
    [None, 'm.h.0']
    """
    if spec is not None and not isinstance(spec, int):
        return list(ops)
    names = {op.owner for op in ops if op.owner is not None}
    containers = {b for b in names if any(o.startswith(b + ".") for o in names)}
    return [replace(op, owner=None) if op.owner in containers else op for op in ops]


def check_block_names(spec: BlockSpec, known: set[str], *, per_group: bool = False) -> None:
    """Raise if a module named in ``spec`` owns no operation of the traced graph.

    With ``per_group`` only a group none of whose modules owns an operation is an error.
    """
    if spec is None or isinstance(spec, int):
        return
    if per_group:
        missing = ["+".join(g) for g in spec if not any(name in known for name in g)]
    else:
        missing = [name for group in spec for name in group if name not in known]
    if missing:
        raise InvalidProfile(
            f"no operation belongs to module(s) {', '.join(map(repr, missing))}", field="blocks"
        )


def _label(labels: Sequence[str]) -> str:
    return "+".join(labels) if len(labels) <= 3 else f"{labels[0]}..{labels[-1]}"


def build_profile(
    name: str,
    ops: Sequence[Operation],
    values: Mapping[str, TensorInfo],
    inputs: Sequence[str],
    outputs: Sequence[str],
    warnings: Sequence[str] = (),
    *,
    state: frozenset[str] = frozenset(),
    bytes_per_param: float = 4.0,
    granularity: Granularity = "blocks",
) -> GraphProfile:
    """Group ``ops`` (in execution order) into the valid-cut blocks of a :class:`Profile`, and
    into the layers of its layer graph at ``granularity`` (see :data:`Granularity`).

    ``state`` names inputs that live with the block first using them (a layer's KV cache): they
    cross only the cuts between that block and a later one that uses them too, and their bytes
    are the block's :attr:`~inferplan.profiles.profile.Profile.state_bytes`.
    ``bytes_per_param`` is the model's bytes per parameter (from its dtype).
    """
    order: list[str] = []
    for op in ops:
        if op.owner is not None and op.owner not in order:
            order.append(op.owner)
    if not order:
        raise InvalidProfile("no operation belongs to any block", field="blocks")
    index = {label: k + 1 for k, label in enumerate(order)}
    m = len(order)

    constant = {v for v, info in values.items() if info.constant}
    for op in ops:
        if all(v in constant for v in op.inputs):
            constant.update(op.outputs)
    # What free operations make from state alone (a cache rebuilt from its tensors) is state.
    resident = set(state)
    for op in ops:
        if (op.owner is None and any(v in resident for v in op.inputs)
                and all(v in resident or v in constant for v in op.inputs)):  # fmt: skip
            resident.update(op.outputs)
    fixed = constant | resident

    # Free operations run as early as their inputs allow; constant and state ones where first
    # needed.
    made: dict[str, int] = dict.fromkeys(inputs, 0)
    block: list[int] = [0] * len(ops)
    for k, op in enumerate(ops):
        if op.owner is not None:
            block[k] = index[op.owner]
        else:
            block[k] = max([1, *(made.get(v, 0) for v in op.inputs if v not in fixed)])
        for v in op.outputs:
            made[v] = block[k]
    users: dict[str, list[int]] = {}
    for k in reversed(range(len(ops))):
        op = ops[k]
        if op.owner is None and all(v in fixed for v in op.outputs):
            needed = [b for v in op.outputs for b in users.get(v, [])]
            block[k] = min(needed, default=block[k])
            made.update(dict.fromkeys(op.outputs, block[k]))
        for v in op.inputs:
            users.setdefault(v, []).append(block[k])
    for v in outputs:
        users.setdefault(v, []).append(m + 1)
    for v in state:
        made[v] = min(users.get(v, [0]))

    crossing: list[list[str]] = [[] for _ in range(m + 1)]
    backward: list[str | None] = [None] * (m + 1)
    for v, used in users.items():
        if v in constant or v not in made:
            continue
        p = made[v]
        for c in used:
            for k in range(c, p):  # a block after cut k feeds one before it
                backward[k] = backward[k] or (
                    f"{v!r} from {order[p - 1]!r} is needed by {order[c - 1]!r}"
                )
        for k in range(p, max(used)):
            crossing[k].append(v)

    cuts: list[Cut] = []
    for k in range(m + 1):
        tensors = tuple(values[v] for v in crossing[k])
        sizes = [t.bits for t in tensors]
        bits = None if any(b is None for b in sizes) else math.fsum(b for b in sizes if b)
        reason = backward[k]
        if reason is None and bits is None:
            unknown = [t.name for t in tensors if t.bits is None]
            reason = f"unknown size of {', '.join(map(repr, unknown))}"
        elif reason is None and not bits:
            reason = "no tensor crosses it"
        after = "input" if k == 0 else order[k - 1]
        cuts.append(Cut(k, after, tensors, bits, reason is None, False, reason))
    for k in (0, m):
        if not cuts[k].valid:
            what = "input" if k == 0 else "output"
            raise InvalidProfile(f"the model's {what} cannot be sized: {cuts[k].reason}")

    flops = [0.0] * (m + 1)
    params = [0] * (m + 1)
    kept_state = [0.0] * (m + 1)  # bytes of the state each block keeps
    for k, op in enumerate(ops):
        flops[block[k]] += op.flops
        params[block[k]] += op.params
    for v in state:
        bits = values[v].bits if v in values else None
        if bits and 1 <= made[v] <= m:
            kept_state[made[v]] += bits / 8
    kept = _keep(cuts, flops)
    if len(kept) < 2:
        raise InvalidProfile("the model does no counted work (no FLOPs in any block)")

    spans = list(pairwise(kept))
    chain = dict(
        name=name,
        flops=tuple(math.fsum(flops[a + 1 : b + 1]) for a, b in spans),
        activation_bits=tuple(float(cuts[k].bits or 0.0) for k in kept),
        blocks=tuple(_label(order[a:b]) for a, b in spans),
        params=tuple(sum(params[a + 1 : b + 1]) for a, b in spans),
        bytes_per_param=bytes_per_param,
        state_bytes=tuple(math.fsum(kept_state[a + 1 : b + 1]) for a, b in spans),
    )
    group, home, labels = _groups(ops, granularity, [order[b - 1] for b in block])
    graph, why, layer_of = _layer_graph(ops, group, home, values, fixed, inputs, outputs, labels)
    try:
        profile = Profile(**chain, graph=graph)  # type: ignore[arg-type]
    except InvalidProfile as exc:  # the graph and the blocks disagree: keep the blocks
        profile, why, layer_of = Profile(**chain), exc.message, {}  # type: ignore[arg-type]
    if why is not None:
        warnings = [*warnings, f"no layer graph: {why}"]
    marked = tuple(
        Cut(c.index, c.after, c.tensors, c.bits, c.valid, c.index in kept, c.reason) for c in cuts
    )
    placement = {op.name: block[k] for k, op in enumerate(ops)}
    return GraphProfile(profile, marked, tuple(warnings), placement, frozenset(constant),
                        layer_of, values)  # fmt: skip


def _groups(
    ops: Sequence[Operation], granularity: Granularity, blocks: Sequence[str]
) -> tuple[list[str | None], list[str | None], list[str] | None]:
    """What each operation's layer is made of at ``granularity``: its group (``None``: free,
    it joins the branches it reads or goes with what it reads), at the blocks' granularity the
    block a free operation goes to (``blocks``: each operation's block), and for single
    operations the name of their layer: their innermost module's (the same whichever tracer
    named the operation), or their own outside every module."""
    if granularity == "blocks":
        return [op.owner for op in ops], list(blocks), None
    if granularity == "ops":
        labels = [op.path[-1] if op.path else op.name for op in ops]
        return [op.name for op in ops], [None] * len(ops), labels
    else:
        depth = None if granularity == "modules" else granularity
        grouped = [replace(op, owner=None if not op.path else
                           op.path[-1] if depth is None else op.path[min(depth, len(op.path)) - 1])
                   for op in ops]  # fmt: skip
        grouped = free_containers(grouped, 1)  # a module's own code around its submodules
    return [op.owner for op in grouped], [None] * len(ops), None


def _layer_graph(
    ops: Sequence[Operation],
    group: Sequence[str | None],
    home: Sequence[str | None],
    values: Mapping[str, TensorInfo],
    fixed: set[str],
    inputs: Sequence[str],
    outputs: Sequence[str],
    labels: Sequence[str] | None = None,
) -> tuple[LayerGraph | None, str | None, dict[str, int]]:
    """The model as a layer graph and the layer of each operation, or ``None`` and why not.
    A layer is one run of consecutive operations of one group (:func:`_groups`; a group
    whose module is called again, a shared ReLU, gives one layer per call: ``name``,
    ``name#2``, ...), so the layers, in execution order, form a DAG. Layer ``x`` reads layer
    ``u`` when an operation of ``x`` uses a tensor one of ``u`` made; a layer's output is
    every tensor it makes that another layer, or the model's output, uses. Operations that
    make only weights, constants or state join their group's first layer (or the first
    layer reading what they make) and read nothing.
    A free operation (of no group) that joins the outputs of several layers (a
    concatenation, a residual addition) is a layer of its own, named after it, with the free
    operations after it that read it alone: so the branches it joins stay apart; another
    free operation goes to its ``home`` group, else with the layer it reads (or, reading
    none, is a layer named after it). A layer is named after its group, or, with
    ``labels``, after the label of its first operation."""
    run_of: list[int] = []
    runs: list[str] = []  # the group of each layer
    joins: dict[int, str] = {}  # the layers that are free joins, by the first one's name
    made_by: dict[str, int] = {}
    for k, op in enumerate(ops):
        if all(v in fixed for v in op.outputs):
            run_of.append(-1)
            continue
        sources = {made_by[v] for v in op.inputs if v in made_by}
        in_join = bool(runs) and len(runs) - 1 in joins and sources == {len(runs) - 1}
        mine = group[k]
        if mine is None and (len(sources) > 1 or in_join):
            if not in_join:
                joins[len(runs)] = op.name
                runs.append(op.name)
        else:
            if mine is None:
                mine = home[k] or (runs[max(sources)] if sources else op.name)
            if not runs or runs[-1] != mine or len(runs) - 1 in joins:
                runs.append(mine)
        run_of.append(len(runs) - 1)
        made_by.update(dict.fromkeys(op.outputs, len(runs) - 1))
    first = {b: runs.index(b) for b in set(runs)}
    n = len(runs)
    flops, params = [0.0] * n, [0] * n
    made: dict[str, int] = dict.fromkeys(inputs, -1)
    # an operation that makes only constants runs in its group's first layer, else (a group
    # without a layer of its own) in the first layer that reads what it makes
    layer = list(run_of)
    first_read: dict[str, int] = {}
    for k in reversed(range(len(ops))):
        if layer[k] < 0:
            readers = [first_read[v] for v in ops[k].outputs if v in first_read]
            layer[k] = first.get(group[k] or home[k] or "", min(readers, default=-1))
        for v in ops[k].inputs:
            if layer[k] >= 0:
                first_read[v] = min(first_read.get(v, layer[k]), layer[k])
    for k, op in enumerate(ops):
        x = layer[k]
        if x < 0:
            return None, f"{op.name!r} makes only constants for a block that computes nothing", {}
        flops[x] += op.flops
        params[x] += op.params
        if run_of[k] >= 0:
            made.update(dict.fromkeys(op.outputs, x))
    out_bits = [0.0] * (n + 1)  # the input first
    sent: set[str] = set()
    reads: dict[tuple[int, int], None] = {}

    def send(v: str, to: int | None) -> str | None:
        p = made[v]
        if to == p:
            return None
        bits = values[v].bits
        if bits is None:
            return f"the size of {v!r} is unknown"
        if v not in sent:
            sent.add(v)
            out_bits[p + 1] += bits
        if to is not None:
            reads[(p, to)] = None
        return None

    for k, op in enumerate(ops):
        for v in op.inputs:
            if v in made and v not in fixed and run_of[k] >= 0:
                why = send(v, run_of[k])
                if why:
                    return None, why, {}
    returned: set[int] = set()
    for v in outputs:
        if v in made and v not in fixed:
            why = send(v, None)
            if why:
                return None, why, {}
            returned.add(made[v])
    names: list[str] = []
    calls: dict[str, int] = {}
    for x, b in enumerate(runs):
        if x in joins:
            names.append(joins[x])
            continue
        if labels is not None:
            b = labels[run_of.index(x)]
        calls[b] = calls.get(b, 0) + 1
        names.append(b + (f"#{calls[b]}" if calls[b] > 1 else ""))
    label = ["input", *names]
    read = {p for p, _ in reads if p >= 0}  # returned layers that others read: outputs too
    try:
        graph = LayerGraph(
            layers=tuple(names),
            flops=tuple(flops),
            output_bits=tuple(out_bits[1:]),
            edges=tuple((label[p + 1], names[c]) for p, c in reads)
            + tuple((names[p], OUTPUT) for p in sorted(returned & read)),
            input_bits=out_bits[0],
            params=tuple(params),
        )
    except InvalidProfile as exc:
        return None, exc.message, {}
    layer_of = {op.name: layer[k] for k, op in enumerate(ops)}
    return graph, None, layer_of


def _keep(cuts: Sequence[Cut], flops: Sequence[float]) -> list[int]:
    """The kept cuts: valid ones, one per stretch joined by blocks without counted work."""
    valid = [c.index for c in cuts if c.valid]
    m = len(cuts) - 1
    kept: list[int] = []
    run = [valid[0]]
    for prev, k in pairwise(valid):
        if math.fsum(flops[prev + 1 : k + 1]) > 0:
            kept.append(_choose(run, cuts, m))
            run = []
        run.append(k)
    if 0 in run and m in run:
        return [0]
    kept.append(_choose(run, cuts, m))
    return kept


def _choose(run: Sequence[int], cuts: Sequence[Cut], m: int) -> int:
    if 0 in run or m in run:
        return 0 if 0 in run else m
    return min(reversed(run), key=lambda k: cuts[k].bits or 0.0)
