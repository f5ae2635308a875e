"""Floating-point ranges: block-range work loses no block, and the scale check judges plans."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.arrays import exact_differences
from inferplan.codesign import METHODS, compile_instance, throughput_optimal
from inferplan.codesign.engine.compiled import ENGINES
from inferplan.codesign.instance import range_sums

# Positive floats over most of the double range, drawn by decade so that tiny and huge values
# meet in one list (a plain float strategy almost never mixes them).
wide_floats = st.builds(
    lambda mantissa, exponent: mantissa * 10.0**exponent,
    st.floats(min_value=1.0, max_value=9.999),
    st.integers(min_value=-300, max_value=300),
)


@settings(max_examples=300)
@given(values=st.lists(wide_floats, min_size=1, max_size=12).filter(
    lambda v: math.isfinite(math.fsum(v))))  # fmt: skip
def test_range_sums_equal_fsum_of_each_range(values):
    sums = range_sums(values)
    n = len(values)
    for i in range(n + 1):
        for j in range(n + 1):
            expected = math.fsum(values[i:j]) if i <= j else math.inf
            assert sums[i, j] == expected, (i, j)


@settings(max_examples=100)
@given(values=st.lists(st.integers(min_value=1, max_value=2**40), min_size=1, max_size=20))
def test_range_sums_of_exact_prefix_sums_equal_fsum(values):
    """Integer FLOP counts: the prefix sums are exact and the table is their differences."""
    floats = [float(v) for v in values]
    sums = range_sums(floats)
    for i in range(len(floats) + 1):
        for j in range(i, len(floats) + 1):
            assert sums[i, j] == math.fsum(floats[i:j])


# Exact integers around the widths where the table's methods change (53 bits: floats; 105:
# two 53-bit limbs), near one another (ties of the rounding) and of either sign.
_BITS = st.sampled_from([10, 52, 53, 54, 60, 80, 104, 105, 106, 200])
_EXACT = _BITS.flatmap(
    lambda bits: st.lists(
        st.integers(min_value=-(2**bits), max_value=2**bits)
        | st.tuples(st.integers(-(2**bits), 2**bits), st.sampled_from([0, 1, 2**52, 2**53])).map(
            lambda pair: pair[0] // 2**60 * 2**60 + pair[1]
        ),
        min_size=1,
        max_size=8,
    )
)


@settings(max_examples=400)
@given(exact=_EXACT, shift=st.sampled_from([0, 1, 30, 62, 999, 1000, 1001, 1100]))
def test_exact_differences_round_each_difference_of_python_integers_once(exact, shift):
    unit = 1 << shift
    table = exact_differences(exact, unit)
    for i, p in enumerate(exact):
        for j, q in enumerate(exact):
            want = (q - p) / unit  # Python rounds an integer quotient once
            assert table[i, j] == want and math.copysign(1, table[i, j]) == math.copysign(1, want)


def _tiny_block_beside_a_huge_one() -> tuple[inferplan.Network, inferplan.Profile]:
    """Block 1 does 1e14 FLOPs, block 2 1e-3; the output is too big to send, so the slow
    target (1e-3 FLOP/s) runs block 2: 1 s, while block 1 takes 0.01 s on the source."""
    net = inferplan.Network(
        nodes=(inferplan.Node("s", 1e16, 1.0), inferplan.Node("t", 1e-3, 1.0)),
        links=(inferplan.Link("s", "t", 1e6, 1.0),),
        source="s",
        target="t",
    )
    return net, inferplan.Profile("p", flops=(1e14, 1e-3), activation_bits=(1.0, 1.0, 1e30))


@pytest.mark.parametrize("engine", ENGINES)
def test_t_star_counts_a_tiny_block_beside_a_huge_one(engine):
    net, profile = _tiny_block_beside_a_huge_one()
    best = throughput_optimal(compile_instance(net, profile), engine=engine)
    assert best.partition == (1, 2)
    assert best.interval == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_counts_a_tiny_block_beside_a_huge_one(method):
    net, profile = _tiny_block_beside_a_huge_one()
    slack = inferplan.provision(net, profile, interval=2.0, method=method)
    assert slack.cost == 0.0 and slack.interval == pytest.approx(1.0, rel=1e-12)
    plan = inferplan.provision(net, profile, interval=0.5, method=method)
    assert plan.interval == pytest.approx(0.5, rel=1e-9)
    # the target needs 1e-3 / 0.5 = 2e-3 FLOP/s, 1e-3 more than it has, at price 1
    assert plan.node_upgrades == {"t": pytest.approx(1e-3, rel=1e-9)}
    assert plan.cost == pytest.approx(1e-3, rel=1e-9)


def test_every_engine_agrees_with_exact_work_on_wide_profiles():
    """Blocks spread over 20 decades on a layered DAG: both engines, Algorithm 1 and the
    plan's own arithmetic agree on the cost."""
    rng = np.random.default_rng(5)
    flops = tuple(10.0 ** rng.uniform(-6, 14, 12))
    profile = inferplan.Profile("wide", flops, tuple(10.0 ** rng.uniform(0, 8, 13)))
    inst = compile_instance(inferplan.layered_dag(12, 30, seed=3), profile)
    beta = 0.5 * throughput_optimal(inst).interval
    costs = [inferplan.codesign.solve_psg(inst, beta, engine=e).cost for e in ENGINES]
    reference = inferplan.codesign.reference_psg(inst, beta).cost
    assert costs == pytest.approx([reference] * len(costs), rel=1e-12)


def _two_ways(price_b: float) -> inferplan.Network:
    """s -> a -> t and s -> b -> t; ``b`` is slow and priced at ``price_b``."""
    node, link = inferplan.Node, inferplan.Link
    return inferplan.Network(
        nodes=(node("s", 1e9, 1e-9), node("a", 4e9, 1e-9), node("b", 1e6, price_b),
               node("t", 1e9, 1e-9)),
        links=(link("s", "a", 1e9, 1e-9), link("a", "t", 1e9, 1e-9), link("s", "b", 1e9, 1e-9),
               link("b", "t", 1e9, 1e-9)),
        source="s", target="t",
    )  # fmt: skip


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_price_of_1e300_off_the_plan_is_no_reason_to_refuse(method):
    profile = inferplan.vgg16()
    net = _two_ways(1e300)
    beta = 0.5 * inferplan.throughput(net, profile).interval
    plan = inferplan.provision(net, profile, interval=beta, method=method)
    assert "b" not in plan.path and math.isfinite(plan.cost) and plan.feasible
    # the same plan as with b priced like the others
    same = inferplan.provision(_two_ways(1e-9), profile, interval=beta, method=method)
    assert plan.cost == pytest.approx(same.cost, rel=1e-9)


def test_a_plan_whose_cost_overflows_is_refused_as_beyond_floating_point():
    """Only ``b`` leads to the target, and its upgrade at 1e300 per FLOP/s overflows."""
    node, link = inferplan.Node, inferplan.Link
    net = inferplan.Network(
        nodes=(node("s", 1e6, 1e300), node("t", 1e6, 1e300)),
        links=(link("s", "t", 1e9, 1e-9),), source="s", target="t",
    )  # fmt: skip
    for method in sorted(METHODS):
        with pytest.raises(inferplan.errors.InvalidArgument, match="costs beyond floating"):
            inferplan.provision(net, inferplan.vgg16(), interval=1e-3, method=method)
