"""The device client: decisions follow the policy's thresholds exactly, outputs equal the
unsplit model's, eight devices share one edge, an edge that dies mid-run loses no inference,
and the ``device run`` command."""

from __future__ import annotations

import csv
import json
import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")

from inferplan.coinference import (  # noqa: E402
    evaluate_thresholds,
    one_step_thresholds,
    optimal_thresholds,
    plan_placement,
)
from inferplan.errors import InvalidArgument, InvalidSystem  # noqa: E402
from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.runtime.device import run_device  # noqa: E402
from inferplan.runtime.layered import (  # noqa: E402
    ModelSpec,
    build_layers,
    load_model_system,
    plan_device,
)
from inferplan.runtime.measure import random_inputs  # noqa: E402
from tests.cli import app as cli_app  # noqa: E402
from tests.cli import invoke_json, runner  # noqa: E402

from .edge_support import (  # noqa: E402
    MLP,
    reference_model,
    running_edge,
    spec,
    write_system,
)

LEVELS = (0.05, 1.0, 30.0)


def _system(tmp_path, model_spec=None, **overrides):
    layered = build_layers(model_spec or spec(), weights=False)
    path = write_system(tmp_path / "device-system.json", **overrides)
    return load_model_system(path, layered.profile), layered


def _expected_log(thresholds, n_layers, snr):
    """The decisions of 'upload at the first n <= M with snr_n >= t_n, else at M + 1' written
    out stage by stage: the oracle for the client's log."""
    m = len(thresholds)
    rows = []
    for k, row in enumerate(snr):
        for n in range(1, n_layers + 2):
            if n == n_layers + 1:
                rows.append((k, n, float(row[n - 1]), "finish"))
            elif n == m + 1 or row[n - 1] >= thresholds[n - 1]:
                rows.append((k, n, float(row[n - 1]), "upload"))
                break
            else:
                rows.append((k, n, float(row[n - 1]), "continue"))
    return rows


def _snr_trace(thresholds, inferences, n_stages, seed):
    """SNRs drawn around the thresholds: the levels, the thresholds themselves (a tie
    uploads), and values just below them."""
    finite = [t for t in thresholds if math.isfinite(t)]
    pool = [*LEVELS, *finite, *(np.nextafter(t, 0.0) for t in finite if t > 0)]
    rng = np.random.default_rng(seed)
    return rng.choice(np.asarray(pool), size=(inferences, n_stages))


@pytest.mark.parametrize("method", ["optimal", "1sla", "hybrid", "fixed:2", "edge-only"])
def test_decisions_follow_the_policy_thresholds_exactly(tmp_path, method):
    system, layered = _system(tmp_path)
    # The thresholds straight from the stopping problem, not from the client's plan.
    if method in ("optimal", "hybrid"):
        m = plan_placement(system, method="optimal").placement
        thresholds = tuple(optimal_thresholds(system, m)[0])
    elif method == "1sla":
        m = plan_placement(system, method="1sla").placement
        thresholds = tuple(one_step_thresholds(system)[:m])
    else:
        m = 2 if method == "fixed:2" else 0
        thresholds = (math.inf,) * m
    if method in ("optimal", "1sla"):
        assert m == 4 and all(math.isfinite(t) for t in thresholds)  # the test system's point
    snr = _snr_trace(thresholds, 40, 5, seed=len(method))
    with running_edge(tmp_path) as (edge, _):
        run = run_device(system, layered, edge.url, method=method, inferences=40, snr=snr,
                         emulate=False)  # fmt: skip
    got = [(d.inference, d.stage, d.snr, d.action) for d in run.decisions]
    assert got == _expected_log(thresholds, 4, snr)
    policy = plan_device(system, method).policy
    assert [r.split for r in run.records] == policy.split_points(snr).tolist()
    assert run.failed == () and run.outputs_match is True


@settings(max_examples=25, deadline=None)
@given(
    levels=st.lists(st.floats(0.05, 50.0), min_size=1, max_size=4, unique=True),
    device_hz=st.floats(1e4, 1e7),
    energy_weight=st.floats(0.0, 1.0),
    method=st.sampled_from(["optimal", "1sla"]),
    seed=st.integers(0, 2**16),
)
def test_decisions_follow_the_thresholds_on_random_systems(
    shared_edge, levels, device_hz, energy_weight, method, seed
):
    edge, layered, tmp_path = shared_edge
    prob = [1.0 / len(levels)] * len(levels)
    system = load_model_system(
        write_system(
            tmp_path / "random.json",
            device={"cpu_hz": device_hz, "kappa": 1e-28, "tx_power_w": 0.1, "bandwidth_hz": 1e5},
            energy_weight=energy_weight,
            channel={"kind": "discrete", "snr": levels, "prob": prob},
        ),
        layered.profile,
    )
    plan = plan_placement(system, method=method)
    thresholds = plan.thresholds  # the planner's, checked below against the stopping problem
    if method == "optimal":
        assert thresholds == tuple(optimal_thresholds(system, plan.placement)[0])
    else:
        assert thresholds == tuple(one_step_thresholds(system)[: plan.placement])
    snr = _snr_trace(thresholds, 6, 5, seed)
    run = run_device(system, layered, edge.url, method=method, inferences=6, snr=snr,
                     emulate=False, verify=False)  # fmt: skip
    got = [(d.inference, d.stage, d.snr, d.action) for d in run.decisions]
    assert got == _expected_log(thresholds, 4, snr)


@pytest.fixture(scope="module")
def shared_edge(tmp_path_factory):
    """One edge for many hypothesis examples (its own system only paces, unused here)."""
    tmp_path = tmp_path_factory.mktemp("edge")
    with running_edge(tmp_path) as (edge, _):
        yield edge, build_layers(spec(), weights=False), tmp_path


def test_outputs_equal_the_unsplit_model_across_skip_connections(tmp_path):
    # The U-Net's cuts between its encoder and decoder carry two tensors.
    unet = ModelSpec("tests.runtime.models:unet", input_shapes=((1, 3, 16, 16),))
    system, layered = _system(tmp_path, unet)
    oracle = reference_model(unet)
    assert max(len(c) for c in oracle.crossings) == 2
    inputs = [(torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(k)),)
              for k in range(6)]  # fmt: skip
    for k in range(layered.n_layers + 1):
        layered = build_layers(unet, weights=False)  # a fresh device: downloads its layers
        with running_edge(tmp_path, unet) as (edge, _):
            run = run_device(system, layered, edge.url, method=f"fixed:{k}", inferences=6,
                             inputs=inputs, emulate=False)  # fmt: skip
        assert run.failed == ()
        assert set(run.split_counts()) == {k + 1}
        for x, out in zip(inputs, run.outputs, strict=True):
            with torch.no_grad():
                want = oracle.module(*x)
            assert out is not None
            assert torch.allclose(out[0], want, rtol=1e-5, atol=1e-6)
        assert run.outputs_match is True


def test_the_device_runs_the_downloaded_weights(tmp_path):
    system, layered = _system(tmp_path)
    oracle = reference_model(spec())
    with running_edge(tmp_path) as (edge, _):
        run_device(system, layered, edge.url, method="device-only", inferences=2, emulate=False)
    for mine, theirs in zip(layered.stages, oracle.stages, strict=True):
        state = theirs.state_dict()
        for key, value in mine.state_dict().items():
            assert not value.is_meta
            assert torch.equal(value, state[key])


def test_eight_devices_share_one_edge(tmp_path):
    system, _ = _system(tmp_path)
    runs, errors = {}, []
    devices = [build_layers(spec(), weights=False) for _ in range(8)]  # tracing is not threadsafe

    def device(k):
        try:
            runs[k] = run_device(system, devices[k], edge.url, method="1sla", inferences=6, seed=k,
                                 emulate=True)  # fmt: skip
        except Exception as exc:  # reported below; a thread cannot fail the test itself
            errors.append(exc)

    with running_edge(tmp_path) as (edge, service):
        threads = [threading.Thread(target=device, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        stats = service.stats()
    assert errors == [] and sorted(runs) == list(range(8))
    for run in runs.values():
        assert run.failed == () and run.outputs_match is True
        assert len(run.records) == 6
    # Every inference went to the edge once (an upload, or the output at N + 1).
    assert stats["requests"] == 8 * 6
    assert 0 < stats["service_s"]["p50"] <= stats["service_s"]["p99"]


def test_edge_stopping_mid_run_a_device_with_every_layer_finishes_locally(tmp_path):
    system, layered = _system(tmp_path)
    assert plan_device(system, "optimal").placement == 4  # every layer on the device
    oracle = reference_model(spec())
    snr = np.full((8, 5), 30.0)  # above every threshold: upload at stage 1 when the edge is up
    with running_edge(tmp_path) as (edge, _):

        def stop_after_two(k):
            if k == 1:
                edge.stop()

        run = run_device(system, layered, edge.url, method="optimal", inferences=8, snr=snr,
                         emulate=False, retries=1, backoff_s=0.01, on_inference=stop_after_two,
                         verify=False)  # fmt: skip
    assert run.failed == ()
    assert [r.index for r in run.records] == list(range(8))
    assert [r.local for r in run.records] == [False, False, *[True] * 6]
    assert [r.split for r in run.records] == [1, 1, *[5] * 6]
    inputs = random_inputs([(1, 16)], 8, seed=0)  # what run_device used (seed 0)
    for out, args in zip(run.outputs, inputs, strict=True):
        with torch.no_grad():
            want = oracle.module(*args)
        assert out is not None and torch.allclose(out[0], want, rtol=1e-5, atol=1e-6)


def test_edge_stopping_mid_run_lists_what_a_partial_device_could_not_finish(tmp_path):
    system, layered = _system(tmp_path)
    with running_edge(tmp_path) as (edge, _):

        def stop_after_three(k):
            if k == 2:
                edge.stop()

        run = run_device(system, layered, edge.url, method="fixed:1", inferences=7,
                         emulate=False, retries=2, backoff_s=0.01, on_inference=stop_after_three,
                         verify=False)  # fmt: skip
    assert [r.index for r in run.records] == [0, 1, 2]
    assert run.failed == (3, 4, 5, 6)
    assert all("unreachable" in run.errors[k] for k in run.failed)
    assert [out is None for out in run.outputs] == [False] * 3 + [True] * 4
    data = run.to_dict()
    assert data["failed"] == [3, 4, 5, 6] and data["completed"] == 3


def test_a_device_checks_the_edge_serves_its_model(tmp_path):
    system, _ = _system(tmp_path)
    other = ModelSpec("mlp-16x4", input_shapes=((1, 16),))
    layered = build_layers(other, weights=False)
    with running_edge(tmp_path) as (edge, _), pytest.raises(InvalidArgument, match="serves"):
        run_device(system, layered, edge.url, inferences=1, emulate=False)


def test_system_layers_must_match_the_models_blocks(tmp_path):
    layered = build_layers(spec(), weights=False)
    layers = {"cycles": [1.0] * 3, "input_bits": [8.0] * 4, "param_bits": [1.0] * 3}
    path = write_system(tmp_path / "s.json", layers=layers)
    with pytest.raises(InvalidSystem, match="has 3 layers but model mlp has 4 blocks"):
        load_model_system(path, layered.profile)
    # Given one layer per block, the system's own numbers are used, not the profile's.
    layers = {"cycles": [5.0] * 4, "input_bits": [8.0] * 5, "param_bits": [1.0] * 4}
    system = load_model_system(write_system(tmp_path / "t.json", layers=layers), layered.profile)
    assert system.layers.cycles == (5.0,) * 4


def test_plan_device_expected_costs_match_the_stopping_problem(tmp_path):
    system, _ = _system(tmp_path)
    for method in ("optimal", "1sla", "hybrid"):
        plan = plan_placement(system, method=method)
        mine = plan_device(system, method)
        assert mine.placement == plan.placement
        assert mine.expected_total_cost == pytest.approx(plan.expected_cost, rel=1e-12)
    # Fixed splits: E[eta_{K+1}] by direct evaluation of the forced split.
    for k in range(5):
        values, _ = evaluate_thresholds(system, [math.inf] * k)
        assert plan_device(system, f"fixed:{k}").expected_cost == pytest.approx(values[0])
    assert plan_device(system, "device-only").policy.placement == 4
    for bad in ("fixed:5", "fixed:x", "best"):
        with pytest.raises(InvalidArgument):
            plan_device(system, bad)


def test_emulated_run_is_paced_and_accounted_by_the_model(tmp_path):
    system, layered = _system(tmp_path)
    snr = np.array([[1.0, 30.0, 30.0, 30.0, 30.0], [0.05, 0.05, 30.0, 30.0, 30.0]])
    with running_edge(tmp_path) as (edge, _):
        run = run_device(system, layered, edge.url, method="optimal", inferences=2, snr=snr)
    f_l, w = 1.0e5, 1.0e5
    cycles = system.layers.cycles
    for record in run.records:
        n, gamma = record.split, record.snr
        upload = system.layers.input_bits[n - 1] / (w * math.log2(1 + gamma))
        floor = sum(cycles[: n - 1]) / f_l + upload + sum(cycles[n - 1 :]) / 1.0e8
        assert record.modelled_latency_s == pytest.approx(floor)
        assert record.latency_s >= floor  # paced: at least the modelled time
        assert record.upload_s + record.edge_s <= record.latency_s
        # The real transfer lies inside the modelled upload, which it never shortens.
        assert upload <= record.upload_s
        assert record.edge_s >= sum(cycles[n - 1 :]) / 1.0e8
        energy = 1e-28 * f_l**2 * sum(cycles[: n - 1]) + 0.1 * record.upload_s
        assert record.energy_j == pytest.approx(energy)
        assert record.cost == pytest.approx(0.5 * record.latency_s + 0.5 * energy)
        assert record.modelled_cost == pytest.approx(float(system.eta(n, gamma)))
    parts = run.overhead_parts()  # paced: neither the upload nor the edge beats the model
    assert parts["upload"] >= 0 and parts["edge"] >= 0


def _cli(args):
    return runner.invoke(cli_app, args)


def test_device_run_command(tmp_path):
    path = write_system(tmp_path / "system.json")
    (tmp_path / "token").write_text("tok")
    inputs = torch.randn(5, 16, generator=torch.Generator().manual_seed(1))
    torch.save(inputs, tmp_path / "in.pt")
    oracle = reference_model(spec())
    with running_edge(tmp_path, token="tok") as (edge, _):
        result = _cli(["device", "run", str(path), MLP, "--input-shape", "1,16", "--edge",
                       edge.url, "--token-file", str(tmp_path / "token"), "--method", "1sla",
                       "--inputs", str(tmp_path / "in.pt"), "--outputs", str(tmp_path / "out.pt"),
                       "--log", str(tmp_path / "log.csv"), "--no-emulate", "--json"])  # fmt: skip
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["method"] == "1sla" and data["placement"] == 4 and data["inferences"] == 5
        assert data["failed"] == [] and data["outputs_match"] is True
        assert sum(data["splits"].values()) == 5
        low, high = data["ci95"]
        assert low <= data["mean_cost"] <= high
        assert set(data) >= {"expected_cost", "expected_total_cost", "mean_latency_s",
                             "mean_energy_j", "download_s"}  # fmt: skip
        with (tmp_path / "log.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        assert {r["action"] for r in rows} <= {"continue", "upload", "finish"}
        assert sorted({int(r["inference"]) for r in rows}) == list(range(5))
        outputs = torch.load(tmp_path / "out.pt", weights_only=True)
        with torch.no_grad():
            want = oracle.module(inputs)
        assert outputs.shape == (5, 4)
        assert torch.allclose(outputs, want, rtol=1e-5, atol=1e-6)

        wrong = tmp_path / "wrong"
        wrong.write_text("nope")
        result = _cli(["device", "run", str(path), MLP, "--input-shape", "1,16", "--edge",
                       edge.url, "--token-file", str(wrong), "--inferences", "1"])  # fmt: skip
        assert result.exit_code == 2
        assert "401: missing or wrong bearer token" in result.stderr
        torch.save(torch.zeros(3, 15), tmp_path / "shape.pt")
        torch.save({"x": inputs}, tmp_path / "dict.pt")
        torch.save(inputs.double(), tmp_path / "double.pt")
        bad_inputs = [
            (
                ["--inputs", str(tmp_path / "shape.pt")],
                f"{tmp_path / 'shape.pt'}: must be K inputs of shape 1x16 (first dimension K)",
            ),
            (
                ["--inputs", str(tmp_path / "dict.pt")],
                f"{tmp_path / 'dict.pt'}: must hold one tensor, got dict",
            ),
            (
                ["--inputs", str(tmp_path / "double.pt")],
                f"{tmp_path / 'double.pt'}: inputs are torch.float64, the model takes float32",
            ),
            (
                ["--inputs", str(tmp_path / "in.pt"), "--inferences", "9"],
                "--inferences: 9 inferences but",
            ),
        ]
        for bad, message in ((["--method", "sometimes"], "--method: unknown strategy 'sometimes'"),
                             (["--blocks", "nothing"], "error:"), *bad_inputs):  # fmt: skip
            result = _cli(["device", "run", str(path), MLP, "--input-shape", "1,16", "--edge",
                           edge.url, "--token-file", str(tmp_path / "token"), *bad])  # fmt: skip
            assert result.exit_code == 2 and message in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1


def test_device_run_command_lists_failed_inferences_and_exits_1(tmp_path):
    # The edge of a model that raises answers every upload with a 500: nothing completes.
    path = write_system(tmp_path / "system.json")
    broken = spec("tests.runtime.models:broken")
    with running_edge(tmp_path, broken) as (edge, _):
        result = _cli(["device", "run", str(path), "tests.runtime.models:broken",
                       "--input-shape", "1,16", "--edge", edge.url, "--method", "edge-only",
                       "--retries", "0", "--inferences", "3", "--no-emulate",
                       "--json"])  # fmt: skip
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["failed"] == [0, 1, 2] and data["completed"] == 0
    assert data["mean_cost"] is None and data["ci95"] == [None, None]
    assert data["errors"]["0"] == "edge answered 500: RuntimeError: boom in fc2"
    assert result.stderr.strip() == (
        "error: 3 inference(s) failed: [0, 1, 2]; first: edge answered 500: RuntimeError: "
        "boom in fc2"
    )


def test_device_run_command_exits_non_zero_when_the_edge_is_gone(tmp_path):
    path = write_system(tmp_path / "system.json")
    with running_edge(tmp_path) as (edge, _):
        url = edge.url
    result = _cli(["device", "run", str(path), MLP, "--input-shape", "1,16", "--edge", url,
                   "--retries", "0", "--inferences", "2"])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: edge http://127.0.0.1:")
    assert "unreachable" in result.stderr


def test_an_edge_gone_after_the_command_checked_it_leaves_the_summary(tmp_path):
    system, layered = _system(tmp_path)
    with running_edge(tmp_path) as (edge, _):
        url = edge.url
    run = run_device(system, layered, url, inferences=2, emulate=False, retries=0)
    assert run.failed == (0, 1) and not run.records and run.outputs == (None, None)
    assert run.errors[0].startswith("the edge's model could not be read: edge http://")


def test_blocks_option_reaches_the_split(tmp_path):
    resnet = ModelSpec(
        "tests.runtime.models:resnet",
        input_shapes=((1, 3, 16, 16),),
        blocks=parse_block_spec("depth=2"),
    )
    system, layered = _system(tmp_path, resnet)
    assert system.n_layers == layered.n_layers > 5
    oracle = reference_model(resnet)
    with running_edge(tmp_path, resnet) as (edge, _):
        run = run_device(system, layered, edge.url, method="1sla", inferences=4, emulate=False)
    assert run.failed == () and run.outputs_match is True
    assert oracle.n_layers == layered.n_layers


def test_a_connection_the_edge_dropped_is_reopened_without_using_a_retry(tmp_path):
    from inferplan.runtime.client import EdgeClient, EdgeUnavailable

    with running_edge(tmp_path) as (edge, _):
        client = EdgeClient(edge.url, token=None, timeout_s=5.0, retries=0, backoff_s=0.0)
        try:
            assert client.request("GET", "/health").json()["layers"] == 4
            first = client._connection
            assert first is not None
            first.sock.close()  # what an edge's idle timeout leaves behind: a dead connection
            assert client.request("GET", "/health").status == 200  # retries=0: no retry left
            assert client._connection is not first
        finally:
            client.close()
    # A fresh connection that fails is a failed attempt: with retries=0 the edge is down.
    client = EdgeClient(edge.url, token=None, timeout_s=5.0, retries=0, backoff_s=0.0)
    with pytest.raises(EdgeUnavailable, match="unreachable"):
        client.request("GET", "/health")


@pytest.mark.parametrize(
    "url",
    ["127.0.0.1:8000", "ftp://127.0.0.1:8000", "http://", "http://127.0.0.1:port", "http://[::1"],
)
def test_an_edge_url_that_is_not_http_host_port_is_one_clear_error(tmp_path, url):
    system, layered = _system(tmp_path)
    with pytest.raises(InvalidArgument, match="edge") as info:
        run_device(system, layered, url, inferences=1, emulate=False)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("encoding", [None, {"input_bits_per_element": 32, "cycles_per_flop": 2.0}])
def test_one_system_and_model_give_one_plan_in_every_command(tmp_path, encoding):
    # coinfer and coinfer-simulate read the model's profile file; device run and edge serve
    # read the same system for the model itself: one default encodes the input for all four.
    layered = build_layers(spec(), weights=False)
    profile_file = tmp_path / "mlp-profile.json"
    runner.invoke(cli_app, ["profile", MLP, "--input-shape", "1,16", "-o", str(profile_file)])
    named = write_system(tmp_path / "named.json",
                         layers={"profile": str(profile_file), **(encoding or {})})  # fmt: skip
    for_model = write_system(tmp_path / "model.json", layers=encoding)  # None: no layers
    bits = (encoding or {}).get("input_bits_per_element", 8)
    assert load_model_system(for_model, layered.profile).layers.input_bits[0] == 16 * bits
    planned = invoke_json(["coinfer", str(named), "--json"])
    simulated = invoke_json(["coinfer-simulate", str(named), "--strategy", "optimal",
                             "--inferences", "200", "--json"])["strategies"]["optimal"]  # fmt: skip
    with running_edge(tmp_path, layers=encoding) as (edge, service):
        assert service.system == load_model_system(for_model, layered.profile)
        ran = invoke_json(
            [
                "device",
                "run",
                str(for_model),
                MLP,
                "--input-shape",
                "1,16",
                "--edge",
                edge.url,
                "--inferences",
                "2",
                "--no-emulate",
                "--json",
            ]
        )
    assert planned["placement"] == simulated["placement"] == ran["placement"]
    assert ran["expected_total_cost"] == pytest.approx(planned["expected_cost"], rel=1e-12)
    assert simulated["analytic_cost"] == pytest.approx(ran["expected_cost"], rel=1e-6)


def test_decisions_on_a_markov_channel_follow_the_state_thresholds(tmp_path):
    from inferplan.coinference.markov_stopping import memory_thresholds

    markov = {"kind": "markov", "snr": [0.05, 1.0, 30.0],
              "transition": [[0.7, 0.3, 0.0], [0.2, 0.6, 0.2], [0.0, 0.3, 0.7]]}  # fmt: skip
    system, layered = _system(tmp_path, channel=markov)
    m = plan_placement(system).placement
    table = memory_thresholds(system, m)[0]
    with running_edge(tmp_path) as (edge, _):
        run = run_device(system, layered, edge.url, method="optimal", inferences=30, seed=4,
                         emulate=False)  # fmt: skip
    levels = markov["snr"]
    expected = []
    for d in run.decisions:
        if d.action == "finish":
            continue
        k = levels.index(d.snr)  # the SNRs are the chain's own: a path of the Markov chain
        upload = d.stage == m + 1 or d.snr >= table[d.stage - 1][k]
        expected.append("upload" if upload else "continue")
    assert [d.action for d in run.decisions if d.action != "finish"] == expected
    assert {"continue", "upload"} <= set(expected)
    assert run.failed == () and run.outputs_match is True


RICIAN = {"kind": "gauss-markov", "fading": "rician", "k_factor": 3.0, "mean_snr": 3.0,
          "min_snr": 0.05, "rho": 0.9, "radii": 8, "phases": 4}  # fmt: skip


def _rician_expected(decisions, table, boundaries, m):
    """What the rule on (SNR, phase) does at each logged stage, read here from the raw table:
    the ring of the SNR among the boundaries, the quarter of the circle of the phase."""
    out = []
    for d in decisions:
        if d["action"] == "finish":
            continue
        ring = int(np.searchsorted(boundaries, d["snr"], side="right"))
        sector = int((d["phase"] + math.pi) / (2 * math.pi) * 4) % 4
        upload = d["stage"] == m + 1 or d["snr"] >= table[d["stage"] - 1][ring * 4 + sector]
        out.append("upload" if upload else "continue")
    return out


def test_a_rician_channel_end_to_end_the_device_decides_by_snr_and_phase(tmp_path):
    from inferplan.coinference.markov_stopping import memory_thresholds

    system, layered = _system(tmp_path, channel=RICIAN)
    m = plan_placement(system).placement
    table = memory_thresholds(system, m)[0]
    boundaries = system.chain.boundaries
    path = write_system(tmp_path / "rician.json", channel=RICIAN)
    rng = np.random.default_rng(7)
    trace = np.hstack([0.05 + rng.exponential(3.0, (12, 5)), rng.uniform(-3.1, 3.1, (12, 5))])
    np.savetxt(tmp_path / "trace.csv", trace, delimiter=",")
    with running_edge(tmp_path, channel=RICIAN) as (edge, _):
        run = run_device(system, layered, edge.url, method="optimal", inferences=30, seed=4,
                         emulate=False, timeout_s=20.0)  # fmt: skip
        result = _cli(["device", "run", str(path), MLP, "--input-shape", "1,16", "--edge",
                       edge.url, "--snr-trace", str(tmp_path / "trace.csv"), "--inferences",
                       "12", "--log", str(tmp_path / "log.csv"), "--no-emulate", "--timeout",
                       "20", "--json"])  # fmt: skip
        assert result.exit_code == 0, result.stderr
        short = tmp_path / "short.csv"
        np.savetxt(short, trace[:, :5], delimiter=",")
        refused = _cli(["device", "run", str(path), MLP, "--input-shape", "1,16", "--edge",
                        edge.url, "--snr-trace", str(short), "--inferences", "12"])  # fmt: skip
    drawn = [d.__dict__ for d in run.decisions]
    assert all(d["phase"] is not None for d in drawn)
    expected = _rician_expected(drawn, table, boundaries, m)
    assert [d["action"] for d in drawn if d["action"] != "finish"] == expected
    assert {"continue", "upload"} <= set(expected)
    assert run.failed == () and run.outputs_match is True
    with (tmp_path / "log.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["inference", "stage", "snr", "phase", "action"]
    logged = [{"stage": int(r["stage"]), "snr": float(r["snr"]), "phase": float(r["phase"]),
               "action": r["action"]} for r in rows]  # fmt: skip
    for row, r in zip(rows, logged, strict=True):  # the trace's SNR and phase, as replayed
        k = int(row["inference"])
        assert (r["snr"], r["phase"]) == (trace[k, r["stage"] - 1], trace[k, 5 + r["stage"] - 1])
    assert [r["action"] for r in logged if r["action"] != "finish"] == _rician_expected(
        logged, table, boundaries, m
    )
    assert json.loads(result.stdout)["outputs_match"] is True
    assert refused.exit_code == 2 and "needs rows of 2 (N + 1) = 10 values" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("cpu_hz", "late"),
    [((1e5, 3e4), ()), ((1e15, 3e4), ("device",)), ((1e5, 1e15), ("edge",))],
)
def test_emulation_that_cannot_hold_the_system_is_named_in_a_warning(shared_edge, cpu_hz, late):
    # The device's system models its layers and the edge: a device or edge modelled faster
    # than this machine computes is named; one modelled slower than it is not.
    edge, layered, tmp_path = shared_edge
    device_hz, edge_hz = cpu_hz
    system = load_model_system(
        write_system(tmp_path / "warn.json",
                     device={"cpu_hz": device_hz, "kappa": 1e-28, "tx_power_w": 0.1,
                             "bandwidth_hz": 1e9},
                     edge={"cpu_hz": edge_hz}),
        layered.profile,
    )  # fmt: skip
    run = run_device(system, layered, edge.url, method="fixed:2", inferences=20, seed=1,
                     emulate=True, verify=False)  # fmt: skip
    named = tuple(w.split("'")[0].removeprefix("the ") for w in run.warnings)
    assert named == late, run.warnings
    for r in run.records:  # the verdict agrees with the data it was made from
        if "device" in late:
            assert r.device_s > r.modelled_device_s
        if "edge" in late:
            assert r.edge_s > r.modelled_edge_s
    assert run.to_dict()["warnings"] == list(run.warnings)
    assert not run_device(system, layered, edge.url, method="fixed:2", inferences=3, seed=1,
                          emulate=False, verify=False).warnings  # fmt: skip


def test_device_run_refuses_to_download_beyond_the_device_memory(tmp_path):
    import dataclasses

    system, layered = _system(tmp_path)
    need = float(system.placement_needs[-1])
    small = dataclasses.replace(system, device=dataclasses.replace(system.device,
                                                                   memory=0.5 * need))  # fmt: skip
    with running_edge(tmp_path) as (edge, _):
        with pytest.raises(InvalidArgument, match="refused before downloading"):
            run_device(small, layered, edge.url, method="device-only", inferences=2,
                       emulate=False)  # fmt: skip
        # a planner places only what fits, and the run downloads it
        run = run_device(small, layered, edge.url, method="optimal", inferences=2, emulate=False)
        assert system.placement_needs[run.plan.placement] <= 0.5 * need


def test_device_run_shows_progress_on_stderr_and_costs_with_their_unit(tmp_path, monkeypatch):
    import inferplan.cli.render as render

    path = write_system(tmp_path / "system.json")
    (tmp_path / "token").write_text("tok")
    monkeypatch.setattr(render, "PROGRESS_AFTER_S", 0.0)  # every step is a long one here
    with running_edge(tmp_path, token="tok") as (edge, _):
        args = [
            "device",
            "run",
            str(path),
            MLP,
            "--input-shape",
            "1,16",
            "--edge",
            edge.url,
            "--token-file",
            str(tmp_path / "token"),
            "--inferences",
            "3",
            "--no-emulate",
        ]
        monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws as on a terminal
        result = _cli([*args, "--json"])
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["inferences"] == 3  # stdout: the JSON object alone
        what = f"device run: 3 inferences against {edge.url}"
        assert what in result.stderr and f"{what}: " in result.stderr
        monkeypatch.delenv("TTY_COMPATIBLE")
        result = _cli(args)
        assert result.exit_code == 0, result.stderr
        assert f"{what} ..." in result.stderr.splitlines()  # into a log: one line
    (row,) = [line for line in result.stdout.splitlines() if "cost per inference" in line]
    assert "(ETC units)" in row
    assert "ETC units: 0.5 x seconds + 0.5 x joules" in result.stdout
