"""The downlink (and the uplink's mean SNR) from free-space path loss."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from inferplan.coinference import Rayleigh, default_system, load_system, plan_placement
from inferplan.coinference.pathloss import PathLoss, free_space_gain
from inferplan.documents import read_document, write_document
from inferplan.errors import InvalidSystem
from tests.cli import app, runner

EXAMPLE = Path(__file__).parents[2] / "examples" / "system.yaml"


def test_rates_against_hand_computed_link_budgets():
    # 100 m at 2.4 GHz: free-space loss 20 log10(100) + 20 log10(2.4e9) - 147.55 = 80.05 dB.
    assert -10 * math.log10(free_space_gain(100.0, 2.4e9)) == pytest.approx(80.052, abs=1e-3)
    # 30 dBm - 80.052 dB - (-174.0 dBm/Hz + 73.01 dB(20 MHz)) = 50.94 dB -> 124 133.
    link = PathLoss(tx_power_w=1.0, distance_m=100.0, carrier_hz=2.4e9, bandwidth_hz=2e7)
    assert link.snr() == pytest.approx(124_133, rel=1e-4)
    assert link.rate_bps() == pytest.approx(2e7 * math.log2(1 + 124_133), rel=1e-5)
    # Gains multiply the received power; 10x the distance is 20 dB less.
    far = PathLoss(1.0, 1000.0, 2.4e9, 2e7, tx_gain=4.0, rx_gain=2.5)
    assert far.snr() == pytest.approx(link.snr() / 100 * 10, rel=1e-12)
    # The uplink at the same distance: 0.1 W over 2 MHz is the same SNR as 1 W over 20 MHz.
    assert link.snr(tx_power_w=0.1, bandwidth_hz=2e6) == pytest.approx(link.snr(), rel=1e-12)
    s = default_system(downlink=link)
    assert s.downlink_bps == link.rate_bps()
    assert s.placement_costs[1] == pytest.approx(s.layers.param_bits[0] / link.rate_bps() / 1000)


def test_a_system_file_gives_the_downlink_and_the_uplink_from_distance(tmp_path):
    data = read_document(EXAMPLE)
    del data["downlink_bps"]
    data["downlink"] = {"tx_power_w": 1.0, "distance_m": 300.0, "carrier_hz": 2.4e9,
                        "bandwidth_hz": 2e7}  # fmt: skip
    data["channel"] = {"kind": "rayleigh", "mean_snr": "path-loss", "min_snr": 0.25}
    path = tmp_path / "system.yaml"
    write_document(data, path)
    system = load_system(path)
    link = PathLoss(1.0, 300.0, 2.4e9, 2e7)
    assert system.downlink == link and system.downlink_bps == link.rate_bps()
    assert system.channel == Rayleigh(link.snr(tx_power_w=0.1, bandwidth_hz=2e6), 0.25)
    out = runner.invoke(app, ["coinfer", str(path), "--json"])
    assert out.exit_code == 0
    # Nearer devices get a better uplink: the planner places fewer layers (M* against distance).
    near = [plan_placement(default_system(downlink=PathLoss(1.0, d, 2.4e9, 2e7),
                           channel=Rayleigh(PathLoss(1.0, d, 2.4e9, 2e7).snr(), 0.25))).placement
            for d in (10.0, 10_000.0)]  # fmt: skip
    assert near[0] < near[1]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(downlink={"tx_power_w": 1.0, "distance_m": 100.0,
                                      "carrier_hz": 2.4e9, "bandwidth_hz": 2e7}),
         "downlink_bps: give exactly one of"),
        (lambda d: d.pop("downlink_bps"), "downlink_bps: give exactly one of"),
        (lambda d: d.update(channel={"kind": "rayleigh", "mean_snr": "path-loss"}),
         "channel.mean_snr: 'path-loss' needs the downlink"),
        (lambda d: (d.pop("downlink_bps"), d.update(downlink={
            "tx_power_w": 1.0, "distance_m": -5.0, "carrier_hz": 2.4e9, "bandwidth_hz": 2e7})),
         "downlink.distance_m: must be a positive finite number"),
    ],
)  # fmt: skip
def test_bad_downlinks_are_one_line(tmp_path, edit, message):
    data = read_document(EXAMPLE)
    edit(data)
    path = tmp_path / "bad.yaml"
    write_document(data, path)
    result = runner.invoke(app, ["coinfer", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_path_loss_parameters_are_checked():
    with pytest.raises(InvalidSystem, match="carrier_hz"):
        PathLoss(1.0, 100.0, 0.0, 2e7)
