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


def _check(args: list[str]) -> None:
    result = runner.invoke(app, args)
    context = f"args={args}\nstdout={result.stdout[-2000:]}\nstderr={result.stderr[-4000:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), context
    if result.exit_code == 0:
        extra = [line for line in result.stderr.splitlines()
                 if not line.startswith(("warning: ", "note: "))]  # fmt: skip
        assert not extra, context
        if "--json" in args:
            json.loads(result.stdout)
        return
    assert result.exit_code in (2, 3), context
    assert result.stderr.startswith("error: "), context
    assert result.stderr.count("\n") == 1, context


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
