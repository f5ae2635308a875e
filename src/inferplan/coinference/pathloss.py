"""Links from free-space path loss: the downlink rate that places the model, the uplink's mean SNR.

The base station sends the placed layers at the Shannon rate of a free-space link::

    R_d = W_d log2(1 + P G_t G_r (c / (4 pi d f_c))^2 / (N_0 W_d))

and the device's distance may drive the uplink's mean SNR the same way (its power ``P`` and
bandwidth ``W``): ``P G_t G_r (c / (4 pi d f_c))^2 / (N_0 W)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from inferplan.coinference.channels import positive as _positive

__all__ = ["THERMAL_NOISE_W_PER_HZ", "PathLoss", "free_space_gain"]

THERMAL_NOISE_W_PER_HZ = 3.98e-21
"""``N_0`` at 290 K: ``k T = 1.380649e-23 * 290`` W/Hz (-174 dBm/Hz)."""

_SPEED_OF_LIGHT = 299_792_458.0


def free_space_gain(distance_m: float, carrier_hz: float) -> float:
    """``(c / (4 pi d f_c))^2``, the free-space power gain (Friis, isotropic antennas).

    Examples
    --------
    >>> round(-10 * math.log10(free_space_gain(100.0, 2.4e9)), 2)   # dB of path loss
    80.05
    """
    return (_SPEED_OF_LIGHT / (4.0 * math.pi * distance_m * carrier_hz)) ** 2


@dataclass(frozen=True)
class PathLoss:
    """A free-space link from the base station to the device (``downlink`` in a system file).

    Attributes
    ----------
    tx_power_w
        ``P``, the base station's transmit power (W).
    distance_m
        ``d``, the device's distance from the base station (m).
    carrier_hz
        ``f_c``, the carrier frequency (Hz).
    bandwidth_hz
        ``W_d``, the downlink bandwidth (Hz).
    noise_density_w_per_hz
        ``N_0`` (W/Hz), thermal noise at 290 K by default.
    tx_gain, rx_gain
        ``G_t``, ``G_r``: linear antenna gains (1: isotropic).

    Examples
    --------
    >>> link = PathLoss(tx_power_w=1.0, distance_m=100.0, carrier_hz=2.4e9, bandwidth_hz=2e7)
    >>> round(link.snr(), 1), round(link.rate_bps() / 1e6, 1)
    (124132.7, 338.4)
    """

    tx_power_w: float
    distance_m: float
    carrier_hz: float
    bandwidth_hz: float
    noise_density_w_per_hz: float = THERMAL_NOISE_W_PER_HZ
    tx_gain: float = 1.0
    rx_gain: float = 1.0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            object.__setattr__(self, name, _positive(getattr(self, name), name))

    def received_w(self, tx_power_w: float | None = None) -> float:
        """Received power (W) of ``tx_power_w`` (the base station's by default) over the link."""
        power = self.tx_power_w if tx_power_w is None else tx_power_w
        return (
            power * self.tx_gain * self.rx_gain * free_space_gain(self.distance_m, self.carrier_hz)
        )

    def snr(self, *, tx_power_w: float | None = None, bandwidth_hz: float | None = None) -> float:
        """``P G_t G_r (c / (4 pi d f_c))^2 / (N_0 W)``: the downlink's SNR, or with the device's
        power and bandwidth the uplink's mean SNR at the same distance."""
        width = self.bandwidth_hz if bandwidth_hz is None else bandwidth_hz
        return self.received_w(tx_power_w) / (self.noise_density_w_per_hz * width)

    def rate_bps(self) -> float:
        """``R_d = W_d log2(1 + SNR)``."""
        return self.bandwidth_hz * math.log2(1.0 + self.snr())

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
