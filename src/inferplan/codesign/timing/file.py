"""Node times files: seconds per block measured on some nodes of a network, read into a
:class:`~inferplan.codesign.timing.measured.MeasuredBlocks` (the ``--node-times`` option of
``provision`` and ``throughput``; the format is in docs/codesign.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from inferplan.codesign.timing.measured import MeasuredBlocks
from inferplan.documents import read_document, validate_document
from inferplan.errors import InvalidArgument, InvalidFile

__all__ = ["load_measured_blocks", "read_measured_blocks"]


def load_measured_blocks(
    path: str | Path, node_ids: Sequence[str] | None, blocks: int
) -> MeasuredBlocks:
    """Read a node times file (JSON or YAML): ``block_seconds``, a mapping of node ids to
    the seconds each block of the model takes on that node (as measured there, at the
    capacity the network gives it), for a network of ``node_ids`` (``None``: the nodes are
    checked later, against the network) and a model of ``blocks``.

    Raises
    ------
    InvalidFile
        Naming the file and the field: an unknown field or node, a count of times that is
        not the model's blocks, a time that is not a finite number of seconds ``>= 0``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "times.yaml"
    >>> _ = f.write_text("block_seconds:\\n  a1: [0.5, 0.25]\\n")
    >>> load_measured_blocks(f, ["s", "a1", "t"], 2).seconds
    (('a1', (0.5, 0.25)),)
    """
    source = str(path)
    known = None if node_ids is None else set(node_ids)
    model = read_measured_blocks(path)
    for node, times in model.seconds:
        where = f"block_seconds.{node}"
        if known is not None and node not in known:
            raise InvalidFile(f"unknown node {node!r} (not in the network)", source=source,
                              field=where)  # fmt: skip
        if len(times) != blocks:
            raise InvalidFile(f"{len(times)} block times given, the model has {blocks} blocks",
                              source=source, field=where)  # fmt: skip
    return model


def read_measured_blocks(path: str | Path) -> MeasuredBlocks:
    """A node times file's times, checked on their own (every time a finite number of
    seconds ``>= 0``; :func:`load_measured_blocks` checks them against a network and a model
    too).

    Raises
    ------
    InvalidFile
        Naming the file and the field.
    """
    source = str(path)
    doc = validate_document(_NodeTimesFile, read_document(path), source=source, error=InvalidFile)
    try:
        return MeasuredBlocks.of(doc.block_seconds)
    except InvalidArgument as error:
        raise InvalidFile(error.message, source=source,
                          field=f"block_seconds.{error.field}") from None  # fmt: skip


class _NodeTimesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    block_seconds: dict[str, list[float]] = Field(min_length=1)
