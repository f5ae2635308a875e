"""System files: the contract, the channel kinds, and one-line errors naming file and field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from inferplan.coinference import (
    Discrete,
    Nakagami,
    Trace,
    default_system,
    layers_from_profile,
    load_system,
    save_system,
    system_from_dict,
)
from inferplan.errors import DivergentCost, InvalidSystem
from inferplan.profiles import alexnet

EXAMPLES = Path(__file__).parents[2] / "examples"

BASE = {
    "device": {"cpu_hz": 1.0e9, "kappa": 1.0e-28, "tx_power_w": 0.1, "bandwidth_hz": 2.0e6},
    "edge": {"cpu_hz": 2.0e10},
    "downlink_bps": 5.0e7,
    "inferences_per_update": 1000,
    "energy_weight": 0.5,
    "channel": {"kind": "discrete", "snr": [0.5, 2.0, 10.0], "prob": [0.2, 0.5, 0.3]},
    "layers": {"cycles": [2e7, 4e7], "input_bits": [1e6, 5e5, 1e4], "param_bits": [1e5, 2e6]},
}


def _with(path: str, value: object) -> dict:
    data = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return data


_DELETE = object()


def _write(tmp_path: Path, data: dict, name: str = "system.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_examples_load():
    system = load_system(EXAMPLES / "system.yaml")
    assert system == default_system("alexnet")
    small = load_system(EXAMPLES / "system-small.yaml")
    assert small.n_layers == 3 and isinstance(small.channel, Discrete)


def test_contract_fields(tmp_path):
    system = load_system(_write(tmp_path, BASE))
    assert system.device.bandwidth_hz == 2.0e6 and system.edge.cpu_hz == 2.0e10
    assert system.inferences_per_update == 1000 and system.time_weight == 0.5
    assert system.layers.input_bits == (1e6, 5e5, 1e4)
    assert system.channel == Discrete((0.5, 2.0, 10.0), (0.2, 0.5, 0.3))


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_round_trip(tmp_path, suffix):
    system = default_system("alexnet", channel=Nakagami(2.0, 8.0, min_snr=0.5))
    path = tmp_path / f"s{suffix}"
    save_system(system, path)
    assert load_system(path) == system


def test_channel_kinds_and_per_stage_list(tmp_path):
    (tmp_path / "snr.csv").write_text("snr\n1.5\n3.0, extra\n\n3.0\n")
    kinds = [
        {"kind": "rayleigh", "mean_snr": 10.0, "min_snr": 0.1},
        {"kind": "nakagami", "m": 2.0, "mean_snr": 10.0},
        {"kind": "trace", "file": "snr.csv"},
    ]
    system = load_system(_write(tmp_path, _with("channel", kinds)))
    assert [ch.kind for ch in system.channels] == ["rayleigh", "nakagami", "trace"]
    assert system.channels[2] == Trace((1.5, 3.0, 3.0))
    lognormal = load_system(
        _write(tmp_path, _with("channel", {"kind": "lognormal", "mean_db": 10, "sigma_db": 6}))
    )
    assert lognormal.channel.kind == "lognormal"


def test_profile_layers_with_conversion_settings(tmp_path):
    data = _with(
        "layers", {"profile": "alexnet", "cycles_per_flop": 0.5, "input_bits_per_element": 32}
    )
    system = load_system(_write(tmp_path, data))
    profile = alexnet()
    assert system.layers.cycles == tuple(0.5 * q for q in profile.flops)
    assert system.layers.input_bits == profile.activation_bits
    assert system.layers.param_bits == tuple(32.0 * p for p in profile.params)
    short = _with("layers", _DELETE)
    short["profile"] = "alexnet"
    assert load_system(_write(tmp_path, short)).layers == layers_from_profile("alexnet")


def test_eight_bit_input_and_32_bit_activations():
    layers = layers_from_profile("alexnet")
    assert layers.input_bits[0] == 3 * 224 * 224 * 8
    assert layers.input_bits[1] == 64 * 27 * 27 * 32
    assert layers.input_bits[-1] == 1000 * 32


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("device.cpu_hz", _DELETE, "device.cpu_hz: missing field"),
        ("edge", _DELETE, "edge: missing field"),
        ("channel", _DELETE, "channel: missing field"),
        ("energy_weight", _DELETE, "energy_weight: missing field"),
        ("layers.param_bits", _DELETE, "layers.param_bits: missing field"),
        (
            "device.bandwidth_hz",
            -2.0e6,
            "device.bandwidth_hz: must be a positive finite number, got -2000000.0",
        ),
        ("downlink_bps", -1.0, "downlink_bps: must be a positive finite number, got -1.0"),
        ("edge.cpu_hz", 0, "edge.cpu_hz: must be a positive finite number, got 0.0"),
        ("device.tx_power_w", -0.1, "device.tx_power_w: must be a non-negative finite number"),
        ("energy_weight", 1.5, "energy_weight: must be in [0, 1], got 1.5"),
        ("inferences_per_update", 0, "inferences_per_update: must be an integer >= 1, got 0"),
        ("channel.prob", [0.2, 0.5, 0.2], "channel.prob: must sum to 1, got 0.9"),
        (
            "channel.prob",
            [0.5, 0.5],
            "channel.prob: must give one probability per SNR level (3), got 2",
        ),
        ("channel.kind", "rician", "channel.kind: unknown channel kind 'rician'"),
        ("channel.mean_snr", 3.0, "channel.mean_snr: unknown field"),
        (
            "layers.input_bits",
            [1e6, 5e5],
            "layers.input_bits: must have N + 1 = 3 entries (one more than layers.cycles), got 2",
        ),
        (
            "layers.param_bits",
            [1e5],
            "layers.param_bits: must have N = 2 entries (as many as layers.cycles), got 1",
        ),
        ("layers.cycles", [2e7, -4e7], "layers.cycles[1]: must be a non-negative finite number"),
        ("layers.extra", 1, "layers.extra: unknown field"),
        # Strict numbers: YAML booleans and quoted numbers are mistakes.
        (
            "inferences_per_update",
            True,
            "inferences_per_update: Input should be a valid integer, got True",
        ),
        (
            "inferences_per_update",
            "1000",
            "inferences_per_update: Input should be a valid integer, got '1000'",
        ),
        ("downlink_bps", "5e7", "downlink_bps: Input should be a valid number, got '5e7'"),
        ("device.cpu_hz", False, "device.cpu_hz: Input should be a valid number, got False"),
        ("energy_weight", True, "energy_weight: Input should be a valid number, got True"),
        (
            "channel.prob",
            [0.2, True, 0.3],
            "channel.prob[1]: Input should be a valid number, got True",
        ),
        (
            "layers.cycles",
            [2e7, "4e7"],
            "layers.cycles[1]: Input should be a valid number, got '4e7'",
        ),
        (
            "channel",
            "rayleigh",
            "channel: must be a mapping like {kind: rayleigh, mean_snr: 10.0, min_snr: 0.25} or "
            "a list of them, got 'rayleigh'",
        ),
        (
            "channel",
            [{"kind": "rayleigh", "mean_snr": 1.0, "min_snr": 0.1}, "rayleigh", None],
            "channel[1]: must be a mapping like {kind: rayleigh, mean_snr: 10.0, min_snr: 0.25}, "
            "got 'rayleigh'",
        ),
        (
            "channel",
            {"kind": "nakagami", "m": 2, "mean_snr": True},
            "channel.mean_snr: Input should be a valid number, got True",
        ),
        (
            "channel",
            {"kind": "lognormal", "mean_db": 10, "sigma_db": 200},
            "channel.sigma_db: must be at most 50 dB",
        ),
        (
            "channel",
            {"kind": "rayleigh", "mean_snr": 1e300, "min_snr": 0.1},
            "channel.mean_snr: must be a linear SNR in [1e-15, 1e+15]",
        ),
    ],
)
def test_bad_system_files(tmp_path, path, value, message):
    file = _write(tmp_path, _with(path, value))
    with pytest.raises(InvalidSystem) as info:
        load_system(file)
    assert str(info.value) == f"{file}: {message}" or str(info.value).startswith(
        f"{file}: {message}"
    )
    assert "\n" not in str(info.value)


def test_channel_list_of_wrong_length(tmp_path):
    file = _write(tmp_path, _with("channel", [BASE["channel"]] * 2))
    with pytest.raises(
        InvalidSystem, match=r"channel: must give one channel per split stage \(N \+ 1 = 3\), got 2"
    ):
        load_system(file)


def test_divergent_channel_in_file(tmp_path):
    file = _write(tmp_path, _with("channel", {"kind": "rayleigh", "mean_snr": 10.0}))
    with pytest.raises(DivergentCost) as info:
        load_system(file)
    assert str(info.value).startswith(f"{file}: channel: E[1/log2(1+SNR)] is infinite")


def test_bad_trace_file(tmp_path):
    (tmp_path / "snr.csv").write_text("1.0\n2.0\noops\n")
    file = _write(tmp_path, _with("channel", {"kind": "trace", "file": "snr.csv"}))
    with pytest.raises(InvalidSystem, match=r"snr.csv: line 3: not a number: 'oops'"):
        load_system(file)
    missing = _write(tmp_path, _with("channel", {"kind": "trace", "file": "nope.csv"}))
    with pytest.raises(InvalidSystem) as info:
        load_system(missing)
    assert str(info.value).startswith(f"{missing}: channel.file: cannot read trace file")
    listed = _write(tmp_path, _with("channel", [{"kind": "trace", "file": "nope.csv"}] * 3))
    with pytest.raises(InvalidSystem) as info:
        load_system(listed)
    assert str(info.value).startswith(f"{listed}: channel[0].file: cannot read trace file")


def test_ints_are_accepted_where_floats_are_expected(tmp_path):
    data = _with("device.cpu_hz", 1_000_000_000)
    data["energy_weight"] = 1
    data["channel"] = {"kind": "nakagami", "m": 2, "mean_snr": 10}
    system = load_system(_write(tmp_path, data))
    assert system.device.cpu_hz == 1e9 and system.energy_weight == 1.0
    assert system.channels[0] == Nakagami(2.0, 10.0)


def test_layers_and_profile_together(tmp_path):
    data = copy.deepcopy(BASE)
    data["profile"] = "alexnet"
    with pytest.raises(InvalidSystem, match="layers: give exactly one of 'layers' and 'profile'"):
        system_from_dict(data, source="x.yaml")
