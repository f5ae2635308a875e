"""Fuzz the command line in process: any network, profile or system file content and any
command options end in exit 0, or in one line ``error: ...`` on stderr with exit code 2 (bad
input) or 3 (an infeasible request) -- never a traceback.

Documents start from valid ones and get values replaced, removed or added: extreme and
non-finite numbers, integers of hundreds of digits, wrong types, deep nesting, odd strings.
Each test runs a bounded number of examples, so the whole module takes well under a minute.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tests.cli import app, runner

ROOT = Path(__file__).parents[1]
NETWORK = json.loads((ROOT / "examples" / "network.json").read_text())
SYSTEM = YAML(typ="safe", pure=True).load((ROOT / "examples" / "system.yaml").read_text())
# A model of the tests for `inferplan run` (module:factory, input 1 x 16).
RUN_MODEL = "tests.runtime.models:mlp"
PROFILE = {"name": "tiny", "flops": [2e9, 1e9, 4e8], "activation_bits": [1e6, 4e5, 1e5, 1e3]}

FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e-308, 5e-324, 1e308, 1.7976931348623157e308, -1e308, 0.5]),
    st.integers(-(10**400), 10**400),
    st.sampled_from([10**400, 2**64, 2**1024]),
)
scalars = st.one_of(numbers, st.booleans(), st.none(), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document (mapping keys and list indices)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _paths(value, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with a few values replaced, removed or added."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "number", "remove", "add", "deep"]))
        last = path[-1]
        if action == "replace":
            parent[last] = draw(values)
        elif action == "number":
            parent[last] = draw(numbers)
        elif action == "remove":
            del parent[last]
        elif action == "deep":
            parent[last] = json.loads("[" * 150 + "]" * 150)
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=6))] = draw(values)
        else:
            parent.append(draw(values))
    return doc


def _write(tmp: Path, name: str, doc: Any, as_yaml: bool) -> str:
    path = tmp / (name + (".yaml" if as_yaml else ".json"))
    if as_yaml:
        with path.open("w") as handle:
            yaml = YAML(typ="safe", pure=True)
            yaml.dump(doc, handle)
    else:
        path.write_text(json.dumps(doc))
    return str(path)


def _check(args: list[str]) -> Any:
    """Run ``inferplan ARGS`` and require exit 0 or one error line; the result."""
    result = runner.invoke(app, args)
    context = f"args={args}\nstdout={result.stdout[-2000:]}\nstderr={result.stderr[-4000:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), context
    if result.exit_code == 0:
        extra = [line for line in result.stderr.splitlines()
                 if not line.startswith(("warning: ", "note: "))]  # fmt: skip
        assert not extra, context
        if "--json" in args:
            json.loads(result.stdout)
        return result
    assert result.exit_code in (2, 3), context
    assert result.stderr.startswith("error: "), context
    assert result.stderr.count("\n") == 1, context
    return result


codesign_commands = st.sampled_from(
    [
        ["throughput", "{net}", "{prof}", "--json"],
        ["provision", "{net}", "{prof}", "--throughput", "30", "--json"],
        ["provision", "{net}", "{prof}", "--interval", "0.01", "--method", "pwf"],
        ["provision", "{net}", "{prof}", "--throughput", "5", "--method", "milp", "--json"],
        ["frontier", "{net}", "{prof}", "--points", "3", "--json"],
    ]
)


def _fill(command: list[str], **files: str) -> list[str]:
    return [part.format(**files) for part in command]


@FUZZ
@given(doc=mutated(NETWORK), as_yaml=st.booleans(), command=codesign_commands)
def test_any_network_file(tmp_path_factory, doc, as_yaml, command):
    tmp = tmp_path_factory.mktemp("net")
    net = _write(tmp, "net", doc, as_yaml)
    _check(_fill(command, net=net, prof="vgg16"))
    _check(["validate", net])


@FUZZ
@given(doc=mutated(PROFILE), as_yaml=st.booleans(), command=codesign_commands)
def test_any_profile_file(tmp_path_factory, doc, as_yaml, command):
    tmp = tmp_path_factory.mktemp("prof")
    net = str(ROOT / "examples" / "network.json")
    _check(_fill(command, net=net, prof=_write(tmp, "prof", doc, as_yaml)))
    _check(["profile", _write(tmp, "again", doc, as_yaml), "--json"])
    _check(["validate", _write(tmp, "again", doc, as_yaml), "--json"])


SERVICES = {
    "services": [
        {"name": "a", "profile": "alexnet", "source": "s", "target": "t", "throughput": 20},
        {"name": "b", "profile": "prof.json", "source": "s", "target": "m1", "interval": 0.5},
    ]
}


@FUZZ
@given(doc=mutated(SERVICES), as_yaml=st.booleans(), method=st.sampled_from(["milp", "fast"]))
def test_any_services_file(tmp_path_factory, doc, as_yaml, method):
    tmp = tmp_path_factory.mktemp("services")
    (tmp / "prof.json").write_text(json.dumps(PROFILE))
    net = str(ROOT / "examples" / "network.json")
    services = _write(tmp, "services", doc, as_yaml)
    _check(["provision", net, "--services", services, "--method", method, "--json"])
    _check(["validate", services])


channels = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("nakagami"), "m": numbers, "mean_snr": numbers},
        optional={"min_snr": numbers},
    ),
    st.fixed_dictionaries(
        {"kind": st.just("rayleigh"), "mean_snr": numbers}, optional={"min_snr": numbers}
    ),
    st.fixed_dictionaries({"kind": st.just("lognormal"), "mean_db": numbers, "sigma_db": numbers}),
    st.fixed_dictionaries(
        {"kind": st.just("discrete"), "snr": st.lists(numbers, min_size=1, max_size=2)},
        optional={"prob": st.lists(numbers, max_size=2)},
    ),
    st.fixed_dictionaries(
        {
            "kind": st.just("markov"),
            "snr": st.lists(numbers, min_size=1, max_size=3),
            "transition": st.lists(st.lists(numbers, max_size=3), max_size=3)
            | st.lists(st.lists(st.lists(numbers, max_size=2), max_size=2), max_size=2),
        },
        optional={
            "initial": st.lists(numbers, max_size=3),
            "boundaries": st.lists(numbers, max_size=2),
        },
    ),
    st.fixed_dictionaries(
        {"kind": st.just("gauss-markov"), "mean_snr": numbers},
        optional={
            "min_snr": numbers,
            "rho": numbers | st.lists(numbers, max_size=3),
            "speed_mps": numbers,
            "carrier_hz": numbers,
            "grid": st.sampled_from([0, 2, 5, -1, 10**9, 1.5]),
            "sampler": st.sampled_from(["jakes", "recursion", "x"]),
            "fading": st.sampled_from(["rician", "rayleigh", "x"]),
            "k_factor": numbers,
            # Small grids only: a Rician grid's steps are (radii x phases)^2 numbers.
            "radii": st.sampled_from([0, 2, 3, 5000, 1.5]),
            "phases": st.sampled_from([0, 1, 2, 300]),
        },
    ),
)


@st.composite
def systems(draw: st.DrawFn) -> Any:
    doc = draw(mutated(SYSTEM))
    if draw(st.booleans()) and isinstance(doc, dict):
        doc["channel"] = draw(channels)
    if draw(st.booleans()) and isinstance(doc, dict):
        rates = ("cpu_hz", "kappa", "tx_power_w", "bandwidth_hz")
        doc["device"] = {key: draw(st.sampled_from([1e-308, 1e308, 1e9])) for key in rates}
    return doc


coinference_commands = st.sampled_from(
    [
        ["coinfer", "{sys}", "--json"],
        ["coinfer", "{sys}", "--method", "hybrid", "--json"],
        ["coinfer", "{sys}", "--method", "1sla"],
        ["coinfer-simulate", "{sys}", "--inferences", "500", "--strategy", "optimal", "--json"],
    ]
)


@FUZZ
@given(doc=systems(), as_yaml=st.booleans(), command=coinference_commands)
def test_any_system_file(tmp_path_factory, doc, as_yaml, command):
    tmp = tmp_path_factory.mktemp("sys")
    system = _write(tmp, "sys", doc, as_yaml)
    _check(_fill(command, sys=system))
    _check(["validate", system])


options = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "--json",
                "--method",
                "--points",
                "--from",
                "--to",
                "--throughput",
                "--interval",
                "--inferences",
                "--seed",
                "--strategy",
                "--tie-break",
                "--bogus",
                "-o",
                "--",
                "-",
            ]
        ),
        st.sampled_from(["psg", "milp", "optimal", "random", "0", "-1", "1e12", "nan", "inf"]),
        st.sampled_from(["1000000000000", "2", "3", "1e-300", "x", "", "mlp-3x3", "vgg16"]),
    ),
    max_size=5,
)
programs = st.sampled_from(
    [
        ["provision", str(ROOT / "examples" / "network.json"), "alexnet"],
        ["throughput", str(ROOT / "examples" / "network.json"), "mlp-64x3"],
        ["frontier", str(ROOT / "examples" / "network.json"), "alexnet", "--points", "3"],
        ["coinfer", str(ROOT / "examples" / "system-small.yaml")],
        ["coinfer-simulate", str(ROOT / "examples" / "system-small.yaml"), "--inferences", "300"],
        ["profile"],
        ["generate", "tiered"],
    ]
)


@FUZZ
@given(program=programs, extra=options)
def test_any_command_options(tmp_path_factory, program, extra):
    with contextlib.chdir(tmp_path_factory.mktemp("cwd")):  # -o may name any file
        _check([*program, *extra])


# --- the newer surfaces: tables, ONNX files, the device's files and options ---------------------

cells = st.one_of(numbers, st.booleans(), st.none(), st.text(max_size=6))


@FUZZ
@given(
    form=st.sampled_from(["parquet", "csv"]),
    kind=st.sampled_from(["nodes", "links"]),
    row=st.integers(0, 1),
    column=st.sampled_from(
        [
            "id",
            "source",
            "capacity",
            "price",
            "cost_kind",
            "cost_size",
            "cost_price",
            "cost_upto",
            "extra",
        ]
    ),
    value=cells,
    repeat=st.booleans(),
)
def test_any_table(tmp_path_factory, form, kind, row, column, value, repeat):
    pa = __import__("pyarrow")
    writer = __import__(f"pyarrow.{form}", fromlist=["x"])
    tmp = tmp_path_factory.mktemp("tables")
    rows = {
        "nodes": [dict(n) for n in NETWORK["nodes"]],
        "links": [dict(e) for e in NETWORK["links"]],
    }
    rows[kind][row][column] = value
    for name, elements in rows.items():
        names = list(dict.fromkeys(k for e in elements for k in e if k != "cost"))
        columns = [[e.get(n) for e in elements] for n in names]
        if repeat and name == kind:
            names, columns = [*names, names[-1]], [*columns, columns[-1]]
        try:
            table = pa.Table.from_arrays([pa.array(c) for c in columns], names=names)
        except (pa.ArrowException, OverflowError):
            return  # not a table pyarrow can write: nothing to read
        (writer.write_csv if form == "csv" else writer.write_table)(table, tmp / f"{name}.{form}")
    net = tmp / "net.yaml"
    net.write_text(f"source: {NETWORK['source']}\ntarget: {NETWORK['target']}\n"
                   f"nodes: nodes.{form}\nlinks: links.{form}\n")  # fmt: skip
    _check(["provision", str(net), "vgg16", "--throughput", "30", "--json"])


@st.composite
def onnx_models(draw: st.DrawFn) -> Any:
    """A Conv, Gemm, MatMul, pool or LSTM node with drawn input shapes, weights, attributes and
    element types: many parse but are malformed."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    from onnx import helper as h

    op = draw(st.sampled_from(["Conv", "Gemm", "MatMul", "MaxPool", "LSTM", "Attention"]))
    dims = st.lists(st.integers(1, 5), min_size=0, max_size=4)
    inputs = ["x", *(["w"] if draw(st.booleans()) else [])]
    attributes: dict[str, Any] = {}
    if op in ("Conv", "MaxPool") and draw(st.booleans()):
        attributes["kernel_shape"] = draw(st.sampled_from([[2, 2], [2.0, 2.0], [0], [1]]))
    if op == "LSTM":
        attributes["hidden_size"] = draw(st.integers(1, 3))
    kind = draw(st.sampled_from([TensorProto.FLOAT, TensorProto.INT64, 99]))
    node = h.make_node(op, inputs, ["y"], name=f"/m/{op}", **attributes)
    weight = numpy_helper.from_array(np.ones(draw(dims), np.float32), "w")
    graph = h.make_graph(
        [node], "g", [h.make_tensor_value_info("x", kind, draw(dims))],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, draw(dims))],
        initializer=[weight] if "w" in inputs else [],
    )  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", draw(st.sampled_from([17, 23])))])


@FUZZ
@given(model=onnx_models(), flops=st.sampled_from(["matrix", "all"]))
def test_any_onnx_file(tmp_path_factory, model, flops):
    onnx = __import__("onnx")
    path = tmp_path_factory.mktemp("onnx") / "m.onnx"
    onnx.save(model, path)
    _check(["profile", str(path), "--flops", flops, "--json"])


@FUZZ
@given(
    trace=st.binary(max_size=60),
    inferences=st.sampled_from(["1", "100", str(10**12), "0", "-1", "x"]),
    url=st.sampled_from(["http://[::1", "http://127.0.0.1:1", "ftp://x", "http://h:port"]),
)
def test_any_device_run(tmp_path_factory, trace, inferences, url):
    tmp = tmp_path_factory.mktemp("device")
    (tmp / "snr.csv").write_bytes(trace)
    _check(["device", "run", str(ROOT / "examples" / "edge-mlp.yaml"), "mlp-16x4", "--edge", url,
            "--inferences", inferences, "--snr-trace", str(tmp / "snr.csv"), "--retries", "0",
            "--timeout", "1"])  # fmt: skip


@settings(FUZZ, max_examples=20)
@given(
    inputs=st.binary(max_size=64),
    inferences=st.sampled_from(["1", "40", str(10**12), "0", "-1", "x"]),
    timeout=st.sampled_from(["1", "0", "-1", "nan", "inf", "1e308", "x"]),
    dtype=st.sampled_from(["float32", "float16", "int64", "bool", "complex", "x"]),
    shape=st.sampled_from(["1,16", "2,16", "99999999999999999999,16", "0,16", "-1", "1,x"]),
    target=st.sampled_from([["--interval", "1"], ["--throughput", "1e308"], ["--interval", "-1"]]),
)
def test_any_run_options(tmp_path_factory, inputs, inferences, timeout, dtype, shape, target):
    # The inputs file holds a few random bytes, never a tensor file (those are zip archives),
    # so every draw is settled by the checks made before any stage starts.
    tmp = tmp_path_factory.mktemp("run")
    (tmp / "inputs.pt").write_bytes(inputs)
    _check(["run", str(ROOT / "examples" / "runtime-network.json"), RUN_MODEL, "--input-shape",
            shape, "--dtype", dtype, "--inferences", inferences, "--timeout", timeout, *target,
            "--inputs", str(tmp / "inputs.pt")])  # fmt: skip


# --- latency, memory, layer graphs and channels at their extremes --------------------------------

from tests.strategies import (  # noqa: E402
    channel_docs,
    delayed_network_docs,
    graph_profile_docs,
    latency_bounds,
    memory_network_docs,
)

latency_commands = st.sampled_from(
    [
        ["provision", "{net}", "alexnet", "--throughput", "1", "--method", "psg", "--json"],
        ["provision", "{net}", "alexnet", "--throughput", "1", "--method", "milp", "--json"],
        ["provision", "{net}", "alexnet", "--throughput", "1", "--method", "pfp", "--json"],
        ["throughput", "{net}", "alexnet", "--json"],
        ["latency", "{net}", "alexnet", "--json"],
        ["frontier", "{net}", "alexnet", "--points", "2", "--json"],
    ]
)


@FUZZ
@given(doc=delayed_network_docs(NETWORK), command=latency_commands, bound=latency_bounds)
def test_any_latency(tmp_path_factory, doc, command, bound):
    net = _write(tmp_path_factory.mktemp("lat"), "net", doc, False)
    args = _fill(command, net=net)
    bounded = args[0] == "provision" or (args[0] == "throughput" and "--latency" not in args)
    if bounded:
        args = [*args, "--latency", bound]
    result = _check(args)
    if result.exit_code == 0 and args[0] == "provision":  # the plan keeps its bound
        plan = json.loads(result.stdout)
        assert plan["latency"] <= float(bound) * (1 + 1e-9), (args, plan["latency"])


@FUZZ
@given(doc=memory_network_docs(NETWORK), command=codesign_commands, graph=graph_profile_docs())
def test_any_memory(tmp_path_factory, doc, command, graph):
    tmp = tmp_path_factory.mktemp("mem")
    net = _write(tmp, "net", doc, False)
    _check(_fill(command, net=net, prof="alexnet"))
    _check(_fill(command, net=net, prof=_write(tmp, "prof", graph, False)))


@st.composite
def layer_graph_docs(draw: st.DrawFn) -> Any:
    """A graph-only profile document, well-formed or with values replaced, removed or added."""
    doc = draw(graph_profile_docs())
    return draw(mutated(doc)) if draw(st.booleans()) else doc


@FUZZ
@given(doc=layer_graph_docs(), command=codesign_commands, cuts=st.sampled_from(["chain", "graph"]))
def test_any_layer_graph(tmp_path_factory, doc, command, cuts):
    tmp = tmp_path_factory.mktemp("graph")
    prof = _write(tmp, "prof", doc, False)
    net = str(ROOT / "examples" / "network.json")
    _check(["validate", prof])
    _check(["profile", prof, "--json"])
    _check([*_fill(command, net=net, prof=prof), "--cuts", cuts])


@FUZZ
@given(channel=channel_docs(), command=coinference_commands)
def test_any_channel_at_its_extremes(tmp_path_factory, channel, command):
    doc = {**SYSTEM, "channel": channel}
    system = _write(tmp_path_factory.mktemp("chan"), "sys", doc, True)
    _check(_fill(command, sys=system))
    _check(["validate", system])
