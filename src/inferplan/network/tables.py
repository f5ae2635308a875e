"""Networks as tables: nodes and links one row each, in Parquet or CSV files (via pyarrow).

A network file may name two tables instead of listing its elements (see
:func:`~inferplan.network.io.load_network`)::

    source: s
    target: t
    nodes: net.nodes.parquet    # columns: id, capacity, price, and cost columns
    links: net.links.parquet    # columns: source, target, capacity, price, delay_s (may be
                                # left out, or a cell empty: no delay), and cost columns

A node table may give memory: ``memory`` (bytes) and ``memory_price`` (per byte), each left out
or its cell empty where not given (memory unlimited, not for sale), and a memory cost function
in the cost columns prefixed ``memory_`` (``memory_cost_kind``, ...), and ``memory_bandwidth``
(bytes/s, for LLM serving's time model), left out or its cell empty where not given
(unlimited).

A cost function is flat columns: ``cost_kind`` (``linear``, ``modules``, ``tiers`` or empty),
``cost_size``, ``cost_price`` (linear and modules), ``cost_max``, and for tiers the lists
``cost_upto`` and ``cost_tier_price`` (list columns in Parquet; in CSV numbers separated by
``;``). A table with no cost functions, no empty cells and columns of the right types is read
column-wise, without a Python object per row; any other is turned into the listed form and
validated element by element, so that every problem is reported as it is for a listed network.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from inferplan.documents import open_regular
from inferplan.errors import InvalidFile, InvalidNetwork
from inferplan.network.cost_columns import CODES, TIERS, RawCosts
from inferplan.network.costs import CapacityCost
from inferplan.network.network import Labels, Network

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "COST_COLUMNS",
    "LINK_COLUMNS",
    "LIST_SEPARATOR",
    "MEMORY_BANDWIDTH",
    "MEMORY_COLUMNS",
    "NODE_COLUMNS",
    "OPTIONAL_COLUMNS",
    "memory_bandwidths",
    "memory_fields",
    "plain_columns",
    "read_table",
    "table_elements",
    "write_tables",
]

NODE_COLUMNS = ("id", "capacity", "price")
"""The columns of a table of nodes (besides :data:`COST_COLUMNS`)."""
LINK_COLUMNS = ("source", "target", "capacity", "price", "delay_s")
"""The columns of a table of links (besides :data:`COST_COLUMNS`)."""
OPTIONAL_COLUMNS = ("delay_s",)
"""Columns a table may leave out, and cells it may leave empty: 0 then (no delay)."""
COST_COLUMNS = ("cost_kind", "cost_size", "cost_price", "cost_max", "cost_upto",
                "cost_tier_price")  # fmt: skip
"""The optional columns of a cost function (its ``kind``, ``size``, ``price``, ``max``, and a
tiered cost's ``upto`` and ``price`` lists)."""
MEMORY = "memory_"
"""The prefix of the memory cost columns of a node table (``memory_cost_kind``, ...)."""
MEMORY_COLUMNS = ("memory", "memory_price", *(MEMORY + name for name in COST_COLUMNS))
"""The optional memory columns of a table of nodes: empty cells are not given."""
MEMORY_BANDWIDTH = "memory_bandwidth"
"""The optional column of a table of nodes giving each node's memory bandwidth (bytes/s): an
empty cell is not given (unlimited)."""
LIST_SEPARATOR = ";"
"""What separates the numbers of a list in a CSV cell (``1e9;2e9``)."""

_TEXT = ("id", "source", "target", "cost_kind", MEMORY + "cost_kind")
_ENDPOINTS = ("source", "target")
_LISTS = ("cost_upto", "cost_tier_price", MEMORY + "cost_upto", MEMORY + "cost_tier_price")


def _pyarrow_needed(path: Path) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InvalidFile(
            "reading or writing tables needs pyarrow: pip install 'inferplan[tables]'",
            source=str(path),
        ) from None


def read_table(path: Path, columns: tuple[str, ...]) -> pa.Table:
    """Read a Parquet or CSV table (by suffix) and check its column names against
    ``columns`` (an element's own) and :data:`COST_COLUMNS`.

    Raises
    ------
    InvalidFile
        If the file is missing, not a regular file, unreadable or of another kind.
    InvalidNetwork
        Naming an unknown, missing or repeated column.
    """
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise InvalidFile("a table must be a .parquet or .csv file", source=str(path))
    _pyarrow_needed(path)
    import pyarrow as pa

    try:
        with open_regular(path) as handle:
            if suffix == ".parquet":
                import pyarrow.parquet as pq

                # ParquetFile, not read_table: the latter imports pyarrow.dataset and pandas,
                # 0.4 s of a one-off command's start (the read itself takes 0.05 s at 500k links)
                with pq.ParquetFile(handle) as parquet:
                    present = parquet.schema_arrow.names
                handle.seek(0)
                # the endpoints as codes into their distinct ids, as Parquet keeps them
                coded = [name for name in _ENDPOINTS if name in columns and name in present]
                with pq.ParquetFile(handle, read_dictionary=coded) as parquet:
                    table = parquet.read()
            else:
                import pyarrow.csv as pa_csv

                text = {name: pa.string() for name in (*_TEXT, *_LISTS)}
                # only an empty cell is missing: "nan" is a number (refused as one)
                table = pa_csv.read_csv(handle, convert_options=pa_csv.ConvertOptions(
                    column_types=text, null_values=[""], strings_can_be_null=True))  # fmt: skip
    except (OSError, pa.ArrowException) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidFile(f"cannot read table ({problem})", source=str(path)) from None
    repeated = sorted({name for name in table.column_names if table.column_names.count(name) > 1})
    if repeated:
        raise InvalidNetwork(f"column {repeated[0]!r} appears more than once", source=str(path))
    known = (*columns, *COST_COLUMNS,
             *((*MEMORY_COLUMNS, MEMORY_BANDWIDTH) if "id" in columns else ()))  # fmt: skip
    for name in table.column_names:
        if name not in known:
            raise InvalidNetwork(
                f"unknown column {name!r} (known: {', '.join(known)})", source=str(path)
            )
    for name in columns:
        if name not in (*OPTIONAL_COLUMNS, "price") and name not in table.column_names:
            raise InvalidNetwork(f"missing column {name!r}", source=str(path))
    if "price" not in table.column_names and "cost_kind" not in table.column_names:
        raise InvalidNetwork("missing column 'price' (give 'price' or 'cost_kind')",
                             source=str(path))  # fmt: skip
    return table


def _numpy(array: pa.Array) -> Any:
    """A numeric Arrow array without nulls as a read-only numpy view of its values.

    Not ``Array.to_numpy``: that imports pandas, 0.3 s of a one-off command's start."""
    if not len(array):
        return np.empty(0, dtype=np.dtype(str(array.type)))
    values = np.frombuffer(
        array.buffers()[1], dtype=np.dtype(str(array.type)), count=array.offset + len(array)
    )
    return values[array.offset :]


def plain_columns(table: pa.Table, columns: tuple[str, ...], *, csv: bool) -> dict[str, Any] | None:
    """The ``columns`` of ``table`` as a list of text or a float array each, when it has no
    empty cells (but an empty ``price`` where a cost function is given, and empty cells of
    :data:`OPTIONAL_COLUMNS`, read as 0), text in its text
    columns and numbers in the others, and cost columns of the right types; ``None``
    otherwise. The cost functions are read, not checked, into ``"cost"``
    (:class:`~inferplan.network.cost_columns.RawCosts`), and which elements give a price into
    ``"priced"``, when any element has one (as :func:`table_elements` would read them)."""
    import pyarrow as pa

    names = table.column_names
    out: dict[str, Any] = {}
    costed = None
    if any(table[name].null_count < len(table) for name in COST_COLUMNS if name in names):
        raw = _raw_costs(table, csv)
        if raw is None:
            return None
        out["cost"], costed = raw
    if "price" not in names:
        if costed is None or not costed.all():
            return None
        table = table.append_column("price", pa.nulls(len(table), pa.float64()))
    for name in columns:
        if name in OPTIONAL_COLUMNS and name not in names:
            continue
        column = table[name]
        kind = column.type
        if not column.null_count:  # the common columns as they are, without pyarrow.compute
            found = _as_read(name, column, priced=costed is None)
            if found is not None:
                out[name] = found
                continue
        import pyarrow.compute as pc  # 0.03-0.05 s to import

        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)
        if name in OPTIONAL_COLUMNS and column.null_count and numeric:
            column = pc.fill_null(pc.cast(column, pa.float64(), safe=False), 0.0)
            kind = column.type
        if column.null_count and not (name == "price" and costed is not None):
            return None
        if name in _TEXT:
            if pa.types.is_dictionary(kind):
                column, kind = column.cast(kind.value_type), kind.value_type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                return None
            if name == "id":
                out[name] = column.to_pylist()
                continue
            coded = pc.dictionary_encode(column).combine_chunks()
            out[name] = Labels(_numpy(coded.indices).astype(np.int64),
                               coded.dictionary.to_pylist())  # fmt: skip
        elif numeric:
            values = pc.cast(column, pa.float64(), safe=False).combine_chunks()
            if name == "price" and costed is not None:
                priced = _bools(pc.is_valid(values))
                if not (priced | costed).all():
                    return None  # neither price nor cost: as the listed form says it
                out["priced"] = priced
                values = pc.fill_null(values, 0.0)
            out[name] = _numpy(values)
        else:
            return None
    return out


def _as_read(name: str, column: pa.ChunkedArray, *, priced: bool) -> Any:
    """Column ``name`` of :func:`plain_columns` (``column``, without empty cells) when it
    needs no conversion (not a price beside cost functions, when not ``priced``): text ids,
    endpoints coded by their dictionary, floats; ``None`` for any other."""
    import pyarrow as pa

    kind = column.type
    if name == "id" and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return column.to_pylist()
    if name in _ENDPOINTS and pa.types.is_dictionary(kind):
        return _labels(column)
    if pa.types.is_float64(kind) and name not in _TEXT and (priced or name != "price"):
        return _numpy(column.combine_chunks())
    return None


def _labels(column: pa.ChunkedArray) -> Labels | None:
    """A dictionary-encoded column of text without empty cells as :class:`Labels` (each
    chunk's codes shifted past the chunks before: a value may appear in several
    dictionaries), or ``None`` when its values are not text or include an empty one."""
    import pyarrow as pa

    values: list[str] = []
    codes = []
    for chunk in column.chunks:
        words = chunk.dictionary
        if words.null_count or not (
            pa.types.is_string(words.type) or pa.types.is_large_string(words.type)
        ):
            return None
        codes.append(_numpy(chunk.indices).astype(np.int64) + len(values))
        values += words.to_pylist()
    return Labels(np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64), values)


def _bools(array: pa.Array) -> Any:
    """A boolean Arrow array (no nulls) as numpy."""
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _floats(column: pa.ChunkedArray | None, rows: Any) -> tuple[Any, Any] | None:
    """The numbers of ``column`` at ``rows`` (NaN where empty) and where it is not empty;
    ``None`` if it is not a column of numbers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column is None:
        return np.full(rows.size, np.nan), np.zeros(rows.size, dtype=bool)
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
        return None
    values = pc.cast(column.take(pa.array(rows)), pa.float64(), safe=False).combine_chunks()
    given = _bools(pc.is_valid(values))
    return _numpy(pc.fill_null(values, np.nan)), given


def _lists(column: pa.ChunkedArray | None, rows: Any, csv: bool) -> tuple[Any, Any] | None:
    """The lists of ``column`` at ``rows``: each one's length (-1 where empty) and their
    entries, flat (NaN for an empty entry); ``None`` if it is not a column of lists of numbers
    (in CSV: of numbers separated by :data:`LIST_SEPARATOR`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column is None or pa.types.is_null(column.type):
        return np.full(rows.size, -1, dtype=np.int64), np.zeros(0)
    taken = column.take(pa.array(rows)).combine_chunks()
    if csv:
        if not pa.types.is_string(taken.type):
            return None
        taken = pc.split_pattern(taken, LIST_SEPARATOR)
    kind = taken.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return None
    entry = kind.value_type
    if not (csv or pa.types.is_integer(entry) or pa.types.is_floating(entry)
            or pa.types.is_null(entry)):  # fmt: skip
        return None  # booleans, say: refused as the listed form refuses them
    try:
        taken = taken.cast(pa.list_(pa.float64()), safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    lengths = pc.fill_null(pc.list_value_length(taken), -1)
    flat = pc.fill_null(pc.list_flatten(taken), np.nan)
    return _numpy(lengths.cast(pa.int64())), _numpy(flat)


def _raw_costs(table: pa.Table, csv: bool, prefix: str = "") -> tuple[RawCosts, Any] | None:
    """The cost functions of the rows of ``table`` that give a ``cost_kind``, as
    :func:`table_elements` reads them (a tiered cost's ``price`` from ``cost_tier_price``,
    any other's from ``cost_price``), and which rows give one; ``None`` if a cost column is
    not of its type. ``prefix`` names the columns of another cost (``memory_``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = table.column_names
    kinds = table[prefix + "cost_kind"] if prefix + "cost_kind" in names else None
    if kinds is None or pa.types.is_null(kinds.type):
        return None  # cost columns without a kind: each element says what is wrong
    if pa.types.is_dictionary(kinds.type):
        kinds = kinds.cast(kinds.type.value_type)
    if not (pa.types.is_string(kinds.type) or pa.types.is_large_string(kinds.type)):
        return None
    costed = _bools(pc.is_valid(kinds).combine_chunks())
    rows = np.flatnonzero(costed)
    coded = pc.dictionary_encode(kinds.take(pa.array(rows))).combine_chunks()
    codes = np.array([CODES.get(name, 0) for name in coded.dictionary.to_pylist()] + [0],
                     dtype=np.int8)  # fmt: skip
    kind = codes[_numpy(coded.indices).astype(np.int64)] if rows.size else codes[:0]

    def column(name: str) -> pa.ChunkedArray | None:
        return table[prefix + name] if prefix + name in names else None

    read = {name: _floats(column(f"cost_{name}"), rows) for name in ("size", "price", "max")}
    upto = _lists(column("cost_upto"), rows, csv)
    tier = _lists(column("cost_tier_price"), rows, csv)
    if upto is None or tier is None or any(v is None for v in read.values()):
        return None
    (size, has_size), (price, has_price), (cap, has_max) = (
        read["size"], read["price"], read["max"])  # type: ignore[misc]  # fmt: skip
    tiers = kind == TIERS
    tier_len = np.where(tiers, tier[0], -1)
    keep = np.repeat(tiers, np.maximum(tier[0], 0))  # the tier prices of tiered rows only
    has_price = np.where(tiers, tier[0] >= 0, has_price)
    upto_len = upto[0]
    fields = 1 + has_size + has_price + has_max + (upto_len >= 0)
    raw = RawCosts(rows=rows.astype(np.int64), kind=kind, fields=fields.astype(np.int64),
                   size=size, has_size=has_size, price=np.where(tiers, np.nan, price),
                   has_price=has_price, max=cap, has_max=has_max, price_len=tier_len,
                   price_list=tier[1][keep], upto_len=upto_len, upto=upto[1])  # fmt: skip
    return raw, costed


def _number(value: Any) -> Any:
    """A CSV cell's number (a float: CSV does not tell ``2`` from ``2.0``), or the cell as
    it is when it is not one (so that it is refused as the listed form refuses it)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else value
    except ValueError:
        return value


def memory_fields(table: pa.Table, csv: bool) -> dict[str, Any] | None:
    """The memory columns of a table of nodes as :func:`~inferplan.network.io` reads the
    listed form's: a ``memory`` and a ``memory_price`` per node (``None`` where empty) and
    the memory cost functions (:class:`~inferplan.network.cost_columns.RawCosts`); ``{}``
    when the table has no memory column, ``None`` when one is not of its type."""
    import pyarrow as pa

    names = table.column_names
    if not any(name in names for name in MEMORY_COLUMNS):
        return {}
    out: dict[str, Any] = {}
    for name in ("memory", "memory_price"):
        column = table[name] if name in names else pa.nulls(len(table), pa.float64())
        kind = column.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
            return None
        out[name] = [None if v is None else float(v) for v in column.to_pylist()]
    if MEMORY + "cost_kind" in names and table[MEMORY + "cost_kind"].null_count < len(table):
        raw = _raw_costs(table, csv, MEMORY)
        if raw is None:
            return None
        out["costs"] = raw[0]
    else:
        out["costs"] = RawCosts.from_objects(np.zeros(0, dtype=np.int64), [])
    return out


def memory_bandwidths(table: pa.Table) -> Any | None:
    """The ``memory_bandwidth`` column of a table of nodes as floats (``inf`` where empty or
    left out, as the listed form reads a node without one), not checked; ``None`` when it is
    not a column of numbers (then the nodes are validated one by one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if MEMORY_BANDWIDTH not in table.column_names:
        return np.full(len(table), np.inf)
    column = table[MEMORY_BANDWIDTH]
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
        return None
    values = pc.cast(column, pa.float64(), safe=False).combine_chunks()
    return _numpy(pc.fill_null(values, np.inf))


def table_elements(table: pa.Table, columns: tuple[str, ...], *, csv: bool) -> list[dict[str, Any]]:
    """The rows of ``table`` as the elements of a listed network (an empty cell is a missing
    field; a cost function from the cost columns when ``cost_kind`` is given)."""
    elements = []
    for row in table.to_pylist():
        if csv:
            row = {
                name: (
                    [_number(x) for x in value.split(LIST_SEPARATOR)]
                    if name in _LISTS and isinstance(value, str)
                    else value
                    if name in _TEXT
                    else _number(value)
                )
                for name, value in row.items()
            }
        element = {name: row[name] for name in (*columns, "memory", "memory_price",
                                                MEMORY_BANDWIDTH)
                   if row.get(name) is not None}  # fmt: skip
        for prefix, field in (("", "cost"), (MEMORY, "memory_cost")):
            if row.get(prefix + "cost_kind") is not None:
                tiers = row[prefix + "cost_kind"] == "tiers"
                cost = {
                    "kind": row[prefix + "cost_kind"],
                    "size": row.get(prefix + "cost_size"),
                    "price": row.get(prefix + ("cost_tier_price" if tiers else "cost_price")),
                    "max": row.get(prefix + "cost_max"),
                    "upto": row.get(prefix + "cost_upto"),
                }
                element[field] = {key: value for key, value in cost.items() if value is not None}
        elements.append(element)
    return elements


def _cost_columns(
    costs: dict[int, CapacityCost], size: int, csv: bool, prefix: str = ""
) -> dict[str, list[Any]]:
    """The cost columns of the elements with ``costs`` (none when no element has one), their
    names prefixed with ``prefix``."""
    if not costs:
        return {}
    out: dict[str, list[Any]] = {prefix + name: [None] * size for name in COST_COLUMNS}
    for k, cost in costs.items():
        form = cost.to_dict()
        tiers = form["kind"] == "tiers"
        for key, value in form.items():
            name = prefix + ("cost_tier_price" if tiers and key == "price" else f"cost_{key}")
            if isinstance(value, list) and csv:
                value = LIST_SEPARATOR.join(repr(float(x)) for x in value)
            out[name][k] = value
    return out


def write_tables(network: Network, path: Path, form: Literal["parquet", "csv"]) -> tuple[str, str]:
    """Write the nodes and links of ``network`` to ``<stem>.nodes.<form>`` and
    ``<stem>.links.<form>`` beside ``path``; return their names."""
    _pyarrow_needed(path)
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    ids = pa.array(network.node_ids, pa.string())
    csv = form == "csv"
    tables = {
        "nodes": {
            "id": ids,
            "capacity": network.node_capacity,
            "price": network.node_price,
            **_cost_columns(dict(network.node_costs), len(network.node_ids), csv),
            **_memory_columns(network, csv),
        },
        "links": {
            "source": ids.take(pa.array(network.link_tail)),
            "target": ids.take(pa.array(network.link_head)),
            "capacity": network.link_capacity,
            "price": network.link_price,
            **({"delay_s": network.link_delay} if network.link_delay.any() else {}),
            **_cost_columns(dict(network.link_costs), network.link_tail.size, csv),
        },
    }
    names = []
    for kind, columns in tables.items():
        target = path.with_name(f"{path.stem}.{kind}.{form}")
        table = pa.table({name: _column(values) for name, values in columns.items()})
        if csv:
            pa_csv.write_csv(table, target)
        else:
            pq.write_table(table, target)
        names.append(target.name)
    return names[0], names[1]


def _memory_columns(network: Network, csv: bool) -> dict[str, Any]:
    """The memory columns of a table of nodes (those the network gives)."""
    out: dict[str, Any] = {}
    memory, price = network.node_memory, network.node_memory_price
    if np.isfinite(memory).any():
        out["memory"] = [float(m) if np.isfinite(m) else None for m in memory.tolist()]
    if not np.isnan(price).all():
        out["memory_price"] = [None if np.isnan(p) else float(p) for p in price.tolist()]
    bandwidth = network.node_memory_bandwidth
    if np.isfinite(bandwidth).any():
        out[MEMORY_BANDWIDTH] = [float(b) if np.isfinite(b) else None for b in bandwidth.tolist()]
    costs = dict(network.node_memory_costs)
    return {**out, **_cost_columns(costs, len(network.node_ids), csv, MEMORY)}


def _column(values: Any) -> Any:
    import pyarrow as pa

    if isinstance(values, list) and any(isinstance(v, list) for v in values):
        return pa.array(values, pa.list_(pa.float64()))
    if isinstance(values, list) and all(v is None or isinstance(v, float) for v in values):
        return pa.array(values, pa.float64())
    return values if not isinstance(values, np.ndarray) else pa.array(values)
