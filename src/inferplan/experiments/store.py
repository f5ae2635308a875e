"""The append-only result store of a sweep, and the tables written from it.

Layout of a sweep directory::

    DIR/sweep.json          what was run (study, function, seed, options); checked on resume
    DIR/sweep.lock          held by the process running the sweep; says which process that is;
                            removed when the sweep ends
    DIR/shards/part-0001.jsonl, part-0002.jsonl, ...
                            one JSON line per finished (or failed) point, one new shard per run
    DIR/failures.csv        the points that failed in the last run, with their errors

A line holds a whole point (``{"point", "seed", "params", "rows"}``, plus ``"error"`` and
``"traceback"`` for a point that raised) and is written with one ``write`` and flushed at once,
so a point is either stored whole or not at all. A process killed mid-write leaves at most a
truncated last line (possibly cut inside a UTF-8 character), which reading ignores: that point
is simply run again. Shards are never rewritten, so nothing already stored can be lost by a
later run. Every other file is written whole or not at all (a temporary file renamed over it).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from inferplan.documents import check_json_nesting, read_bytes
from inferplan.errors import InvalidArgument, InvalidFile

__all__ = [
    "PointRecord",
    "ResultStore",
    "ShardWriter",
    "atomic_path",
    "write_csv",
    "write_parquet",
]

Row = dict[str, Any]


@dataclass(frozen=True)
class PointRecord:
    """The stored outcome of one point: its id, seed, parameters and result rows; or, for a
    point that raised, no rows and the one-line ``error`` (with its ``traceback``)."""

    point: str
    seed: int
    params: Mapping[str, Any]
    rows: tuple[Row, ...]
    error: str | None = None
    traceback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "point": self.point,
            "seed": self.seed,
            "params": dict(self.params),
            "rows": list(self.rows),
        }
        if self.error is not None:
            data |= {"error": self.error, "traceback": self.traceback}
        return data

    def flat_rows(self) -> list[Row]:
        """The rows with the point's id, seed and parameters in front."""
        head = {"point": self.point, "seed": self.seed, **self.params}
        return [{**head, **row} for row in self.rows]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _parse_json(raw: bytes, source: str) -> Any:
    """A shard line (or ``sweep.json``) as JSON data, refusing nesting deeper than
    :data:`~inferplan.documents.MAX_DEPTH` before parsing (no point record needs more than a
    few levels; a deeper line would exhaust the parser's stack)."""
    text = raw.decode("utf-8")
    check_json_nesting(text, source)
    return json.loads(text)


def _record(data: Any) -> PointRecord:
    if not (isinstance(data, dict) and {"point", "seed", "params", "rows"} <= data.keys()):
        raise ValueError("not a point record")
    if not (isinstance(data["rows"], list) and all(isinstance(r, dict) for r in data["rows"])):
        raise ValueError("rows must be a list of objects")
    error, trace = data.get("error"), data.get("traceback")
    if not (isinstance(error, str | None) and isinstance(trace, str | None)):
        raise ValueError("error must be a string")
    seed = data["seed"]
    if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
        raise ValueError(f"seed must be a non-negative integer, got {_shown(seed)}")
    if not isinstance(data["params"], dict):
        raise ValueError("params must be an object")
    return PointRecord(
        str(data["point"]),
        seed,
        dict(data["params"]),
        tuple(data["rows"]),
        error,
        trace,
    )


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block ends
    normally, so that ``path`` holds either its old content or the whole new one.

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> with atomic_path(target) as tmp:
    ...     _ = tmp.write_text("whole")
    >>> target.read_text()
    'whole'
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        with temporary.open("rb") as handle:
            os.fsync(handle.fileno())
        try:
            os.replace(temporary, path)
        except OSError as exc:  # named by the file it was to replace, not by the temporary one
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        temporary.unlink(missing_ok=True)


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def _try_lock(handle: IO[str]) -> bool:
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder() -> str:
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    command = " ".join(sys.argv)[:200]
    return f"pid {os.getpid()} on {socket.gethostname()}, since {started}: {command}"


@contextmanager
def _locked(path: Path) -> Iterator[IO[str]]:
    """``path`` opened and locked, the lock held for the block. A file removed by its holder
    between our opening and locking it is not the lock any more: open the new one again."""
    while True:
        with path.open("a+", encoding="utf-8") as handle:
            if not _try_lock(handle):
                handle.seek(0)
                holder = " ".join(handle.read(400).split()) or "a process that is starting"
                raise InvalidArgument(
                    f"another sweep is running in this directory ({holder}); wait for it to "
                    "end or choose another output directory",
                    source=str(path.parent),
                )
            try:
                current = os.stat(path)
            except FileNotFoundError:
                continue
            mine = os.fstat(handle.fileno())
            if (current.st_dev, current.st_ino) != (mine.st_dev, mine.st_ino):
                continue
            yield handle
            return


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
        lines = read_bytes(path).split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield _record(_parse_json(line, str(path)))
            except (ValueError, TypeError, InvalidFile) as exc:  # UnicodeDecodeError: a ValueError
                if number == len(lines):
                    # The last line has no newline: a write cut short by a killed process.
                    return
                problem = exc.message if isinstance(exc, InvalidFile) else str(exc)
                raise InvalidFile(
                    f"line {number} is not a point record ({problem})", source=str(path)
                ) from None

    def _load(self) -> tuple[dict[str, PointRecord], dict[str, PointRecord]]:
        finished: dict[str, PointRecord] = {}
        failed: dict[str, PointRecord] = {}
        for path in self.shards():
            for record in self._read_shard(path):
                if record.error is None:
                    finished.setdefault(record.point, record)
                else:
                    failed[record.point] = record  # the latest failure
        return finished, {k: v for k, v in failed.items() if k not in finished}

    def finished(self) -> dict[str, PointRecord]:
        """Every point stored as finished, by id (the first stored wins if a point was stored
        twice)."""
        return self._load()[0]

    def failed(self) -> dict[str, PointRecord]:
        """Every point whose last run failed and that has not finished since, by id."""
        return self._load()[1]

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold ``sweep.lock`` for the length of the block (released by the OS if the process
        dies), so that two sweeps never run in one directory at once.

        Raises
        ------
        InvalidArgument
            If another process holds it; the message says which.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / "sweep.lock"
        with _locked(path) as handle:
            handle.seek(0)
            handle.truncate()
            handle.write(_holder() + "\n")
            handle.flush()
            try:
                yield
            finally:
                # removed while still held: a process waiting on this file finds it gone
                # and locks a fresh one (see _locked)
                with contextlib.suppress(OSError):
                    path.unlink()

    def write_failures(self, failed: Sequence[PointRecord]) -> Path | None:
        """Write ``failures.csv`` (point, seed, parameters, error) if any point failed, else
        remove a stale one; return its path if written."""
        path = self.directory / "failures.csv"
        if not failed:
            path.unlink(missing_ok=True)
            return None
        write_csv(
            [{"point": r.point, "seed": r.seed, **r.params, "error": r.error} for r in failed],
            path,
        )
        return path

    def check_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Write ``sweep.json``, or check that the stored one describes the same sweep.

        A ``sweep.json`` that cannot be read in a directory without stored points (a crash
        while an older version wrote it) is written again.

        Raises
        ------
        InvalidArgument
            If the directory holds results of a different sweep.
        """
        path = self.directory / "sweep.json"
        try:
            plain = json.loads(json.dumps(manifest, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(
                f"must be plain JSON with finite numbers ({exc})", field="options"
            ) from None
        stored: Any = None
        if path.exists():
            try:
                stored = _parse_json(read_bytes(path), str(path))
                if not isinstance(stored, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, InvalidFile) as exc:
                stored = None
                problem = exc.message if isinstance(exc, InvalidFile) else exc
                if self.shards():
                    raise InvalidFile(
                        f"cannot read the sweep description ({problem}); it describes the stored "
                        "points: restore it, or choose another output directory",
                        source=str(path),
                    ) from None
        if stored is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_text(path, json.dumps(plain, indent=2, sort_keys=True) + "\n")
            return
        for key in sorted(set(plain) | set(stored)):
            if stored.get(key) != plain.get(key):
                raise InvalidArgument(
                    f"holds results of a different sweep ({key} was {stored.get(key)!r}, now "
                    f"{plain.get(key)!r}); rerun the same sweep to resume, or choose another "
                    "output directory",
                    source=str(path),
                    field=key,
                )


def _columns(rows: Sequence[Row]) -> list[str]:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def write_csv(rows: Sequence[Row], path: str | Path, columns: Sequence[str] | None = None) -> None:
    """Write ``rows`` as CSV (columns in first-seen order unless given; floats exactly), whole
    or not at all."""
    names = list(columns) if columns is not None else _columns(rows)
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8", newline="") as out:
        table = csv.DictWriter(out, fieldnames=names, extrasaction="ignore")
        table.writeheader()
        table.writerows(rows)


def write_parquet(rows: Sequence[Row], path: str | Path) -> str | None:
    """Write ``rows`` as Parquet, whole or not at all; return ``None`` if written, else why not
    (pyarrow is not installed, or a column does not fit Parquet, e.g. integers beyond 64
    bits)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return "pyarrow is not installed"
    names = _columns(rows)
    try:
        table = pa.Table.from_pylist([{k: row.get(k) for k in names} for row in rows])
    except (pa.ArrowException, OverflowError) as exc:
        return f"the rows do not fit Parquet ({' '.join(str(exc).split())[:200]})"
    with atomic_path(path) as temporary:
        pq.write_table(table, str(temporary))
    return None
