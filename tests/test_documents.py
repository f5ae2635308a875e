"""Reading files: nesting depth, recursive aliases, numbers beyond what Python or floats hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.coinference import load_system
from inferplan.documents import MAX_DEPTH, read_document
from inferplan.errors import InvalidFile, InvalidNetwork, InvalidProfile, InvalidSystem
from inferplan.network import load_network
from inferplan.profiles import load_profile
from tests.cli import app, fifo, runner


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 200_000])
def test_deep_nesting_is_refused_with_its_place(tmp_path, suffix, depth):
    path = tmp_path / f"deep{suffix}"
    path.write_text(_nested(depth))
    with pytest.raises(InvalidFile, match=rf"nested deeper than {MAX_DEPTH} lists or mappings"):
        read_document(path)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_nesting_up_to_the_limit_is_read(tmp_path, suffix):
    path = tmp_path / f"ok{suffix}"
    path.write_text(_nested(MAX_DEPTH))
    data = read_document(path)
    for _ in range(MAX_DEPTH - 1):
        (data,) = data
    assert data == []


def test_json_position_and_brackets_inside_strings(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"a": "[[[[[[[[[[[[",\n "b": ' + _nested(MAX_DEPTH + 5) + "}")
    with pytest.raises(InvalidFile, match=r"deep\.json: .* at line 2, column 106$"):
        read_document(path)
    fine = tmp_path / "fine.json"
    fine.write_text(json.dumps({"s": "[" * 5000, "t": '\\"[' * 200}))
    assert read_document(fine)["s"] == "[" * 5000


def test_yaml_block_sequences_count_too(tmp_path):
    path = tmp_path / "dashes.yaml"
    path.write_text("- " * (MAX_DEPTH + 1) + "x\n")
    with pytest.raises(InvalidFile, match="nested deeper than"):
        read_document(path)


def test_aliases_that_nest_deeper_than_the_text_are_refused(tmp_path):
    # each anchor nests the previous one a level deeper: the text is shallow, the data is not
    lines = ["x0: &x0 [1]", *(f"x{i}: &x{i} [*x{i - 1}]" for i in range(1, 3000))]
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidFile, match=r"chain\.yaml: nested deeper than"):
        read_document(path)


def test_a_collection_containing_itself_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("source: &a [*a]\ntarget: t\n")
    with pytest.raises(InvalidFile, match="an alias refers to a collection that contains it"):
        load_network(path)


def test_shared_aliases_are_checked_once(tmp_path):
    # 10^12 leaves through shared aliases: the check visits each collection once
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert set(read_document(path)) == {f"a{i}" for i in range(12)}


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_integer_beyond_python_digit_limit(tmp_path, suffix):
    path = tmp_path / f"net{suffix}"
    path.write_text('{"source": "s", "capacity": ' + "9" * 5000 + "}")
    with pytest.raises(InvalidFile, match=r"cannot read a value: Exceeds the limit \(4300 digits"):
        read_document(path)


def test_integer_beyond_floating_point_names_the_field(tmp_path):
    path = tmp_path / "net.json"
    big = "9" * 400
    path.write_text(
        '{"source": "s", "target": "t", "nodes": [{"id": "s", "capacity": ' + big + ', "price": 1},'
        '{"id": "t", "capacity": 1, "price": 1}], "links": [{"source": "s", "target": "t", '
        '"capacity": 1, "price": 1}]}'
    )
    with pytest.raises(InvalidNetwork, match=r"nodes\[0\]\.capacity: must be a number of"):
        load_network(path)
    with pytest.raises(InvalidNetwork, match=r"got an integer of 400 digits$"):
        load_network(path)


def test_long_bad_values_are_shortened(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"flops": ["x" * 500], "activation_bits": [1, 1]}))
    with pytest.raises(InvalidProfile) as info:
        load_profile(path)
    assert str(info.value).endswith("...") and len(str(info.value)) < 200


def test_profile_parameter_counts_beyond_64_bits(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"flops": [1], "activation_bits": [1, 1], "params": [' + "9" * 400 + "]}")
    with pytest.raises(
        InvalidProfile, match=r"params: parameter counts add up to more than 2\*\*63 - 1"
    ):
        load_profile(path)


def test_trace_file_that_is_not_utf8(tmp_path):
    (tmp_path / "trace.csv").write_bytes(b"snr\n1.0\n\xff\xfe2.0\n")
    system = tmp_path / "system.yaml"
    system.write_text(
        "device: {cpu_hz: 1.0e9, kappa: 1.0e-28, tx_power_w: 0.1, bandwidth_hz: 2.0e6}\n"
        "edge: {cpu_hz: 2.0e10}\ndownlink_bps: 5.0e7\ninferences_per_update: 1000\n"
        "energy_weight: 0.5\nchannel: {kind: trace, file: trace.csv}\nprofile: alexnet\n"
    )
    with pytest.raises(InvalidSystem, match=r"trace\.csv: line 3: not UTF-8 text \(byte 0xff\)"):
        load_system(system)
    result = runner.invoke(app, ["coinfer", str(system)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1


@pytest.mark.parametrize("name", ["a\0b", "x" * 5000])
def test_names_that_cannot_be_paths_are_not_files(name):
    with pytest.raises(InvalidProfile, match="unknown built-in profile"):
        load_profile(name)


# --- integers beyond 64 bits read exactly in every form; special files never block -----------

BEYOND_64_BITS = [2**64, 2**64 + 1, -(2**63) - 1, 10**30 + 7]


@pytest.mark.parametrize("value", BEYOND_64_BITS)
def test_json_integers_beyond_64_bits_read_exactly_as_yaml_reads_them(tmp_path, value):
    # the fast parser would round them to the nearest float
    data = {"a": [value, value + 1], "b": {"c": value}, "d": "1234567890123456789012", "e": 0.5}
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "d.yaml").write_text(json.dumps(data))  # JSON is YAML
    read = read_document(tmp_path / "d.json")
    assert read == read_document(tmp_path / "d.yaml") == data
    assert isinstance(read["b"]["c"], int) and read["a"][1] - read["a"][0] == 1


def test_floats_with_long_digit_runs_are_left_to_the_fast_parser(tmp_path):
    values = [0.00012345678901234568, 1.2345678901234568e-300, 123456789012345678.5, -0.5]
    (tmp_path / "f.json").write_text(json.dumps(values))
    assert read_document(tmp_path / "f.json") == values


# integers on both sides of the 64-bit bounds, and floats as large as the fast parser's rounding
_EDGE_INTEGERS = st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1])
_JSON_LEAVES = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | _EDGE_INTEGERS.flatmap(lambda n: st.integers(min_value=n - 2, max_value=n + 2))
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([2.0**63, -(2.0**63), 1e19, -1e300])
    | st.text(max_size=3)
    | st.booleans()
    | st.none()
)
_JSON_DATA = st.recursive(
    _JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4)
    ),
    max_leaves=12,
)


def _typed(value: object) -> object:
    """``value`` with every leaf paired with its type (``1 == 1.0`` would hide a rounding)."""
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    return (type(value), value)


@settings(max_examples=300, deadline=None)
@given(data=_JSON_DATA)
def test_json_reads_exactly_what_the_standard_library_reads(tmp_path_factory, data):
    # the reference: the standard library, which reads every integer exactly
    path = tmp_path_factory.mktemp("exact") / "d.json"
    text = json.dumps(data)
    path.write_text(text)
    assert _typed(read_document(path)) == _typed(json.loads(text))


def test_a_network_of_integers_beyond_64_bits_reads_as_its_yaml_form(tmp_path):
    # the plain shape's columns take every number as a float: a rounded integer reads the same
    data = {"source": "s", "target": "t",
            "nodes": [{"id": "s", "capacity": 2**64 + 1, "price": 1e-9},
                      {"id": "t", "capacity": 10**30 + 7, "price": 1e-10}],
            "links": [{"source": "s", "target": "t", "capacity": -(2**63) - 1 + 2**65,
                       "price": 1e-8}]}  # fmt: skip
    (tmp_path / "n.json").write_text(json.dumps(data))
    (tmp_path / "n.yaml").write_text(json.dumps(data))
    assert load_network(tmp_path / "n.json") == load_network(tmp_path / "n.yaml")


def test_huge_parameter_counts_are_read_exactly_and_refused_by_the_profile(tmp_path):
    profile = load_profile("alexnet")
    data = json.loads(json.dumps(profile.to_dict()))
    data["params"] = [2**64 + k for k in range(len(data["params"]))]
    (tmp_path / "p.json").write_text(json.dumps(data))
    assert read_document(tmp_path / "p.json")["params"] == data["params"]
    with pytest.raises(InvalidProfile, match=r"params: parameter counts add up to more than"):
        load_profile(tmp_path / "p.json")


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind, suffix):
    path = tmp_path / f"n{suffix}"
    if kind == "fifo":
        fifo(path)  # a read would block until a writer came
    elif kind == "folder":
        path.mkdir()
    else:
        path = Path("/dev/null")  # /dev/zero would be read for ever
    what = {"fifo": "a FIFO", "folder": "a folder", "device": "a character device"}[kind]
    for command in (["provision", str(path), "vgg16", "--throughput", "1"],
                    ["profile", str(path)], ["coinfer", str(path)]):  # fmt: skip
        result = runner.invoke(app, command)
        assert result.exit_code == 2, command
        assert result.stderr == f"error: {path}: cannot read file ({what}, not a regular file)\n"
