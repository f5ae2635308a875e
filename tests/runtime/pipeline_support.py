"""Small networks and hand-made plans for the pipeline tests, and running ``inferplan run`` as
a real command (its own process, a timeout, no process left behind)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
RUN_TIMEOUT_S = 240

# model, input shape, blocks
MODELS = {
    "resnet": ("tests.runtime.models:resnet", (1, 3, 16, 16), "depth=2"),
    "unet": ("tests.runtime.models:unet", (1, 3, 16, 16), None),
    "mlp": ("tests.runtime.models:mlp", (1, 16), None),
    "broken": ("tests.runtime.models:broken", (1, 16), None),
    "hangs": ("tests.runtime.models:hangs", (1, 16), None),
}


def model_args(name: str) -> list[str]:
    spec, shape, blocks = MODELS[name]
    args = [spec, "--input-shape", ",".join(map(str, shape))]
    return args + (["--blocks", blocks] if blocks else [])


def chain(path: Sequence[str], capacity: float, bandwidth: float) -> dict[str, Any]:
    """A network that is one chain ``path``, every node ``capacity`` FLOP/s, every link
    ``bandwidth`` bit/s, plus a node ``x`` off the chain."""
    nodes = [{"id": v, "capacity": capacity, "price": 1e-6} for v in path]
    links = [{"source": u, "target": v, "capacity": bandwidth, "price": 1e-5}
             for u, v in itertools.pairwise(path)]  # fmt: skip
    nodes.append({"id": "x", "capacity": capacity, "price": 1e-6})
    links.append({"source": path[0], "target": "x", "capacity": bandwidth, "price": 1e-5})
    return {"source": path[0], "target": path[-1], "nodes": nodes, "links": links}


def stage_seconds(
    profile: dict[str, Any], partition: Sequence[int], capacity: float, bandwidth: float
) -> tuple[list[float], list[float]]:
    """Planned seconds of each node (its FLOPs over ``capacity``) and link (the activation at
    its cut over ``bandwidth``), computed here from the profile's numbers."""
    flops, bits = profile["flops"], profile["activation_bits"]
    nodes, done = [], 0
    for b in partition:
        nodes.append(sum(flops[done:b]) / capacity)
        done = b
    links = [bits[b] / bandwidth for b in partition[:-1]]
    return nodes, links


def hand_plan(
    path: Sequence[str],
    partition: Sequence[int],
    profile: dict[str, Any],
    capacity: float,
    bandwidth: float,
) -> dict[str, Any]:
    """A plan in the ``provision --json`` format (with a key a newer planner adds)."""
    nodes, links = stage_seconds(profile, partition, capacity, bandwidth)
    interval = max(nodes + links)
    return {"status": "optimal", "method": "hand", "cost": 0.0, "interval": interval,
            "target_interval": interval, "path": list(path), "partition": list(partition),
            "node_upgrades": {}, "link_upgrades": []}  # fmt: skip


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path


def env(mark: str) -> dict[str, str]:
    """The environment of a test run: this worktree's code first, a marker to find its
    processes by."""
    out = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}  # fmt: skip
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    out["INFERPLAN_TEST_MARK"] = mark
    return out


def start(args: Sequence[str], *, mark: str | None = None) -> tuple[subprocess.Popen[str], str]:
    mark = mark or uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-m", "inferplan", *args], cwd=ROOT, env=env(mark),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    return proc, mark


def finish(proc: subprocess.Popen[str], timeout: float = RUN_TIMEOUT_S) -> tuple[int, str, str]:
    """Wait for ``proc``; on a timeout kill its process group and fail."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"the command did not end within {timeout} s") from None
    return proc.returncode, out, err


def run(args: Sequence[str]) -> tuple[int, str, str, str]:
    proc, mark = start(args)
    code, out, err = finish(proc)
    return code, out, err, mark


def processes_marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``mark``, and the ranks this process forked
    (their environment in /proc is this process's as it started, without the mark)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        ours = int(parent) == os.getpid() and name.startswith("inferplan-r")
        if (f"INFERPLAN_TEST_MARK={mark}".encode() in environ or ours) and state != "Z":
            found.append(int(entry.name))
    return found


def ranks_marked(mark: str) -> dict[int, int]:
    """The launched ranks carrying ``mark``, by the name a launched rank takes
    (``inferplan-rRANK``; a forked rank's environment in /proc is still its launcher's):
    rank -> pid."""
    ranks = {}
    for pid in processes_marked(mark):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name.startswith("inferplan-r") and name[len("inferplan-r") :].isdigit():
            ranks[int(name[len("inferplan-r") :])] = pid
    return ranks


def ranks_started(mark: str, count: int, deadline_s: float = 120) -> dict[int, int]:
    """Wait until the ``count`` ranks of the run marked ``mark`` are up: rank -> pid."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:  # bounded in time
        ranks = ranks_marked(mark)
        if len(ranks) == count:
            return ranks
        time.sleep(0.2)
    raise AssertionError("the ranks did not start")
