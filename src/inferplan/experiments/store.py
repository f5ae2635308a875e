"""The append-only result store of a sweep, and the tables written from it.

Layout of a sweep directory::

    DIR/sweep.json          what was run (study, function, seed, options); checked on resume
    DIR/shards/part-0001.jsonl, part-0002.jsonl, ...
                            one JSON line per finished point, one new shard per run

A line holds a whole point (``{"point", "seed", "params", "rows"}``) and is written with one
``write`` and flushed at once, so a point is either stored whole or not at all. A process killed
mid-write leaves at most a truncated last line, which reading ignores: that point is simply run
again. Shards are never rewritten, so nothing already stored can be lost by a later run.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from inferplan.errors import InvalidArgument, InvalidFile

__all__ = [
    "PointRecord",
    "ResultStore",
    "ShardWriter",
    "write_csv",
    "write_parquet",
]

Row = dict[str, Any]


@dataclass(frozen=True)
class PointRecord:
    """The stored outcome of one point: its id, seed, parameters and result rows."""

    point: str
    seed: int
    params: Mapping[str, Any]
    rows: tuple[Row, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point,
            "seed": self.seed,
            "params": dict(self.params),
            "rows": list(self.rows),
        }

    def flat_rows(self) -> list[Row]:
        """The rows with the point's id, seed and parameters in front."""
        head = {"point": self.point, "seed": self.seed, **self.params}
        return [{**head, **row} for row in self.rows]


def _record(data: Any) -> PointRecord:
    if not (isinstance(data, dict) and {"point", "seed", "params", "rows"} <= data.keys()):
        raise ValueError("not a point record")
    if not (isinstance(data["rows"], list) and all(isinstance(r, dict) for r in data["rows"])):
        raise ValueError("rows must be a list of objects")
    return PointRecord(
        str(data["point"]), int(data["seed"]), dict(data["params"]), tuple(data["rows"])
    )


class ShardWriter:
    """Appends point records to one new shard file, one flushed line per point."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def write(self, record: PointRecord) -> None:
        """Store ``record``; it is on disk (in the OS's hands) when this returns."""
        if self._file is None:
            # Created on the first finished point, so a run that finishes nothing leaves no file.
            self._file = self.path.open("x", encoding="utf-8")
        self._file.write(json.dumps(record.to_dict(), separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ResultStore:
    """The shards of one sweep directory.

    Examples
    --------
    >>> import tempfile
    >>> store = ResultStore(tempfile.mkdtemp())
    >>> with store.writer() as shard:
    ...     shard.write(PointRecord("p1", 7, {"a": 1}, ({"x": 0.5},)))
    >>> store.finished()["p1"].rows
    ({'x': 0.5},)
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.shard_dir = self.directory / "shards"

    def shards(self) -> list[Path]:
        """The shard files, oldest first."""
        return sorted(self.shard_dir.glob("part-*.jsonl"))

    def writer(self) -> ShardWriter:
        """A writer to a new shard, numbered after the existing ones."""
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        numbers = [int(p.stem.split("-")[1]) for p in self.shards() if p.stem[5:].isdigit()]
        return ShardWriter(self.shard_dir / f"part-{max(numbers, default=0) + 1:04d}.jsonl")

    def _read_shard(self, path: Path) -> Iterator[PointRecord]:
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield _record(json.loads(line))
            except (ValueError, TypeError) as exc:
                if number == len(lines):
                    # The last line has no newline: a write cut short by a killed process.
                    return
                raise InvalidFile(
                    f"line {number} is not a point record ({exc})", source=str(path)
                ) from None

    def finished(self) -> dict[str, PointRecord]:
        """Every stored point by id (the first stored wins if a point was stored twice)."""
        out: dict[str, PointRecord] = {}
        for path in self.shards():
            for record in self._read_shard(path):
                out.setdefault(record.point, record)
        return out

    def check_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Write ``sweep.json``, or check that the stored one describes the same sweep.

        Raises
        ------
        InvalidArgument
            If the directory holds results of a different sweep.
        """
        path = self.directory / "sweep.json"
        plain = json.loads(json.dumps(manifest))
        if not path.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(plain, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            return
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidFile(
                f"cannot read the sweep description ({exc})", source=str(path)
            ) from None
        for key in sorted(set(plain) | set(stored)):
            if stored.get(key) != plain.get(key):
                raise InvalidArgument(
                    f"holds results of a different sweep ({key} was {stored.get(key)!r}, now "
                    f"{plain.get(key)!r}); rerun the same sweep to resume, or choose another --out",
                    source=str(path),
                    field=key,
                )


def _columns(rows: Sequence[Row]) -> list[str]:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def write_csv(rows: Sequence[Row], path: str | Path, columns: Sequence[str] | None = None) -> None:
    """Write ``rows`` as CSV (columns in first-seen order unless given; floats exactly)."""
    names = list(columns) if columns is not None else _columns(rows)
    with Path(path).open("w", encoding="utf-8", newline="") as handle:
        out = csv.DictWriter(handle, fieldnames=names, extrasaction="ignore")
        out.writeheader()
        out.writerows(rows)


def write_parquet(rows: Sequence[Row], path: str | Path) -> bool:
    """Write ``rows`` as Parquet if pyarrow is installed; return whether it was written."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    names = _columns(rows)
    table = pa.Table.from_pylist([{k: row.get(k) for k in names} for row in rows])
    pq.write_table(table, str(path))
    return True
