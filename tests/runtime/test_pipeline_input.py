"""``inferplan run`` refuses bad input in one line before any process starts; plan files,
planned stage times and pacing on their own."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

import inferplan  # noqa: E402
from inferplan.codesign.planfile import check_plan, load_plan, plan_from_dict  # noqa: E402
from inferplan.errors import InvalidArgument  # noqa: E402
from inferplan.network import network_from_dict  # noqa: E402
from inferplan.profiles import Profile  # noqa: E402
from inferplan.runtime.emulate import pace, planned_times  # noqa: E402
from inferplan.runtime.pipeline import RunRequest, resolve  # noqa: E402

from ..cli import app, runner  # noqa: E402
from .pipeline_support import ROOT, chain, hand_plan, model_args, write  # noqa: E402

MLP = Profile("m", flops=(1024.0, 2048.0, 2048.0, 256.0),
              activation_bits=(512.0, 1024.0, 1024.0, 1024.0, 128.0))  # fmt: skip


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    net = write(tmp_path / "net.json", chain(("s", "a", "t"), 1e6, 1e6))
    plan = write(tmp_path / "plan.json", hand_plan(("s", "a", "t"), [1, 3, 4],
                                                   MLP.to_dict(), 1e6, 1e6))  # fmt: skip
    return tmp_path, net, plan


def _fails(args):
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


def test_the_hand_plan_fits_the_profiled_mlp(files):
    # the profile the tests below rely on is the traced model's
    result = runner.invoke(app, ["profile", *model_args("mlp"), "--json"])
    got = json.loads(result.stdout)
    assert got["flops"] == list(MLP.flops) and got["activation_bits"] == list(MLP.activation_bits)


def test_a_plan_for_another_model(files):
    tmp, net, _ = files
    other = write(tmp / "other.json", hand_plan(("s", "a", "t"), [2, 4, 6],
                                                {"flops": [1.0] * 6, "activation_bits": [1.0] * 7},
                                                1e6, 1e6))  # fmt: skip
    line = _fails([str(net), *model_args("mlp"), "--plan", str(other)])
    assert line == (f"error: {other}: partition: the plan covers 6 blocks, the model has 4 "
                    "(a plan for another model?)")  # fmt: skip


def test_a_plan_whose_interval_is_not_this_models(files):
    tmp, net, plan = files
    data = json.loads(plan.read_text())
    data["interval"] *= 2
    line = _fails([str(net), *model_args("mlp"), "--plan", str(write(tmp / "p.json", data))])
    assert f"{tmp / 'p.json'}: interval: the plan says" in line and "another model" in line


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (["s", "y", "t"], "path: node 'y' is not in the network"),
        (["s", "x", "t"], "path: the network has no link 'x' -> 't'"),
        (["a", "t"], "path: must run from the source 's' to the target 't', got 'a' .. 't'"),
    ],
)
def test_a_plan_whose_path_is_not_in_the_network(files, path, message):
    tmp, net, plan = files
    data = json.loads(plan.read_text())
    data["path"], data["partition"] = path, [1, 3, 4][-len(path) :]
    bad = write(tmp / "bad.json", data)
    assert _fails([str(net), *model_args("mlp"), "--plan", str(bad)]) == f"error: {bad}: {message}"


def test_a_plan_file_with_a_bad_field(files):
    tmp, net, plan = files
    data = json.loads(plan.read_text())
    data["partition"] = [1, "3", 4]
    bad = write(tmp / "bad.json", data)
    line = _fails([str(net), *model_args("mlp"), "--plan", str(bad)])
    assert line.startswith(f"error: {bad}: partition[1]: ")


@pytest.mark.parametrize("shape", [(3, 15), (3, 2, 16), (3, 1, 1, 16)])
def test_an_inputs_file_of_the_wrong_shape(files, shape):
    tmp, net, plan = files
    torch.save(torch.zeros(shape), tmp / "in.pt")
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--inputs",
                   str(tmp / "in.pt")])  # fmt: skip
    got = "x".join(map(str, shape))
    assert line == (f"error: {tmp / 'in.pt'}: must be K inputs of shape 1x16 (first dimension "
                    f"K), got a tensor of shape {got}")  # fmt: skip


def test_an_inputs_file_that_is_not_a_tensor(files):
    tmp, net, plan = files
    torch.save({"x": torch.zeros(2, 16)}, tmp / "in.pt")
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--inputs",
                   str(tmp / "in.pt")])  # fmt: skip
    assert line == f"error: {tmp / 'in.pt'}: must hold one tensor, got dict"


def test_inputs_count_disagreeing_with_inferences(files):
    tmp, net, plan = files
    torch.save(torch.zeros(3, 16), tmp / "in.pt")
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--inputs",
                   str(tmp / "in.pt"), "--inferences", "5"])  # fmt: skip
    assert line == "error: --inferences: 5 inferences asked for but the inputs file holds 3 inputs"


def test_too_few_inferences_for_the_warmup(files):
    _, net, plan = files
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--inferences", "6"])
    assert "6 inferences leave fewer than 2 after 5 of warm-up" in line


def test_a_factory_that_fails(files):
    tmp, net, plan = files
    (tmp / "bad_factory.py").write_text("def make():\n    raise ValueError('no weights')\n")
    line = _fails([str(net), f"{tmp / 'bad_factory.py'}:make", "--input-shape", "1,16",
                   "--plan", str(plan)])  # fmt: skip
    assert line == f"error: factory '{tmp / 'bad_factory.py'}:make' failed: ValueError: no weights"
    line = _fails([str(net), "tests.runtime.models:nothing", "--input-shape", "1,16", "--plan",
                   str(plan)])  # fmt: skip
    assert line == "error: module 'tests.runtime.models' has no attribute 'nothing'"


@pytest.mark.parametrize("given", [[], ["--interval", "0.1", "--throughput", "3"]])
def test_exactly_one_target(files, given):
    _, net, _ = files
    line = _fails([str(net), *model_args("mlp"), *given])
    assert line == "error: give exactly one of --throughput, --interval or --plan"


# ----------------------------------------------------------------- plan files, stage times


def test_plan_files_ignore_keys_they_do_not_know(tmp_path):
    net = network_from_dict(chain(("s", "a", "t"), 1e6, 1e6))
    data = hand_plan(("s", "a", "t"), [1, 3, 4], MLP.to_dict(), 1e6, 1e6)
    data["solver_log"] = ["anything"]
    plan = load_plan(write(tmp_path / "p.json", data))
    assert plan.path == ("s", "a", "t") and plan.partition == (1, 3, 4)
    check_plan(net, MLP, plan)


def test_provision_output_round_trips_and_checks():
    net = inferplan.load_network(ROOT / "examples/network.json")
    vgg = inferplan.load_profile("vgg16")
    plan = inferplan.provision(net, vgg, throughput=30)
    again = plan_from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    check_plan(net, vgg, again)


def test_planned_times_are_work_over_capacity_after_upgrades():
    net = network_from_dict(chain(("s", "a", "t"), 1e3, 2e3))
    data = hand_plan(("s", "a", "t"), [1, 1, 4], MLP.to_dict(), 1e3, 2e3)
    data["node_upgrades"] = {"t": 3e3}
    data["link_upgrades"] = [{"source": "s", "target": "a", "amount": 6e3}]
    data["interval"] = max(1024 / 1e3, 4352 / 4e3, 1024 / 8e3, 1024 / 2e3)
    plan = plan_from_dict(data)
    check_plan(net, MLP, plan)
    nodes, links = planned_times(net, MLP, plan)
    assert nodes == pytest.approx((1024 / 1e3, 0.0, (2048 + 2048 + 256) / 4e3), rel=1e-15)
    assert links == pytest.approx((1024 / 8e3, 1024 / 2e3), rel=1e-15)


def test_check_plan_refuses_upgrades_of_unknown_elements():
    net = network_from_dict(chain(("s", "a", "t"), 1e6, 1e6))
    data = hand_plan(("s", "a", "t"), [1, 3, 4], MLP.to_dict(), 1e6, 1e6)
    with pytest.raises(InvalidArgument, match="node_upgrades: node 'q' is not in the network"):
        check_plan(net, MLP, plan_from_dict({**data, "node_upgrades": {"q": 1.0}}))
    ups = [{"source": "t", "target": "s", "amount": 1.0}]
    with pytest.raises(InvalidArgument, match="link_upgrades: the network has no link 't' -> 's'"):
        check_plan(net, MLP, plan_from_dict({**data, "link_upgrades": ups}))


def test_pace_sleeps_until_the_planned_moment_without_spinning():
    started = time.monotonic()
    cpu = time.process_time()
    ended = pace(started, 0.3)
    assert ended >= started + 0.3 and time.monotonic() >= started + 0.3
    assert time.process_time() - cpu < 0.1  # asleep, not busy-waiting
    late = time.monotonic()
    assert pace(late - 1.0, 0.5) >= late  # a moment already past returns at once


def test_the_planners_and_the_command_line_load_no_torch():
    code = ("import sys, inferplan, inferplan.runtime\n"
            "from inferplan.cli.main import register\n"
            "register()\n"
            "print('torch' in sys.modules)\n")  # fmt: skip
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "False"


def test_an_outputs_file_in_a_missing_folder(files):
    tmp, net, plan = files
    out = tmp / "missing" / "out.pt"
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--outputs", str(out)])
    assert line == f"error: {out}: outputs: its folder does not exist"


@pytest.mark.parametrize("shape", [(3, 16), (3, 1, 16)])
def test_inputs_with_or_without_their_batch_dimension(files, shape):
    tmp, net, plan = files
    torch.save(torch.zeros(shape), tmp / "in.pt")
    request = RunRequest(network=inferplan.load_network(net), model="tests.runtime.models:mlp",
                         input_shapes=((1, 16),), plan=load_plan(plan), warmup=1,
                         inputs=str(tmp / "in.pt"))  # fmt: skip
    assert resolve(request).inferences == 3


def test_more_inferences_than_memory_holds_are_refused_before_any_process(files):
    _, net, plan = files
    started = time.monotonic()
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--inferences",
                   str(10**15)])  # fmt: skip
    assert line.startswith(f"error: --inferences: {10**15:,} inferences would keep ")
    assert "of outputs and measured times in memory, more than this machine's" in line
    assert time.monotonic() - started < 60  # refused, not built and streamed


def test_nan_outputs_compare_as_the_unsplit_models_nans():
    from inferplan.runtime.pipeline import _compare

    nan = torch.tensor([[math.nan, 1.0]])

    def model(x):
        return x * nan

    inputs = [(torch.ones(1, 2),)]
    assert _compare(model, inputs, [(torch.tensor([[math.nan, 1.0]]),)]) == (True, 0.0)
    assert _compare(model, inputs, [(torch.tensor([[0.0, 1.0]]),)]) == (False, math.inf)
    assert _compare(model, inputs, [(torch.tensor([[math.nan, 1.5]]),)]) == (False, 0.5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_an_inputs_file_of_another_dtype_is_refused_before_any_rank(files, dtype):
    tmp, net, plan = files
    torch.save(torch.zeros(4, 16, dtype=dtype), tmp / "in.pt")
    line = _fails([str(net), *model_args("mlp"), "--plan", str(plan), "--warmup", "1",
                   "--inputs", str(tmp / "in.pt")])  # fmt: skip
    assert line == f"error: {tmp / 'in.pt'}: inputs are {dtype}, the model takes float32"
