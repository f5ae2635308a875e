"""Every command-line mistake is one line on stderr starting ``error:``, exit code 2; sizes are
checked before any work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inferplan.coinference import STRATEGIES
from inferplan.errors import InvalidProfile
from inferplan.profiles import mlp
from tests.cli import app, runner

ROOT = Path(__file__).parents[1]
NETWORK = str(ROOT / "examples" / "network.json")
SYSTEM = str(ROOT / "examples" / "system.yaml")
# coinfer-simulate simulates every strategy of the registry by default.
SIMULATED = len(STRATEGIES)


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""
    return result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["provision", NETWORK, "vgg16", "--bogus"], "provision: No such option: --bogus"),
        (["provision", NETWORK], "profile: give a profile, or several services with --services"),
        (["reproduce", "coinference"], "reproduce coinference: Missing option '--out'"),
        (["provision", NETWORK, "vgg16", "--method", "nope"], "'nope' is not one of 'psg'"),
        (["frontier", NETWORK, "vgg16", "--points", "abc"], "Invalid value for '--points'"),
        (["coinfer", SYSTEM, "--method", "best"], "Invalid value for '--method'"),
        (["coinfer-simulate", SYSTEM, "--seed", "-1"], "greater than or equal to 0"),
        (["generate", "tiered", "--seed", "x"], "generate tiered: Invalid value for '--seed'"),
        (["throughput", NETWORK, "vgg16", "extra"], "unexpected extra argument"),
        (["provision", NETWORK, "vgg16", "--throughput"], "requires an argument"),
        (["nosuch"], "No such command 'nosuch'"),
        (["generate", "nosuch"], "No such command 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line(args, message):
    assert message in _one_line_error(args)


def test_usage_error_points_to_help():
    line = _one_line_error(["provision", NETWORK, "--bogus", "vgg16"])
    assert line.endswith("(see 'inferplan provision --help')\n")


def test_installed_script_prints_one_line_too():
    # The real entry point (sys.argv, sys.exit), not only the test runner.
    code = "import sys; from inferplan.cli.main import main; sys.argv[0] = 'inferplan'; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "provision", NETWORK, "vgg16", "--method", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: inferplan provision: Invalid value for '--method'")
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_help_and_bare_groups_still_print_help():
    assert runner.invoke(app, ["provision", "--help"]).exit_code == 0
    bare = runner.invoke(app, ["generate"])
    assert "tiered" in bare.stdout + bare.stderr and "Traceback" not in bare.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["coinfer-simulate", SYSTEM, "--inferences", "1000000000000"],
            f"--inferences: 1000000000000 inferences x {SIMULATED} strategies would keep "
            f"{SIMULATED * 10**12:.0e} realised costs in memory; the limit is 5e+07 (at most "
            f"{50_000_000 // SIMULATED} inferences for {SIMULATED} strategies)",
        ),
        (
            ["frontier", NETWORK, "vgg16", "--points", "10000000"],
            "points: must be at least 2 and at most 10000 (one exact solve each), got 10000000",
        ),
        (
            ["profile", "mlp-99999999999x99999999999"],
            "mlp depth 99999999999 exceeds the limit of 10000 layers",
        ),
        (["profile", "mlp-1x100000000"], "mlp depth 100000000 exceeds the limit of 10000 layers"),
        (
            ["profile", f"mlp-{'9' * 400}x1"],
            "mlp width and depth must have at most 30 digits, got 400 and 1",
        ),
        (["profile", "mlp-²x2"], "unknown built-in profile 'mlp-²x2'"),
    ],
)
def test_sizes_are_checked_before_any_work(args, message):
    assert message in _one_line_error(args)


def test_sizes_within_the_limits_run():
    # 1e18 parameters: within the 2**63 - 1 every profile reader holds
    result = runner.invoke(app, ["profile", "mlp-1000000000x1", "--json"])
    assert result.exit_code == 0, result.stderr
    frontier = runner.invoke(app, ["frontier", NETWORK, "vgg16", "--points", "2", "--json"])
    assert frontier.exit_code == 0, frontier.stderr


def test_mlp_whose_size_overflows_is_refused():
    with pytest.raises(InvalidProfile, match="needs more FLOPs than floating point holds"):
        mlp(10**160, 1)
    # FLOPs within floating point, parameters beyond the 2**63 - 1 profile readers hold
    with pytest.raises(InvalidProfile, match=r"more than 2\*\*63 - 1"):
        mlp(10**150, 1)
    assert mlp(10**9, 1).flops[0] == pytest.approx(2e18)


def test_a_key_with_a_line_break_is_quoted_and_the_error_stays_one_line(tmp_path):
    path = tmp_path / "net.json"
    network = json.loads(Path(NETWORK).read_text())
    network["bad\nkey"] = 1
    path.write_text(json.dumps(network))
    line = _one_line_error(["throughput", str(path), "vgg16"])
    assert line == f"error: {path}: 'bad\\nkey': unknown field\n"
