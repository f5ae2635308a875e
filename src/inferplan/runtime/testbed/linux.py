"""A testbed on one Linux machine that the code under test does not control: links shaped by the
kernel's traffic control, hosts held to a share of a core by CPU quotas.

Everything lives in a network namespace the run creates (``ip netns``): each emulated host gets
its own loopback address there (``127.0.0.2``, ``127.0.0.3``, ...; ``127.0.0.1`` stays for
control traffic, which is never shaped), and all traffic stays on loopback. One class per piece
of emulated infrastructure, as Mininet has:

- :class:`Namespace`: the network namespace and its loopback addresses;
- :class:`ShapedLink`: an HTB class of the loopback's root qdisc at the link's rate, with a
  ``u32`` filter on the traffic from the source host's address to the target's, and a netem
  delay where the link has one (and the kernel has netem);
- :class:`CpuQuota`: a cgroup whose CFS quota holds its processes to a share of a core (cgroup
  v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``);
- :class:`Testbed`: all of them, set up together and torn down on every exit path (a signal
  handler turns SIGTERM into an exception while one is up); names carry :data:`PREFIX` and the
  run's id, which starts with the launching process's id, so :func:`cleanup` can remove what a
  run that was killed left behind (and nothing of a run still going).

:func:`missing` says what this machine lacks for a testbed (root, network namespaces, ``ip``,
pyroute2, a CPU controller); :func:`require` raises :class:`TestbedUnavailable` naming it before
anything is created. :func:`dilation` picks the time-dilation factor ``k`` and the quotas.

Examples
--------
Quotas for four hosts that need 0.5, 1.5 and 0.2 of a core at the plan's speed (the fourth
only forwards), on 2 cores of which 0.9 each are given out: the run is dilated so that the
busiest host gets 0.9 of a core, and the others share the second core (runs give out 0.6,
:data:`CPU_BUDGET`):

>>> k, quotas, cores = dilation([0.5, 1.5, 0.2, None], cores=2, budget=0.9)
>>> round(k, 3), [round(q, 3) if q else q for q in quotas], cores
(1.667, [0.3, 0.9, 0.12, None], [1, 0, 1, None])
>>> round(cfs_period([0.02, 0.05], quotas), 4)  # the 0.12 core gets 1 ms a period
0.0083
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferplan.errors import InferplanError, InvalidArgument

__all__ = [
    "PREFIX",
    "Capability",
    "CpuQuota",
    "HostSpec",
    "LinkSpec",
    "Namespace",
    "ShapedLink",
    "Testbed",
    "TestbedUnavailable",
    "TransportCost",
    "capabilities",
    "cfs_period",
    "cleanup",
    "cpu_counts",
    "dilation",
    "host_address",
    "missing",
    "others_share",
    "repeats",
    "require",
    "transport_cost",
]

PREFIX = "inferplan-tb-"
NETNS_DIR = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# of each core, for the quotas and the transport (transport_cost) of the hosts on it: the rest is
# left to the launcher and the machine's other load (quotas near a whole core are not granted
# under it: the study's plan with quotas of
# 0.91 and 0.93 ran 2.2 times its interval, and the device-edge pair's sides with 0.9 1.2 and 1.5
# times theirs, at load averages of 9 to 10; docs/testbed.md)
CPU_BUDGET = 0.6
MIN_PERIOD_S, MAX_PERIOD_S = 0.001, 1.0  # the kernel's bounds on cfs_period_us
MIN_QUOTA_S = 0.001  # the kernel refuses a quota below 1 ms per period
PERIOD_FRACTION = 1 / 20  # the CFS period against the shortest stage
MIN_BURST_S = 0.01  # CPU seconds a held host's shortest stretch of compute takes at least
MAX_REPEATS = 1000
_ROOT_HANDLE = 0x10000  # HTB root "1:"
_RUN_ID = re.compile(rf"^{re.escape(PREFIX)}(\d+)-[0-9a-f]+$")
_STEPS = 50  # bound of every retry loop here
MAX_SHARES_V1, MAX_WEIGHT_V2 = 262144, 10000
CLONE_NEWNET = 0x40000000
MTU_B = 1500  # the namespace's loopback: packets an Ethernet link carries, so shaping is fine
# bytes a full TCP packet takes on the loopback (Ethernet header 14) per payload byte
# (IPv4 20, TCP 20, timestamps 12): the classes run this much faster than the link's rate, so
# that the payload, the bits the model counts, moves at the rate
FRAMING = (MTU_B + 14) / (MTU_B - 52)


class TestbedUnavailable(InferplanError):
    """This machine cannot host a testbed (no root, no network namespaces, no CPU controller)."""


# --------------------------------------------------------------------------- what is there


def _cpu_controller(root: Path) -> str | None:
    """``"v2"`` or ``"v1"`` when the CPU controller is mounted under ``root``, else None."""
    with contextlib.suppress(OSError):
        if "cpu" in (root / "cgroup.controllers").read_text().split():
            return "v2"
    if (root / "cpu" / "cpu.cfs_quota_us").exists():
        return "v1"
    return None


def _has_netem() -> bool:
    """Whether the kernel has the netem qdisc (read from its configuration where it is
    published; assumed present otherwise, setting it up then says so)."""
    config = Path("/proc/config.gz")
    if not config.exists():
        return True
    import gzip

    with contextlib.suppress(OSError):
        text = gzip.decompress(config.read_bytes()).decode(errors="replace")
        return re.search(r"^CONFIG_NET_SCH_NETEM=[ym]$", text, re.M) is not None
    return True


def missing(*, cgroup_root: Path = CGROUP_ROOT) -> list[str]:
    """What this machine lacks for a testbed, in words (empty when it has everything).

    Examples
    --------
    >>> missing(cgroup_root=Path("/nonexistent"))[-1]
    'a CPU controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us under /nonexistent)'
    """
    return [c.lacking for c in capabilities(cgroup_root=cgroup_root, delays=False) if not c.has]


@dataclass(frozen=True)
class Capability:
    """One thing a testbed run may need: its ``name``, whether this machine ``has`` it, what
    ``needs`` it (``every run``, or the plans that use it) and the words naming it when it is
    ``lacking``."""

    name: str
    has: bool
    needs: str
    lacking: str


def _has_pyroute2() -> bool:
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return False
    return True


def capabilities(*, cgroup_root: Path = CGROUP_ROOT, delays: bool = True) -> list[Capability]:
    """Every capability a plan on the testbed may need and whether this machine has it: what
    every run needs and, with ``delays``, the netem qdisc of links with a propagation delay.

    Examples
    --------
    >>> [c.name for c in capabilities(cgroup_root=Path("/nonexistent"))][-2:]
    ['a CPU controller', 'the netem qdisc']
    """
    every = "every run"
    out = [
        Capability("root", os.geteuid() == 0, every,
                   "root (network namespaces, traffic control and cgroups need it; sudo "
                   "resets PATH, so run a venv's command by its path: sudo "
                   ".venv/bin/inferplan ...)"),
        Capability("network namespaces", Path("/proc/self/ns/net").exists(), every,
                   "network namespaces (/proc/self/ns/net)"),
        Capability("iproute2's ip", shutil.which("ip") is not None, every,
                   "iproute2's ip command"),
        Capability("pyroute2", _has_pyroute2(), every,
                   "pyroute2 (pip install 'inferplan[testbed]')"),
        Capability("a CPU controller", _cpu_controller(cgroup_root) is not None, every,
                   f"a CPU controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us under "
                   f"{cgroup_root})"),
    ]  # fmt: skip
    if delays:
        out.append(Capability("the netem qdisc", _has_netem(), "plans whose links have delay_s",
                              "the netem qdisc for link delays (this kernel is built without "
                              "CONFIG_NET_SCH_NETEM)"))  # fmt: skip
    return out


def require(*, delays: bool = False, cgroup_root: Path = CGROUP_ROOT) -> None:
    """Raise :class:`TestbedUnavailable` naming what is missing; ``delays``: links with a
    propagation delay, which need the kernel's netem qdisc."""
    lacks = [c.lacking for c in capabilities(cgroup_root=cgroup_root, delays=delays)
             if not c.has]  # fmt: skip
    if lacks:
        raise TestbedUnavailable("the testbed needs " + "; ".join(lacks), field="testbed")


# --------------------------------------------------------------------------- quotas


def dilation(
    demands: Sequence[float | None],
    *,
    cores: int,
    budget: float = CPU_BUDGET,
    at_least: float = 1.0,
    beside: Sequence[float] | None = None,
) -> tuple[float, list[float | None], list[int | None]]:
    """The time-dilation factor ``k``, each host's quota (cores) at it and the core it runs on.

    ``demands[v]`` is the share of a core host ``v`` needs to run at the plan's speed (its
    real compute time over its planned time; ``None`` for a host without a quota);
    ``beside[v]`` (default 0) what it needs besides, outside its quota (its transport: the CPU
    the kernel and its threads take to move its links' bytes, :func:`transport_cost`), counted
    on its core but not in its quota. Each held host is pinned to one of ``cores`` cores (a
    thread that moves between cores strands the part of its quota the kernel had handed to the
    core it left), and a core's hosts' needs (quota and transport) sum to at most ``budget`` of
    it. The hosts go to cores largest need first, each to the least loaded (LPT scheduling,
    within 4/3 of the best assignment; a host without a quota is not pinned, its transport
    counted on the core it would go to), and ``k = max(at_least, 1, busiest core's need /
    budget)``.
    """
    if cores < 1:
        raise InvalidArgument(f"must be at least 1, got {cores}", field="cores")
    if not (math.isfinite(at_least) and at_least >= 1):
        raise InvalidArgument(f"must be at least 1, got {at_least}", field="dilation")
    held = [d for d in demands if d is not None]
    if any(not (math.isfinite(d) and d > 0) for d in held):
        raise InvalidArgument(f"demands must be positive, got {held}", field="demands")
    extra = [0.0] * len(demands) if beside is None else list(beside)
    if len(extra) != len(demands) or any(not (math.isfinite(e) and e >= 0) for e in extra):
        raise InvalidArgument(f"must be one non-negative share per host, got {extra}",
                              field="beside")  # fmt: skip
    need = [(d or 0.0) + e for d, e in zip(demands, extra, strict=True)]
    load = [0.0] * cores
    placed: list[int | None] = [None] * len(demands)
    for v in sorted((v for v in range(len(demands)) if need[v] > 0), key=lambda v: -need[v]):
        core = min(range(cores), key=load.__getitem__)
        load[core] += need[v]
        placed[v] = None if demands[v] is None else core
    k = max(at_least, 1.0, max(load) / budget)
    return k, [None if d is None else d / k for d in demands], placed


def repeats(burst_s: float, *, least: float = MIN_BURST_S) -> int:
    """How many times a host runs each piece of its work so that its shortest stretch of
    compute takes at least ``least`` CPU seconds (``burst_s``: that stretch once).

    The kernel hands a quota out in whole periods of at least 1 ms of CPU: a host whose stage
    needs a fraction of a millisecond runs it in one go at full speed, then waits the rest of
    a period that is longer than the stage (measured in docs/testbed.md). Running the same work
    ``r`` times under an ``r`` times larger quota takes the same time per stage, in ``r`` times
    as many periods, each well above the kernel's minimum. At most :data:`MAX_REPEATS`.

    Examples
    --------
    >>> repeats(0.0004), repeats(0.004), repeats(0.02), repeats(0.0)
    (25, 3, 1, 1)
    """
    if not (math.isfinite(burst_s) and burst_s > 0):
        return 1
    return max(1, min(MAX_REPEATS, math.ceil(least / burst_s - 1e-9)))


def cfs_period(stage_s: Sequence[float], quotas: Sequence[float | None]) -> float:
    """A CFS period short against the stages: a twentieth of the shortest positive stage
    time (1 ms without one), within the kernel's 1 ms .. 1 s, and long enough that every
    quota gets its kernel minimum of 1 ms per period."""
    positive = [s for s in stage_s if s > 0]
    period = min(positive) * PERIOD_FRACTION if positive else MIN_PERIOD_S
    period = max(MIN_PERIOD_S, min(MAX_PERIOD_S, period))
    for q in quotas:
        if q is not None:
            period = max(period, MIN_QUOTA_S / q)
    return min(period, MAX_PERIOD_S)


# --------------------------------------------------------------------------- the pieces


def host_address(index: int) -> str:
    """The loopback address of host ``index`` (0-based): ``127.0.0.2`` onwards."""
    if not 0 <= index < 2**24 - 3:
        raise InvalidArgument(f"no loopback address for host {index}", field="hosts")
    return str(ipaddress.IPv4Address("127.0.0.2") + index)


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise TestbedUnavailable(f"ip {' '.join(args)}: {done.stderr.strip()}", field="testbed")


class Namespace:
    """A network namespace with its loopback up and one extra loopback address per host."""

    def __init__(self, name: str, addresses: Sequence[str]) -> None:
        self.name = name
        self.addresses = tuple(addresses)
        self.created = False
        self.route: Any = None  # pyroute2.IPRoute inside the namespace

    def create(self) -> None:
        from pyroute2 import IPRoute

        _ip("netns", "add", self.name)
        self.created = True
        # the netlink socket is opened inside the namespace by this thread, which then goes
        # home (pyroute2's own netns= forks a helper per socket, a tenth of a second)
        inside = self.enter_fd()
        try:
            with entered(inside):
                self.route = IPRoute()
        finally:
            os.close(inside)
        lo = self.loopback
        # one packet per buffer the qdisc sees: with segmentation offload TCP hands the loopback
        # buffers of up to 64 KiB, which HTB lets through whole on a positive token count, so
        # a message's first 64 KiB went unshaped (measured: 4300-byte messages arrived at
        # once after an idle spell; with one segment per buffer, in 0.66 of their time, the
        # first of their three packets being ahead of the rate)
        self.route.link("set", index=lo, state="up", mtu=MTU_B, gso_max_segs=1,
                        gso_max_size=MTU_B)  # fmt: skip
        for address in self.addresses:
            self.route.addr("add", index=lo, address=address, prefixlen=32)

    @property
    def loopback(self) -> int:
        return int(self.route.link_lookup(ifname="lo")[0])

    def enter_fd(self) -> int:
        """A file descriptor of the namespace, for ``setns`` in a child (the caller closes it)."""
        return os.open(NETNS_DIR / self.name, os.O_RDONLY)

    def delete(self) -> None:
        if self.route is not None:
            with contextlib.suppress(Exception):
                self.route.close()
            self.route = None
        if self.created:
            _remove_netns(self.name)
            self.created = False


@contextlib.contextmanager
def entered(fd: int) -> Iterator[None]:
    """The calling thread inside the network namespace of ``fd`` (only it: the process's
    other threads stay where they are), and back in its own on leaving."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _setns(fd)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def _setns(fd: int) -> None:
    """Move the calling thread into the network namespace of ``fd``."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns into a network namespace")


def _remove_netns(name: str) -> None:
    with contextlib.suppress(TestbedUnavailable):
        _ip("netns", "del", name)


@dataclass(frozen=True)
class LinkSpec:
    """A shaped link from one host's address to another's: rate (bit/s), delay (s)."""

    source: str
    target: str
    rate_bps: float
    delay_s: float = 0.0


class ShapedLink:
    """An HTB class at the link's rate for the traffic from its source's address to its
    target's (matched by a ``u32`` filter), and a netem leaf for its delay, if any.

    HTB sends a packet whenever the class has tokens left and charges it afterwards, so the
    burst is small: 64 bytes, or 1 ms of the rate where that is more (with a burst of one
    1600-byte packet, messages of one or two packets went through 30 % faster than the rate;
    with 64 bytes at 200 Mbit/s HTB woke for every packet and a 1.5 MB transfer took 1.2 to
    1.35 times its time, with 1 ms 1.00; measured in docs/testbed.md). After an idle spell a
    message so gets one packet and the burst ahead of the rate (:meth:`message_rate`).
    """

    BURST_B = 64
    BURST_S = 0.001

    def __init__(self, spec: LinkSpec, minor: int) -> None:
        self.spec = spec
        self.classid = _ROOT_HANDLE + minor
        self.rate_bps = spec.rate_bps

    def create(self, ns: Namespace) -> None:
        lo = ns.loopback
        ns.route.tc("add-class", "htb", lo, self.classid, parent=_ROOT_HANDLE,
                    **self._rates(self.rate_bps))  # fmt: skip
        if self.spec.delay_s > 0:
            ns.route.tc("add", "netem", lo, (self.classid & 0xFFFF) << 16,
                        parent=self.classid, delay=round(self.spec.delay_s * 1e6))  # fmt: skip
        # the IPv4 header's source address is at byte 12, its destination at byte 16
        keys = [
            f"{_hex(self.spec.source)}/0xffffffff+12",
            f"{_hex(self.spec.target)}/0xffffffff+16",
        ]
        # packets without data (IPv4 total length below 64 bytes: the acknowledgements of
        # traffic the other way) go past every class: the model charges a link its payload
        # only, and a download's acknowledgements on a slow uplink would hold the download back
        ns.route.tc("add-filter", "u32", lo, parent=_ROOT_HANDLE, prio=5, protocol=0x0800,
                    target=_ROOT_HANDLE, keys=[*keys, "0x00000000/0x0000ffc0+0"])  # fmt: skip
        ns.route.tc("add-filter", "u32", lo, parent=_ROOT_HANDLE, prio=10, protocol=0x0800,
                    target=self.classid, keys=keys)  # fmt: skip

    def _rates(self, rate_bps: float) -> dict[str, Any]:
        if not (math.isfinite(rate_bps) and rate_bps > 0):
            raise InvalidArgument(f"a shaped link needs a positive rate, got {rate_bps}",
                                  field="rate")  # fmt: skip
        rate = max(8, round(rate_bps * FRAMING / 8))  # bytes/s; the kernel's rates are 64-bit
        burst = max(self.BURST_B, round(rate * self.BURST_S))
        return {"rate": rate, "ceil": rate, "burst": burst, "cburst": burst}

    @classmethod
    def message_rate(cls, payload_b: int, seconds: float) -> float:
        """The rate (bit/s of payload, as :meth:`set_rate` takes it) at which a message of
        ``payload_b`` bytes sent after an idle spell arrives in ``seconds``: its first packet
        and the burst go at once, the rest at the rate.

        Examples
        --------
        Ten full packets in 100 ms: nine of them, less the 1 ms burst, at the rate:

        >>> rate = ShapedLink.message_rate(14480, 0.1)
        >>> round(rate / 1e6, 4), round(9 * 1448 * 8 / 0.101 / 1e6, 4)
        (1.0322, 1.0322)
        """
        wire = payload_b * FRAMING  # bytes the loopback carries
        after = wire - (MTU_B + 14)  # all but the first packet
        spread = after / (seconds + cls.BURST_S)  # wire B/s, where the burst is 1 ms of it
        if spread * cls.BURST_S < cls.BURST_B:
            spread = (after - cls.BURST_B) / seconds
        if not (math.isfinite(spread) and spread > 0):  # it fits the first packet: no rate
            spread = wire / seconds  # holds it
        return 8 * spread / FRAMING

    def set_rate(self, ns: Namespace, rate_bps: float) -> float:
        """Change the class's rate through netlink; return how long the change took (s)."""
        started = time.perf_counter()
        ns.route.tc("change-class", "htb", ns.loopback, self.classid, parent=_ROOT_HANDLE,
                    **self._rates(rate_bps))  # fmt: skip
        self.rate_bps = rate_bps
        return time.perf_counter() - started


def _hex(address: str) -> str:
    return f"0x{int(ipaddress.IPv4Address(address)):08x}"


class CpuQuota:
    """A cgroup of the CPU controller holding what runs in it to ``quota`` cores (None: no
    limit), the CFS enforcing it every ``period_s``.

    Whole processes join it (:meth:`add`), or single threads (:meth:`add_thread`: with cgroup
    v1 the thread alone, so that a rank's compute is held while its transport threads are
    not; v2 puts threads only into threaded cgroups, so there the whole process joins).
    """

    def __init__(self, path: Path, version: str, quota: float | None, period_s: float) -> None:
        self.path = path
        self.version = version
        self.quota = quota
        self.period_s = period_s
        self.created = False

    def create(self) -> None:
        self.path.mkdir()
        self.created = True
        self.hold()

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def hold(self) -> None:
        """Write the quota (again: after a change of ``quota``)."""
        _write_quota(self.path, self.version, self.quota, self.period_s)

    def add_thread(self, tid: int, pid: int) -> None:
        """Move thread ``tid`` of process ``pid`` here (v2: the whole process)."""
        if self.version == "v2":
            self.add(pid)
        else:
            (self.path / "tasks").write_text(str(tid))

    def remove(self) -> None:
        if self.created:
            _remove_cgroup(self.path)
            self.created = False


def _write_quota(path: Path, version: str, quota: float | None, period_s: float) -> None:
    period_us = round(period_s * 1e6)
    quota_us = -1 if quota is None else max(1000, round(quota * period_us))
    if version == "v2":
        (path / "cpu.max").write_text(f"{'max' if quota_us < 0 else quota_us} {period_us}")
    else:
        if quota_us >= 0:  # the period first: a quota must fit the new period's bounds
            (path / "cpu.cfs_quota_us").write_text("-1")
        (path / "cpu.cfs_period_us").write_text(str(period_us))
        (path / "cpu.cfs_quota_us").write_text(str(quota_us))


def _prefer(path: Path, version: str) -> None:
    """Give the cgroup ``path`` the scheduler's largest weight: its quotas cap its hosts, and
    the weight keeps the machine's other processes from taking what the quotas grant."""
    if version == "v2":
        (path / "cpu.weight").write_text(str(MAX_WEIGHT_V2))
    else:
        (path / "cpu.shares").write_text(str(MAX_SHARES_V1))


def _remove_cgroup(path: Path) -> None:
    """Kill what is left in the cgroup ``path`` (and its children), then remove them."""
    if not path.is_dir():
        return
    for child in sorted((p for p in path.iterdir() if p.is_dir()), reverse=True):
        _remove_cgroup(child)
    for _ in range(_STEPS):
        with contextlib.suppress(OSError):
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
        time.sleep(0.01)  # a killed process leaves its cgroup when it has died
    path.rmdir()  # raises, naming the cgroup that could not be removed


# --------------------------------------------------------------------------- the testbed


@dataclass(frozen=True)
class HostSpec:
    """A host: its loopback address and its CPU quota (cores; None: no limit)."""

    address: str
    quota: float | None = None


def _cgroup_base(root: Path, version: str) -> Path:
    return root if version == "v2" else root / "cpu"


def _own_cgroup(root: Path, version: str) -> Path:
    """The CPU controller's cgroup the calling thread is in."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/thread-self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (controllers == "") if version == "v2" else ("cpu" in controllers.split(",")):
                return _cgroup_base(root, version) / path.lstrip("/")
    return _cgroup_base(root, version)


def _new_run_id() -> str:
    return f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Testbed:
    """The namespace, its shaped links and the hosts' CPU quotas of one run.

    ``with Testbed(hosts, links, period_s=...) as bed:`` sets everything up (removing first
    what killed runs left) and tears it all down on leaving, whatever the way out; between,
    SIGTERM raises ``SystemExit(143)`` in the main thread so that the teardown runs.
    :meth:`preexec` puts a child started with ``subprocess.Popen(preexec_fn=...)`` into the
    namespace; :meth:`place` moves a process into a host's cgroup.
    """

    def __init__(self, hosts: Sequence[HostSpec], links: Sequence[LinkSpec], *,
                 period_s: float = 0.01, cgroup_root: Path = CGROUP_ROOT) -> None:  # fmt: skip
        version = _cpu_controller(cgroup_root)
        if version is None:
            require(cgroup_root=cgroup_root)
        assert version is not None
        self.version = version
        self.run_id = _new_run_id()
        self.cgroup_root = cgroup_root
        self.group = _cgroup_base(cgroup_root, version) / self.run_id
        self.namespace = Namespace(self.run_id, [h.address for h in hosts])
        self.links = [ShapedLink(spec, minor) for minor, spec in enumerate(links, start=2)]
        self.hosts = [CpuQuota(self.group / f"host-{k}", version, h.quota, period_s)
                      for k, h in enumerate(hosts)]  # fmt: skip
        # what runs beside the held compute (transport, Python's bookkeeping): no quota
        self.transport = CpuQuota(self.group / "transport", version, None, period_s)
        # where the launcher's threads came from: a thread of it that a host held goes back
        # there (never into the run's cgroups, whose processes the teardown kills)
        self.home = CpuQuota(_own_cgroup(cgroup_root, version), version, None, period_s)
        self.specs = tuple(hosts)
        self.period_s = period_s
        self._fd: int | None = None
        self._old_term: Any = None
        self.setup_s = math.nan
        self.teardown_s = math.nan

    # setting up and tearing down

    def __enter__(self) -> Testbed:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def setup(self) -> None:
        started = time.perf_counter()
        self._trap_term()
        try:
            cleanup(cgroup_root=self.cgroup_root)
            ns = self.namespace
            ns.create()
            ns.route.tc("add", "htb", ns.loopback, _ROOT_HANDLE, default=0)
            for link in self.links:
                link.create(ns)
            self.group.mkdir()
            _prefer(self.group, self.version)
            if self.version == "v2":
                (self.group / "cgroup.subtree_control").write_text("+cpu")
            for host in [*self.hosts, self.transport]:
                host.create()
            self._fd = ns.enter_fd()
        except BaseException:
            self.teardown()
            raise
        self.setup_s = time.perf_counter() - started

    def teardown(self) -> None:
        """Remove everything the testbed created (each piece even if another fails)."""
        started = time.perf_counter()
        blocked = {signal.SIGINT, signal.SIGTERM}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            for host in [*self.hosts, self.transport]:
                with contextlib.suppress(OSError):
                    host.remove()
            with contextlib.suppress(OSError):
                _remove_cgroup(self.group)
            self.namespace.delete()  # its qdiscs, classes and filters go with it
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            self._restore_term()
        self.teardown_s = time.perf_counter() - started

    def _trap_term(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def terminated(signum: int, frame: types.FrameType | None) -> None:
            raise SystemExit(128 + signum)

        self._old_term = signal.signal(signal.SIGTERM, terminated)

    def _restore_term(self) -> None:
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None

    # using it

    @property
    def name(self) -> str:
        return self.run_id

    def preexec(self) -> Callable[[], None]:
        """A ``preexec_fn`` that moves the child into the namespace (``setns``)."""
        fd = self._fd
        assert fd is not None, "the testbed is not set up"
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)  # loaded before the fork

        def enter() -> None:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the testbed's namespace")

        return enter

    def inside(self) -> contextlib.AbstractContextManager[None]:
        """The calling thread inside the testbed's namespace (its sockets are the
        namespace's), and back on leaving."""
        assert self._fd is not None, "the testbed is not set up"
        return entered(self._fd)

    def place(self, host: int, pid: int) -> None:
        """Move process ``pid`` (all its threads) into host ``host``'s cgroup."""
        self.hosts[host].add(pid)

    def admit(self, pid: int) -> None:
        """Move process ``pid`` into the testbed's unlimited cgroup (its threads then join
        their hosts' cgroups themselves)."""
        self.transport.add(pid)

    def set_rate(self, link: int, rate_bps: float) -> float:
        """Change link ``link``'s rate; return how long the change took (s)."""
        return self.links[link].set_rate(self.namespace, rate_bps)

    def exec_prefix(self) -> list[str]:
        """The command prefix that runs a program in the namespace (``ip netns exec``)."""
        return ["ip", "netns", "exec", self.run_id]


# --------------------------------------------------------------------------- transport


@dataclass(frozen=True)
class TransportCost:
    """CPU seconds a shaped link takes on this machine per byte of payload it moves: at the
    sender (its thread, and the kernel's work on the loopback's packets, the shaper's and
    TCP's, which runs in softirqs there and on the timer) and at the receiver (its thread).

    A link moving ``B`` bit/s of payload so needs ``send_s_per_b * B / 8`` of a core at its
    source and ``receive_s_per_b * B / 8`` at its target while it transfers (:meth:`shares`).

    Examples
    --------
    >>> shares = TransportCost(15e-9, 10e-9).shares([8e6, 16e6])  # links of a 3-host path
    >>> [round(s, 6) for s in shares]
    [0.015, 0.04, 0.02]
    """

    send_s_per_b: float
    receive_s_per_b: float

    def shares(self, rates_bps: Sequence[float]) -> list[float]:
        """The share of a core each host of a path needs for its links' transfers (link ``l``
        from host ``l`` to host ``l + 1`` at ``rates_bps[l]``, bit/s of payload)."""
        out = [0.0] * (len(rates_bps) + 1)
        for link, rate in enumerate(rates_bps):
            out[link] += self.send_s_per_b * rate / 8
            out[link + 1] += self.receive_s_per_b * rate / 8
        return out


# the probe's rate: about the highest a link here holds with 1,500-byte packets (a bulk
# transfer at 200 Mbit/s took 1.01 to 1.05 times its time, at 400 Mbit/s 1.19 times)
PROBE_RATE_BPS = 200e6
PROBE_S = 0.4  # of transfer, twice: /proc/stat counts in 10 ms ticks


@functools.cache
def transport_cost() -> TransportCost:
    """What a shaped link's transfer costs in CPU here, measured once per process (the least
    of two bulk transfers of :data:`PROBE_S` at :data:`PROBE_RATE_BPS`, in a testbed of their
    own): the cores' busy time during the transfer (``/proc/stat``: the kernel's softirqs are
    nobody's thread) less the receiving thread's is the sender's; the machine's other load,
    if any, is counted with it, which the least of two keeps small.

    Raises
    ------
    TestbedUnavailable
        Where the machine cannot host a testbed.
    """
    src, dst = host_address(0), host_address(1)
    size = round(PROBE_RATE_BPS / 8 * PROBE_S)
    best: TransportCost | None = None
    for _ in range(2):
        with Testbed([HostSpec(src), HostSpec(dst)], [LinkSpec(src, dst, PROBE_RATE_BPS)]) as bed:
            busy, receive = _bulk_transfer(bed, src, dst, size)
        cost = TransportCost(max(0.0, busy - receive) / size, receive / size)
        if best is None or cost.send_s_per_b + cost.receive_s_per_b < (
            best.send_s_per_b + best.receive_s_per_b
        ):
            best = cost
    assert best is not None
    return best


def _bulk_transfer(bed: Testbed, src: str, dst: str, size: int) -> tuple[float, float]:
    """Move ``size`` bytes from ``src`` to ``dst`` in ``bed``; return the cores' busy seconds
    meanwhile and the receiving thread's CPU seconds."""
    timeout_s = 10 + 20 * size * 8 / PROBE_RATE_BPS
    with bed.inside():
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((dst, 7000))
    listener.listen(1)
    listener.settimeout(timeout_s)
    received: list[float] = []
    failed: list[BaseException] = []

    def receive() -> None:
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(timeout_s)
                view, got = memoryview(bytearray(size)), 0
                cpu = time.thread_time()
                while got < size:  # bounded: each call waits at most timeout_s
                    n = conn.recv_into(view[got:], size - got, socket.MSG_WAITALL)
                    if n == 0:
                        raise ConnectionError("the probe's sender closed early")
                    got += n
                received.append(time.thread_time() - cpu)
        except BaseException as exc:  # re-raised in the caller
            failed.append(exc)

    thread = threading.Thread(target=receive, daemon=True)
    try:
        with bed.inside():
            sender = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with sender:
            sender.bind((src, 0))
            sender.settimeout(timeout_s)
            thread.start()
            sender.connect((dst, 7000))
            before = cpu_counts()[0]
            sender.sendall(bytes(size))
            thread.join(timeout_s)
            after = cpu_counts()[0]
    finally:
        listener.close()
    if failed or not received:
        raise TestbedUnavailable(f"the transport probe failed: {failed or 'it timed out'}",
                                 field="testbed")  # fmt: skip
    return after - before, received[0]


# --------------------------------------------------------------------------- contention


def cpu_counts() -> tuple[float, float, float]:
    """The cores' busy and total seconds so far (``/proc/stat``), and the CPU seconds of this
    process and of its waited-for children (and theirs: a run's launcher and ranks)."""
    import resource

    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    own = sum(
        u.ru_utime + u.ru_stime
        for u in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    )
    return (sum(fields) - fields[3] - fields[4]) / ticks, sum(fields) / ticks, own  # fmt: skip


def others_share(before: Sequence[float], after: Sequence[float]) -> float:
    """The share of the machine's cores that processes other than this one and its children
    took between two :func:`cpu_counts`: what a testbed run, which needs the cores its quotas
    grant, competed with while it ran."""
    busy, total, own = (b - a for a, b in zip(before, after, strict=True))
    return max(0.0, busy - own) / max(total, 1e-9)


# --------------------------------------------------------------------------- leftovers


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(name: str) -> bool:
    found = _RUN_ID.match(name)
    return found is not None and not _alive(int(found.group(1)))


def leftovers(*, cgroup_root: Path = CGROUP_ROOT) -> Iterator[tuple[str, Path]]:
    """Every testbed namespace and cgroup there is: ``("netns" | "cgroup", path)``."""
    if NETNS_DIR.is_dir():
        for entry in sorted(NETNS_DIR.iterdir()):
            if entry.name.startswith(PREFIX):
                yield "netns", entry
    version = _cpu_controller(cgroup_root)
    if version is not None:
        base = _cgroup_base(cgroup_root, version)
        for entry in sorted(base.iterdir()):
            if entry.is_dir() and entry.name.startswith(PREFIX):
                yield "cgroup", entry


def cleanup(*, cgroup_root: Path = CGROUP_ROOT) -> list[str]:
    """Remove the namespaces and cgroups of testbed runs whose launcher is gone (killed
    runs); return their names. Runs still going are left alone."""
    removed = []
    for kind, path in list(leftovers(cgroup_root=cgroup_root)):
        if not _stale(path.name):
            continue
        if kind == "netns":
            _remove_netns(path.name)
        else:
            _remove_cgroup(path)
        removed.append(f"{kind} {path.name}")
    return removed
