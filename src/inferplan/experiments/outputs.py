"""What both paper reproductions do around their sweep: optional outputs and how it ran."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inferplan.experiments.store import write_parquet

__all__ = ["can_draw", "describe_executor", "write_parquet_if_possible"]


def write_parquet_if_possible(
    rows: Sequence[dict[str, Any]], out: Path, files: list[Path], notes: list[str]
) -> None:
    """Write ``out/results.parquet`` when pyarrow is installed (added to ``files``), else say
    so in ``notes``."""
    why_not = write_parquet(rows, out / "results.parquet")
    if why_not is None:
        files.append(out / "results.parquet")
    else:
        notes.append(f"results.parquet not written: {why_not}")


def can_draw(notes: list[str]) -> bool:
    """Whether matplotlib is installed; if not, say so in ``notes``."""
    if importlib.util.find_spec("matplotlib") is None:
        notes.append(
            "figures not drawn: matplotlib is not installed (pip install 'inferplan[plots]')"
        )
        return False
    return True


def describe_executor(jobs: int | None, cluster: str | None) -> str:
    """How a sweep ran, for its report."""
    if cluster:
        return f"Dask cluster {cluster}"
    return "in process" if jobs == 1 else f"joblib, {jobs or 'all'} processes"
