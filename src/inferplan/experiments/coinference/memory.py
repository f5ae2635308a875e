"""What memory is worth: the i.i.d. rule against the optimum with memory, from a sweep's rows.

A sweep of the co-inference study on a channel with memory (``channel: gauss-markov``,
``methods: [optimal, memoryless]``, ``examples/sweep-memory.yaml``) gives per point the exact
``Z`` of both planners on the same correlated channel. :func:`memory_summary` pairs them;
:func:`memory_report` is the table of docs/coinference.md ("What memory is worth").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inferplan.errors import InvalidArgument

__all__ = ["MEMORY_KEYS", "memory_report", "memory_summary"]

#: The parameters that name one system of the study.
MEMORY_KEYS = ("profile", "device_cpu_hz", "carrier_hz", "speed_mps")
#: A saving counts as one above this (both costs are exact; their sums round differently).
_SAVING_TOL = 1e-9


def memory_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per system: both planners' ``Z`` and ``M``, the saving of memory
    (``1 - Z_memory / Z_iid``) and whether memory changes the placement.

    Raises
    ------
    InvalidArgument
        If the rows hold no ``optimal`` and ``memoryless`` strategy rows for a system.

    Examples
    --------
    >>> rows = [
    ...     {"record": "strategy", "strategy": "optimal", "cost": 0.9, "placement": 0,
    ...      "profile": "alexnet", "device_cpu_hz": 1e9, "carrier_hz": 2.4e9, "speed_mps": 1.0},
    ...     {"record": "strategy", "strategy": "memoryless", "cost": 1.0, "placement": 2,
    ...      "profile": "alexnet", "device_cpu_hz": 1e9, "carrier_hz": 2.4e9, "speed_mps": 1.0}]
    >>> s = memory_summary(rows)[0]
    >>> round(s["saving"], 3), s["placement_changes"]
    (0.1, True)
    """
    pairs: dict[tuple[Any, ...], dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("record") == "strategy" and row.get("strategy") in ("optimal", "memoryless"):
            key = tuple(row.get(k) for k in MEMORY_KEYS)
            pairs.setdefault(key, {})[str(row["strategy"])] = row
    out = []
    for key, both in sorted(pairs.items(), key=lambda item: tuple(map(str, item[0]))):
        if len(both) != 2:
            raise InvalidArgument(
                f"system {dict(zip(MEMORY_KEYS, key, strict=True))} lacks the "
                f"{'memoryless' if 'optimal' in both else 'optimal'} strategy: run the sweep "
                "with methods [optimal, memoryless]",
                field="rows",
            )
        memory, iid = both["optimal"], both["memoryless"]
        saving = 1.0 - float(memory["cost"]) / float(iid["cost"])
        out.append(
            {
                **dict(zip(MEMORY_KEYS, key, strict=True)),
                "cost_memory": float(memory["cost"]),
                "cost_iid": float(iid["cost"]),
                "placement_memory": int(memory["placement"]),
                "placement_iid": int(iid["placement"]),
                "saving": saving if saving > _SAVING_TOL else 0.0,
                "placement_changes": int(memory["placement"]) != int(iid["placement"]),
            }
        )
    return out


def memory_report(summary: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table: per DNN, device CPU and carrier, the saving of memory at each speed,
    with ``M*`` (memory / i.i.d.) where memory changes the placement."""
    speeds = sorted({float(r["speed_mps"]) for r in summary})
    groups: dict[tuple[str, float, float], dict[float, Mapping[str, Any]]] = {}
    for r in summary:
        key = (str(r["profile"]), float(r["device_cpu_hz"]), float(r["carrier_hz"]))
        groups.setdefault(key, {})[float(r["speed_mps"])] = r
    head = "| DNN | device CPU | carrier | " + " | ".join(f"{v:g} m/s" for v in speeds) + " |"
    lines = [head, "| --- | ---: | ---: | " + " | ".join("---:" for _ in speeds) + " |"]
    for (profile, cpu, carrier), by_speed in sorted(groups.items()):
        cells = []
        for v in speeds:
            point = by_speed.get(v)
            if point is None:
                cells.append("")
                continue
            text = f"{100 * float(point['saving']):.2f} %"
            if point["placement_changes"]:
                text += f" (M* {point['placement_memory']}/{point['placement_iid']})"
            cells.append(text)
        lines.append(
            f"| {profile} | {cpu / 1e9:g} GHz | {carrier / 1e9:g} GHz | " + " | ".join(cells) + " |"
        )
    changed = sum(bool(r["placement_changes"]) for r in summary)
    saved = sum(float(r["saving"]) > 0 for r in summary)
    lines.append("")
    lines.append(
        f"Memory lowers the expected cost in {saved} of {len(summary)} systems and changes the "
        f"placement in {changed}."
    )
    return "\n".join(lines) + "\n"
