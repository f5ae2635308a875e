"""The co-inference commands: the JSON contracts, readable output and one-line errors."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

from inferplan.coinference import STRATEGIES, SplitPolicy, load_system, plan_placement, simulate
from tests.cli import app, runner
from tests.cli import invoke_json as _json

EXAMPLE = Path(__file__).parents[2] / "examples" / "system.yaml"


@pytest.mark.parametrize("method", ["optimal", "1sla", "hybrid"])
def test_coinfer_json_contract(method):
    out = _json(["coinfer", str(EXAMPLE), "--method", method, "--json"])
    assert set(out) == {"method", "placement", "expected_cost", "costs", "thresholds"}
    assert out == json.loads(
        json.dumps(plan_placement(load_system(EXAMPLE), method=method).to_dict())
    )
    assert len(out["costs"]) == 9 and len(out["thresholds"]) == out["placement"]
    assert out["expected_cost"] == out["costs"][out["placement"]]


def test_coinfer_table_and_policy_file(tmp_path):
    policy = tmp_path / "policy.json"
    result = runner.invoke(app, ["coinfer", str(EXAMPLE), "--policy-out", str(policy)])
    assert result.exit_code == 0
    assert "place 5 of 8 layers" in result.stdout and "after conv5+pool" in result.stdout
    assert SplitPolicy.from_json(policy.read_text()).placement == 5


def test_coinfer_simulate_json():
    out = _json(
        [
            "coinfer-simulate",
            str(EXAMPLE),
            "--strategy",
            "optimal",
            "--strategy",
            "edge-only",
            "--inferences",
            "3000",
            "--seed",
            "9",
            "--json",
        ]
    )
    assert out["inferences"] == 3000 and out["seed"] == 9
    assert list(out["strategies"]) == ["optimal", "edge-only"]
    api = simulate(load_system(EXAMPLE), ["optimal", "edge-only"], inferences=3000, seed=9)
    assert out == json.loads(json.dumps(api.to_dict()))


def test_coinfer_simulate_table():
    result = runner.invoke(app, ["coinfer-simulate", str(EXAMPLE), "--inferences", "2000"])
    assert result.exit_code == 0
    for name in STRATEGIES:
        assert name in result.stdout


def test_errors_are_one_line_with_exit_code_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("mean_snr: 10.0, min_snr: 0.25", "mean_snr: 10.0"))
    result = runner.invoke(app, ["coinfer", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {bad}: channel: E[1/log2(1+SNR)] is infinite")
    assert result.stderr.count("\n") == 1
    missing = runner.invoke(app, ["coinfer-simulate", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 2 and "file not found" in missing.stderr


def test_nakagami_with_m_just_above_one_plans_finitely(tmp_path):
    sys_file = tmp_path / "sys.yaml"
    sys_file.write_text(
        EXAMPLE.read_text().replace(
            "{kind: rayleigh, mean_snr: 10.0, min_snr: 0.25}",
            "{kind: nakagami, m: 1.01, mean_snr: 10}",
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _json(["coinfer", str(sys_file), "--method", "optimal", "--json"])
    assert all(isinstance(z, float) and math.isfinite(z) for z in out["costs"])
    assert out["expected_cost"] == min(out["costs"])


@pytest.mark.parametrize(
    ("channel", "message"),
    [
        ("{kind: lognormal, mean_db: 10, sigma_db: 200}", "channel.sigma_db: must be at most"),
        ("{kind: rayleigh, mean_snr: 1e300, min_snr: 0.1}", "channel.mean_snr: must be a linear"),
        ("rayleigh", "channel: must be a mapping like {kind: rayleigh"),
    ],
)
def test_bad_channel_is_one_line_with_exit_code_2(tmp_path, channel, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        EXAMPLE.read_text().replace("{kind: rayleigh, mean_snr: 10.0, min_snr: 0.25}", channel)
    )
    result = runner.invoke(app, ["coinfer", str(bad), "--json"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {bad}: {message}")
    assert result.stderr.count("\n") == 1


def test_negative_seed_is_a_usage_error():
    result = runner.invoke(app, ["coinfer-simulate", str(EXAMPLE), "--seed", "-1"])
    assert result.exit_code == 2
    assert "--seed" in result.stderr and "Traceback" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
