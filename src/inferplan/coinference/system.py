"""The device-edge system: device, edge server, DNN layers, channel and the cost weights.

A :class:`System` turns into the two arrays every solver works with. For split stage
``n = 1..N+1`` (the device ran layers ``1..n-1`` and uploads ``I_n``)::

    eta_n(gamma) = a_n + b_n / log2(1 + gamma)
    a_n = beta_t * (sum_{i<n} L_i / f_l + sum_{i>=n} L_i / f_c)
        + beta_e * kappa * f_l^2 * sum_{i<n} L_i
    b_n = (beta_t + beta_e * P) * I_n / W

and the per-inference placement cost of the first ``M`` layers is
``c(M) = sum_{i<=M} m_i / (R_d K)``. Every default below is our choice (see docs/coinference.md
for the reasoning), not a value from the co-inference paper, whose parameters we do not have.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.coinference.channels import Chain, Channel, Discrete, Rayleigh, channel_sequence
from inferplan.coinference.pathloss import PathLoss
from inferplan.errors import InferplanError, InvalidArgument, InvalidSystem
from inferplan.profiles import Profile, load_profile
from inferplan.profiles.memory import need_table

__all__ = [
    "DEFAULT_BITS_PER_ELEMENT",
    "DEFAULT_BITS_PER_PARAM",
    "DEFAULT_CHANNEL",
    "DEFAULT_CYCLES_PER_FLOP",
    "DEFAULT_DEVICE",
    "DEFAULT_DOWNLINK_BPS",
    "DEFAULT_EDGE",
    "DEFAULT_ENERGY_WEIGHT",
    "DEFAULT_INFERENCES_PER_UPDATE",
    "DEFAULT_INPUT_BITS_PER_ELEMENT",
    "Device",
    "Edge",
    "Layers",
    "System",
    "default_system",
    "layers_from_profile",
    "mlp_layers",
]


def _check(value: float, name: str, *, positive: bool = True) -> float:
    value = float(value)
    ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        kind = "positive" if positive else "non-negative"
        raise InvalidSystem(f"must be a {kind} finite number, got {value!r}", field=name)
    return value


def _prefix(values: FloatArray) -> FloatArray:
    """``0, v_1, v_1 + v_2, ...`` (``inf`` once the sum passes floating point)."""
    return np.concatenate(([0.0], np.cumsum(values)))


def _weighted(weight: float, values: FloatArray) -> FloatArray:
    """``weight * values`` with a zero weight giving 0 even against ``inf``."""
    return np.zeros_like(values) if weight == 0.0 else weight * values


def _monomial(factors: Sequence[FloatArray | float], divisors: Sequence[float] = ()) -> FloatArray:
    """``prod(factors) / prod(divisors)`` of non-negative factors and positive divisors,
    elementwise, without spurious overflow or underflow: where the plain product leaves the
    float range although no factor is 0, it is recomputed from logarithms (so it is ``inf`` or
    0 only when the true value is beyond floating point)."""
    arrays = [np.asarray(f, dtype=np.float64) for f in factors]
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        plain = functools.reduce(np.multiply, arrays)
        for divisor in divisors:
            plain = plain / divisor
        nonzero = functools.reduce(np.logical_and, [f != 0.0 for f in arrays])
        redo = nonzero & ((plain == 0.0) | ~np.isfinite(plain))
        if np.any(redo):
            logs = sum(np.log(f) for f in arrays) - sum(math.log(d) for d in divisors)
            plain = np.where(redo, np.exp(logs), plain)
        plain = np.where(nonzero, plain, 0.0)  # a zero factor wins even over an inf product
    return np.asarray(plain, dtype=np.float64)


@dataclass(frozen=True)
class Device:
    """The wireless device (WD).

    Attributes
    ----------
    cpu_hz
        ``f_l``, CPU frequency (cycles/s).
    kappa
        Effective switched capacitance: energy per cycle is ``kappa * f_l^2`` (J).
    tx_power_w
        ``P``, uplink transmit power (W).
    bandwidth_hz
        ``W``, uplink bandwidth (Hz).
    memory
        The device's memory for the model (bytes; ``None``: unlimited): the layers placed
        there must fit it with their largest activation
        (:attr:`System.placement_needs`).
    """

    cpu_hz: float
    kappa: float
    tx_power_w: float
    bandwidth_hz: float
    memory: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_hz", _check(self.cpu_hz, "device.cpu_hz"))
        object.__setattr__(self, "kappa", _check(self.kappa, "device.kappa", positive=False))
        object.__setattr__(
            self, "tx_power_w", _check(self.tx_power_w, "device.tx_power_w", positive=False)
        )
        object.__setattr__(self, "bandwidth_hz", _check(self.bandwidth_hz, "device.bandwidth_hz"))
        if self.memory is not None:
            object.__setattr__(self, "memory",
                               _check(self.memory, "device.memory", positive=False))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cpu_hz": self.cpu_hz,
            "kappa": self.kappa,
            "tx_power_w": self.tx_power_w,
            "bandwidth_hz": self.bandwidth_hz,
        }
        if self.memory is not None:
            out["memory"] = self.memory
        return out


@dataclass(frozen=True)
class Edge:
    """The edge server: ``f_c``, its CPU frequency (cycles/s)."""

    cpu_hz: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_hz", _check(self.cpu_hz, "edge.cpu_hz"))

    def to_dict(self) -> dict[str, Any]:
        return {"cpu_hz": self.cpu_hz}


@dataclass(frozen=True)
class Layers:
    """The DNN as ``N`` layers.

    Attributes
    ----------
    cycles
        ``L_1..L_N``: CPU cycles of each layer (the same count on device and edge).
    input_bits
        ``I_1..I_{N+1}``: bits of each layer's input; ``I_1`` is the raw input and ``I_{N+1}``
        the output, which the edge needs (so a device-only run still uploads it).
    param_bits
        ``m_1..m_N``: bits of each layer's parameters (downloaded when the layer is placed).
    names
        Layer names (``layer1..layerN`` when not given).
    """

    cycles: tuple[float, ...]
    input_bits: tuple[float, ...]
    param_bits: tuple[float, ...]
    names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.cycles)
        if n == 0:
            raise InvalidSystem("must have at least one layer", field="layers.cycles")
        if len(self.input_bits) != n + 1:
            raise InvalidSystem(
                f"must have N + 1 = {n + 1} entries (one more than layers.cycles), "
                f"got {len(self.input_bits)}",
                field="layers.input_bits",
            )
        if len(self.param_bits) != n:
            raise InvalidSystem(
                f"must have N = {n} entries (as many as layers.cycles), got {len(self.param_bits)}",
                field="layers.param_bits",
            )
        names = tuple(self.names) or tuple(f"layer{i + 1}" for i in range(n))
        if len(names) != n:
            raise InvalidSystem(f"must name each of the {n} layers", field="layers.names")
        for key, positive in (("cycles", False), ("input_bits", True), ("param_bits", False)):
            values = tuple(
                _check(v, f"layers.{key}[{k}]", positive=positive)
                for k, v in enumerate(getattr(self, key))
            )
            object.__setattr__(self, key, values)
        object.__setattr__(self, "names", names)

    @property
    def n_layers(self) -> int:
        """``N``."""
        return len(self.cycles)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycles": list(self.cycles),
            "input_bits": list(self.input_bits),
            "param_bits": list(self.param_bits),
            "names": list(self.names),
        }


# Defaults: each is argued for in docs/coinference.md ("Defaults"). None comes from the paper.
DEFAULT_DEVICE = Device(cpu_hz=1.0e9, kappa=1.0e-28, tx_power_w=0.1, bandwidth_hz=2.0e6)
DEFAULT_EDGE = Edge(cpu_hz=2.0e10)
DEFAULT_DOWNLINK_BPS = 5.0e7
DEFAULT_INFERENCES_PER_UPDATE = 1000
DEFAULT_ENERGY_WEIGHT = 0.5
DEFAULT_CHANNEL: Channel = Rayleigh(mean_snr=10.0, min_snr=0.25)
DEFAULT_CYCLES_PER_FLOP = 0.25
DEFAULT_BITS_PER_ELEMENT = 32
DEFAULT_INPUT_BITS_PER_ELEMENT = 8
DEFAULT_BITS_PER_PARAM = 32


def layers_from_profile(
    profile: Profile | str,
    *,
    cycles_per_flop: float = DEFAULT_CYCLES_PER_FLOP,
    bits_per_element: float = DEFAULT_BITS_PER_ELEMENT,
    input_bits_per_element: float = DEFAULT_INPUT_BITS_PER_ELEMENT,
    bits_per_param: float = DEFAULT_BITS_PER_PARAM,
    profile_bits_per_element: float = 32,
) -> Layers:
    """Layers from a :class:`~inferplan.profiles.Profile` (or a built-in name / profile file).

    ``L_i = cycles_per_flop * Q_i``; activations are re-encoded: a profile stores bits computed
    with ``profile_bits_per_element`` (32 for the built-ins), so element counts are
    ``D_n / profile_bits_per_element``, then ``I_1`` uses ``input_bits_per_element`` (8-bit
    camera pixels by default) and ``I_2..I_{N+1}`` use ``bits_per_element`` (FP32 by default).
    ``m_i = bits_per_param * params_i``.

    Examples
    --------
    >>> layers = layers_from_profile("alexnet")
    >>> layers.n_layers, layers.input_bits[0]
    (8, 1204224.0)
    """
    if isinstance(profile, str):
        profile = load_profile(profile)
    for name, value in (
        ("cycles_per_flop", cycles_per_flop),
        ("bits_per_element", bits_per_element),
        ("input_bits_per_element", input_bits_per_element),
        ("bits_per_param", bits_per_param),
        ("profile_bits_per_element", profile_bits_per_element),
    ):
        if not (math.isfinite(value) and value > 0):
            raise InvalidArgument(f"must be a positive finite number, got {value!r}", field=name)
    elements = np.asarray(profile.activation_bits) / profile_bits_per_element
    bits = elements * bits_per_element
    bits[0] = elements[0] * input_bits_per_element
    return Layers(
        cycles=tuple(cycles_per_flop * q for q in profile.flops),
        input_bits=tuple(bits.tolist()),
        param_bits=tuple(float(bits_per_param * p) for p in profile.params),
        names=profile.blocks,
    )


def mlp_layers(
    width: int,
    depth: int,
    *,
    cycles_per_mac: float = 2 * DEFAULT_CYCLES_PER_FLOP,
    bytes_per_value: float = 4,
    bytes_per_param: float = 4,
) -> Layers:
    """The paper's equal-width MLP: ``L_i = a X^2``, ``I_i = 8 lambda X``, ``m_i = 8 mu (X+1) X``.

    ``a`` (the paper's alpha) is ``cycles_per_mac``, ``lambda`` is ``bytes_per_value`` and ``mu``
    ``bytes_per_param``; ``X = width`` and ``N = depth``.

    Examples
    --------
    >>> mlp_layers(100, 3).param_bits[0]
    323200.0
    """
    if width < 1 or depth < 1:
        raise InvalidArgument(f"an MLP needs width >= 1 and depth >= 1, got {width}, {depth}")
    x = float(width)
    return Layers(
        cycles=(cycles_per_mac * x * x,) * depth,
        input_bits=(8 * bytes_per_value * x,) * (depth + 1),
        param_bits=(8 * bytes_per_param * (x + 1) * x,) * depth,
        names=tuple(f"fc{k}" for k in range(1, depth + 1)),
    )


@dataclass(frozen=True)
class System:
    """A device-edge co-inference system (SI units, SNR linear).

    ``downlink_bps`` is the rate ``R_d``; a free-space link ``downlink``
    (:class:`~inferplan.coinference.pathloss.PathLoss`) replaces it by its Shannon rate.
    ``channel`` is one :class:`~inferplan.coinference.channels.Channel` (or frozen
    ``scipy.stats`` distribution) shared by every split stage, or a sequence of ``N + 1`` of
    them, one per stage. Construction checks that the expected upload cost is finite and raises
    :class:`~inferplan.errors.DivergentCost` otherwise. Use :func:`dataclasses.replace` to vary
    one parameter in a sweep.

    Examples
    --------
    >>> from inferplan.coinference import Discrete
    >>> channel = Discrete((1.0, 10.0), (0.5, 0.5))
    >>> s = System(DEFAULT_DEVICE, DEFAULT_EDGE, mlp_layers(64, 3), channel)
    >>> s.n_layers, len(s.channels)
    (3, 4)
    """

    device: Device
    edge: Edge
    layers: Layers
    channel: Channel | Sequence[Channel] | Any = DEFAULT_CHANNEL
    downlink_bps: float = DEFAULT_DOWNLINK_BPS
    inferences_per_update: int = DEFAULT_INFERENCES_PER_UPDATE
    energy_weight: float = DEFAULT_ENERGY_WEIGHT
    downlink: PathLoss | None = field(default=None, compare=False)
    channels: tuple[Channel, ...] = field(init=False, repr=False, compare=False)
    chain: Chain | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rate = self.downlink.rate_bps() if self.downlink is not None else self.downlink_bps
        object.__setattr__(self, "downlink_bps", _check(rate, "downlink_bps"))
        k = self.inferences_per_update
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise InvalidSystem(
                f"must be an integer >= 1, got {k!r}", field="inferences_per_update"
            )
        if k > sys.float_info.max:
            raise InvalidSystem(
                f"must be at most {sys.float_info.max:.4g}, got an integer of {len(str(k))} digits",
                field="inferences_per_update",
            )
        object.__setattr__(self, "inferences_per_update", int(k))
        w = float(self.energy_weight)
        if not (0.0 <= w <= 1.0):
            raise InvalidSystem(f"must be in [0, 1], got {w!r}", field="energy_weight")
        object.__setattr__(self, "energy_weight", w)
        channels = channel_sequence(self.channel, self.layers.n_layers + 1)
        per_stage = len({id(ch) for ch in channels}) > 1
        object.__setattr__(self, "channel", channels if per_stage else channels[0])
        object.__setattr__(self, "channels", channels)
        for n, ch in enumerate(channels):
            try:
                ch.mean_inv_log()
            except InferplanError as exc:
                if per_stage:
                    exc.field = f"channel[{n}]"
                    exc.args = (str(exc),)
                raise
        object.__setattr__(self, "chain", None)
        if any(ch.memory for ch in channels):
            self._with_memory(channels, per_stage)

    def _with_memory(self, channels: tuple[Channel, ...], per_stage: bool) -> None:
        """A channel with memory: its chain, and its marginals as the channel of each stage."""
        if per_stage:
            n = next(n for n, ch in enumerate(channels) if ch.memory)
            raise InvalidSystem(
                f"a channel with memory ({channels[n].kind}) describes every stage: give it "
                "once, not in a list of one channel per stage",
                field=f"channel[{n}]",
            )
        try:
            chain = channels[0].chain(self.stage_intervals)
        except InferplanError as exc:
            exc.field = f"channel.{exc.field}" if exc.field else "channel"
            exc.args = (str(exc),)
            raise
        assert chain is not None
        snr = tuple(chain.snr.tolist())
        marginals = tuple(Discrete(snr, tuple(p.tolist())) for p in chain.marginals)
        for n, marginal in enumerate(marginals, start=1):
            try:
                marginal.mean_inv_log()
            except InferplanError as exc:
                exc.message = f"at split stage {n}: {exc.message}"
                exc.args = (str(exc),)
                raise
        object.__setattr__(self, "chain", chain)
        object.__setattr__(self, "channels", marginals)

    @property
    def memory_channel(self) -> Channel:
        """The channel with memory the system was given (``channels`` holds its marginals).

        Raises
        ------
        InvalidArgument
            If the channel has no memory.
        """
        if self.chain is None or not isinstance(self.channel, Channel):
            raise InvalidArgument("the system's channel has no memory")
        return self.channel

    @property
    def stage_intervals(self) -> tuple[float, ...]:
        """``dt_1..dt_N``: the device's compute time of each layer, the time between the SNR
        observations at stages ``n`` and ``n + 1``."""
        f_l = self.device.cpu_hz
        return tuple(cycles / f_l for cycles in self.layers.cycles)

    @property
    def n_layers(self) -> int:
        """``N``."""
        return self.layers.n_layers

    @property
    def time_weight(self) -> float:
        """``beta_t = 1 - beta_e``."""
        return 1.0 - self.energy_weight

    @functools.cached_property
    def stage_costs(self) -> tuple[FloatArray, FloatArray]:
        """``(a, b)`` with ``eta_n(gamma) = a[n-1] + b[n-1] / log2(1 + gamma)``, ``n = 1..N+1``.

        Each layer's time and energy is computed first and then summed, so an intermediate
        (``sum L_i``, ``f_l^2``) beyond floating point does not spoil a representable cost; a
        cost that is itself beyond floating point is ``inf``.
        """
        cycles = np.asarray(self.layers.cycles)
        f_l, f_c = self.device.cpu_hz, self.edge.cpu_hz
        bt, be = self.time_weight, self.energy_weight
        with np.errstate(over="ignore"):
            local = _prefix(cycles / f_l)  # sum_{i<n} L_i / f_l, n = 1..N+1
            remote = _prefix(cycles[::-1] / f_c)[::-1]  # sum_{i>=n} L_i / f_c
            energy = _prefix(_monomial([self.device.kappa, f_l, f_l, cycles]))
            a = _weighted(bt, local + remote) + _weighted(be, energy)
        weight = bt + be * self.device.tx_power_w
        b = _monomial([weight, np.asarray(self.layers.input_bits)], [self.device.bandwidth_hz])
        a.flags.writeable = False
        b.flags.writeable = False
        return a, b

    @functools.cached_property
    def placement_costs(self) -> FloatArray:
        """``c(M) = sum_{i<=M} m_i / (R_d K)`` for ``M = 0..N``; ``inf`` for a placement
        whose layers do not fit the device's memory (so every planner's ``Z(M)`` rules it
        out)."""
        download = _monomial(
            [np.asarray(self.layers.param_bits)],
            [self.downlink_bps, float(self.inferences_per_update)],
        )
        with np.errstate(over="ignore"):
            out = _prefix(download)
        if self.device.memory is not None:
            out[1:][self.placement_needs[1:] > self.device.memory] = np.inf
        out.flags.writeable = False
        return out

    @functools.cached_property
    def placement_needs(self) -> FloatArray:
        """The device's memory need with ``M = 0..N`` layers placed (bytes): their parameters
        and the largest input and output activation of one of them
        (:func:`~inferplan.profiles.memory.need_table`); ``M = 0`` downloads nothing."""
        params = np.asarray(self.layers.param_bits, dtype=np.float64) / 8
        need: FloatArray = need_table(params.tolist(), self.layers.input_bits)[0].copy()
        need[0] = 0.0
        need.flags.writeable = False
        return need

    def check_placement(self, placement: int) -> int:
        """``placement`` as an ``M`` in ``0..N``.

        Raises
        ------
        InvalidArgument
            If it is not an integer in that range.
        """
        if isinstance(placement, bool) or not isinstance(placement, int | np.integer):
            raise InvalidArgument(f"placement must be an integer, got {placement!r}")
        if not 0 <= placement <= self.n_layers:
            raise InvalidArgument(f"placement must be in 0..{self.n_layers}, got {placement}")
        return int(placement)

    def eta(self, stage: int, snr: FloatArray | float) -> FloatArray | float:
        """``eta_n(gamma)``, the energy-time cost of splitting at ``stage`` under SNR ``snr``."""
        if not 1 <= stage <= self.n_layers + 1:
            raise InvalidArgument(f"stage must be in 1..{self.n_layers + 1}, got {stage}")
        a, b = self.stage_costs
        return a[stage - 1] + b[stage - 1] * math.log(2.0) / np.log1p(snr)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """The system in the system-file format (explicit layers)."""
        channels = (self.memory_channel,) if self.chain is not None else self.channels
        shared = all(ch is channels[0] for ch in channels)
        return {
            "device": self.device.to_dict(),
            "edge": self.edge.to_dict(),
            **(
                {"downlink": self.downlink.to_dict()}
                if self.downlink is not None
                else {"downlink_bps": self.downlink_bps}
            ),
            "inferences_per_update": self.inferences_per_update,
            "energy_weight": self.energy_weight,
            "channel": channels[0].to_dict() if shared else [ch.to_dict() for ch in channels],
            "layers": self.layers.to_dict(),
        }


def default_system(profile: Profile | str = "alexnet", **overrides: Any) -> System:
    """The documented default system around a profile; keyword arguments replace fields.

    Examples
    --------
    >>> default_system().n_layers
    8
    >>> default_system("vgg16", energy_weight=0.2).energy_weight
    0.2
    """
    fields: dict[str, Any] = {
        "device": DEFAULT_DEVICE,
        "edge": DEFAULT_EDGE,
        "layers": layers_from_profile(profile),
        "channel": DEFAULT_CHANNEL,
        "downlink_bps": DEFAULT_DOWNLINK_BPS,
        "inferences_per_update": DEFAULT_INFERENCES_PER_UPDATE,
        "energy_weight": DEFAULT_ENERGY_WEIGHT,
        "downlink": None,
    }
    unknown = set(overrides) - set(fields)
    if unknown:
        raise InvalidArgument(f"unknown system field(s): {', '.join(sorted(unknown))}")
    fields.update(overrides)
    return System(**fields)
