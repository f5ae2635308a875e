"""The co-inference commands on channels with memory, and ``coinfer-fit``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inferplan.coinference import (
    Markov,
    fit_markov,
    load_system,
    plan_placement,
    policy_from_json,
    system_from_dict,
)
from inferplan.documents import read_document
from tests.cli import app, runner
from tests.cli import invoke_json as _json

EXAMPLES = Path(__file__).parents[2] / "examples"
MARKOV = EXAMPLES / "system-markov.yaml"
GAUSS_MARKOV = EXAMPLES / "system-gauss-markov.yaml"


@pytest.mark.parametrize("example", [MARKOV, GAUSS_MARKOV])
def test_coinfer_reads_channels_with_memory(example, tmp_path):
    policy = tmp_path / "policy.json"
    out = _json(["coinfer", str(example), "--json", "--policy-out", str(policy)])
    plan = plan_placement(load_system(example))
    assert out == json.loads(json.dumps(plan.to_dict()))
    assert len(out["state_thresholds"]) == out["placement"]
    assert policy_from_json(policy.read_text()) == plan.policy()
    table = runner.invoke(app, ["coinfer", str(example)])
    assert table.exit_code == 0 and "upload if SNR >=" in table.stdout
    sim = _json(["coinfer-simulate", str(example), "--inferences", "2000", "--json"])
    assert sim["strategies"]["optimal"]["analytic_cost"] == pytest.approx(plan.expected_cost)


def test_the_issue_example_is_read_as_given():
    system = load_system(MARKOV)
    ch = system.channel
    assert isinstance(ch, Markov)
    assert ch.snr == (0.5, 3.0, 12.0) and ch.initial == (0.3, 0.4, 0.3)
    data = read_document(MARKOV)
    del data["channel"]["initial"]
    stationary = system_from_dict(data).channel
    assert isinstance(stationary, Markov)
    # Detailed balance of this birth-death chain: 0.2 pi_0 = 0.1 pi_1, 0.1 pi_1 = 0.2 pi_2.
    assert stationary.law == pytest.approx((0.25, 0.5, 0.25), rel=1e-12)


def test_coinfer_fit_writes_a_channel_a_system_file_reads(tmp_path):
    rng = np.random.default_rng(1)
    trace = tmp_path / "trace.csv"
    values = np.repeat(rng.exponential(10.0, 400) + 0.25, 5)  # each value held 5 steps
    trace.write_text("snr\n" + "\n".join(repr(float(v)) for v in values) + "\n")
    out = tmp_path / "channel.yaml"
    printed = _json(["coinfer-fit", str(trace), "--states", "4", "--out", str(out), "--json"])
    assert printed == read_document(out)
    fitted = fit_markov(values, 4)
    assert printed == json.loads(json.dumps(fitted.to_dict()))
    # Held values: a state is left at most once in five steps.
    assert min(fitted.transition[k][k] for k in range(4)) >= 0.75  # type: ignore[index]
    system = read_document(MARKOV)
    system["channel"] = printed
    assert system_from_dict(system).chain is not None
    given = _json(["coinfer-fit", str(trace), "--boundaries", "2,8", "--json"])
    assert given["boundaries"] == [2.0, 8.0] and len(given["snr"]) == 3
    table = runner.invoke(app, ["coinfer-fit", str(trace), "--states", "3"])
    assert table.exit_code == 0 and "SNR range" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--states", "40"], "too short to fit 40 states"),
        (["--boundaries", "1,x"], "--boundaries: must be SNRs separated by commas"),
        (["--boundaries", "5,2"], "--boundaries: must be increasing"),
        ([], "--states: give the number of states"),
    ],
)
def test_coinfer_fit_errors_are_one_line(tmp_path, args, message):
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(str(v) for v in range(1, 30)) + "\n")
    result = runner.invoke(app, ["coinfer-fit", str(trace), *args])
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("channel", "message"),
    [
        ("{kind: markov, snr: [1, 2], transition: [[0.5, 0.6], [0.5, 0.5]]}",
         "channel.transition[0]: row of state 0 must sum to 1"),
        ("{kind: gauss-markov, mean_snr: 10, min_snr: 0.25, rho: 1.01}",
         "channel.rho: must be a correlation in [-1, 1]"),
        ("{kind: gauss-markov, mean_snr: 10, min_snr: 0.25}", "channel.rho: give either"),
        ("{kind: markov, snr: [1, 2], transition: [[[0.5, 0.5], [0.5, 0.5]]], initial: [1, 0]}",
         "channel.transition: must give one matrix per step"),
    ],
)  # fmt: skip
def test_bad_memory_channels_in_files(tmp_path, channel, message):
    bad = tmp_path / "bad.yaml"
    text = MARKOV.read_text()
    start = text.index("channel: {")
    end = text.index("\n", start)
    bad.write_text(text[:start] + f"channel: {channel}" + text[end:])
    result = runner.invoke(app, ["coinfer", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {bad}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1
