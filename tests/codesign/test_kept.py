"""What compiling keeps per network and per profile: an instance compiled again from the same
objects (its parts found kept, the T* kernel's frame shared) solves as one compiled cold, as
the all-pairs engine and as the brute force, and nothing kept outlives its object."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import compile_instance, throughput_optimal
from inferplan.codesign.engine import compiled
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import Deployment, Later
from inferplan.errors import Infeasible
from inferplan.memo import KeptFor, forget_all
from inferplan.network.network import Link, Network, Node
from inferplan.profiles.ideals import chain_cuts, cuts_of
from tests.oracles import brute_force_fitting_interval, brute_force_interval
from tests.strategies import profiles_with_params, small_dags, small_profiles, with_memory

needs_numba = pytest.mark.skipif(not compiled.available(), reason="needs numba")


def _t_star(inst: CodesignInstance, engine: str, **given: np.ndarray) -> Deployment | None:
    try:
        return throughput_optimal(inst, engine=engine, **given)  # type: ignore[arg-type]
    except Infeasible:
        return None


class _Owner:
    pass


def test_a_kept_value_is_made_once_and_goes_with_its_object():
    kept: KeptFor[_Owner, list[int]] = KeptFor()
    made: list[int] = []
    first, second = _Owner(), _Owner()
    assert kept.get(first, "x", lambda: made.append(1) or [1]) == [1]
    assert kept.get(first, "x", lambda: made.append(2) or [2]) == [1]  # kept, not made again
    assert kept.get(first, "y", lambda: [3]) == [3]  # another value of the same object
    assert kept.get(second, "x", lambda: [4]) == [4]  # by identity: another object, its own
    assert made == [1] and len(kept) == 2
    del first
    gc.collect()
    assert len(kept) == 1
    forget_all()
    assert len(kept) == 0
    assert kept.get(second, "x", lambda: [5]) == [5]  # forgotten: made afresh


def test_a_new_object_at_a_collected_ones_address_finds_nothing_kept():
    kept: KeptFor[_Owner, int] = KeptFor()
    for k in range(50):  # CPython often reuses the address at once
        owner = _Owner()
        assert kept.get(owner, "x", lambda k=k: k) == k
        del owner
    assert len(kept) <= 1


def test_cuts_are_kept_per_profile_object_and_arguments():
    vgg = inferplan.vgg16()
    assert cuts_of(vgg) is cuts_of(vgg)
    assert cuts_of(vgg, "chain") is not cuts_of(vgg)  # other arguments: their own
    other = inferplan.vgg16()  # equal, not the same object: its own cuts, equal ones
    assert cuts_of(other) is not cuts_of(vgg)
    assert cuts_of(other).exact_work == chain_cuts(vgg).exact_work
    assert not cuts_of(vgg).bits.flags.writeable  # shared: read-only
    assert not cuts_of(vgg).work_between.flags.writeable


def test_compiling_again_shares_the_parts_and_sets_every_field():
    net, vgg = inferplan.tiered(seed=2), inferplan.vgg16()
    first, again = compile_instance(net, vgg), compile_instance(net, vgg)
    assert first is not again
    assert again.topology is first.topology and again.cuts is first.cuts
    assert again.memory_need is first.memory_need
    assert not again.capacity.flags.writeable and not again.link_src.flags.writeable
    names = {f.name for f in dataclasses.fields(CodesignInstance)}
    assert names <= set(again.__dict__)  # assembled without __init__: every field is set
    fresh = dataclasses.replace(again)  # through __init__: the same values
    for name in names:
        left, right = getattr(fresh, name), getattr(again, name)
        assert left is right or np.array_equal(left, right)
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.source = 3  # type: ignore[misc]


def test_a_deployment_assembled_at_once_equals_and_pickles_as_one_made_by_init():
    inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    best = throughput_optimal(inst, engine="numpy")
    fast = throughput_optimal(inst)
    made = Deployment(best.path, best.partition, best.interval, Later(lambda: best.bottleneck),
                      Later(lambda: best.latency), layers=best.layers, sends=best.sends,
                      cuts=best.cuts, ideals=best.ideals)  # fmt: skip
    assert fast == best == made
    assert pickle.loads(pickle.dumps(fast)) == made
    assert fast.to_dict() == made.to_dict()


@given(network=small_dags(), profile=small_profiles(max_blocks=6), data=st.data())
def test_t_star_warm_equals_cold_numpy_and_the_brute_force(network, profile, data):
    forget_all()
    cold = compile_instance(network, profile)
    expected = throughput_optimal(cold, engine="numpy")
    assert expected.interval == pytest.approx(brute_force_interval(network, profile), rel=1e-12)
    engines = ("auto", "compiled", "numpy") if compiled.available() else ("auto", "numpy")
    for _ in range(2):  # compiled again: every part found kept, the kernel's frame shared
        for engine in engines:
            assert throughput_optimal(compile_instance(network, profile), engine=engine) == expected
    # capacities given in place of the instance's own, then the own again: the kernel's
    # arrays hold what each call gives
    scale = data.draw(st.floats(min_value=0.25, max_value=4.0))
    capacity = np.asarray(cold.capacity) * scale
    warm = compile_instance(network, profile)
    for engine in engines:
        assert throughput_optimal(warm, capacity, engine=engine) == throughput_optimal(
            cold, capacity, engine="numpy"
        )
        assert throughput_optimal(warm, engine=engine) == expected
    capacity *= 2.0  # the same array, changed in place: read again
    assert throughput_optimal(warm, capacity, engine=engines[1]) == throughput_optimal(
        cold, capacity, engine="numpy"
    )


@given(data=st.data())
def test_t_star_with_memory_warm_equals_cold_and_the_brute_force(data):
    network = data.draw(small_dags(max_nodes=5))
    profile = data.draw(profiles_with_params(max_blocks=5))
    network = data.draw(with_memory(network, 4.0 * sum(profile.params) + 200.0))
    expected = brute_force_fitting_interval(network, profile)
    forget_all()
    engines = ("compiled", "numpy") if compiled.available() else ("numpy",)
    answers = [_t_star(compile_instance(network, profile), engine) for _ in range(2)
               for engine in engines]  # fmt: skip
    first = answers[0]
    assert all(answer == first for answer in answers)
    if first is None:
        assert math.isinf(expected)
    else:
        assert first.interval == pytest.approx(expected, rel=1e-12)


def _row(k: int, memory: float | None = None) -> Network:
    ids = [f"d{m}" for m in range(k)]
    nodes = [Node(v, 1e10, 1e-9, memory=memory) for v in ids]
    links = [Link(u, v, 1e9, 1e-9) for u, v in itertools.pairwise(ids)]
    return Network(nodes=nodes, links=links, source=ids[0], target=ids[-1])


@needs_numba
def test_profiles_and_networks_keep_their_own_frames():
    """One network, two profiles; one profile, two networks: each pair its own optimum."""
    nets = [_row(3), _row(5)]
    profiles = [inferplan.alexnet(), inferplan.vgg16()]
    expected = {(n, p): throughput_optimal(compile_instance(net, prof), engine="numpy")
                for n, net in enumerate(nets) for p, prof in enumerate(profiles)}  # fmt: skip
    for _ in range(2):
        for (n, p), answer in expected.items():
            inst = compile_instance(nets[n], profiles[p])
            assert throughput_optimal(inst, engine="compiled") == answer


@needs_numba
def test_memory_read_from_the_network_is_the_instances_own():
    profile = inferplan.alexnet()
    unlimited = throughput_optimal(compile_instance(_row(3), profile), engine="compiled")
    need = compile_instance(_row(3), profile).most_need
    tight = _row(3, memory=0.5 * need)
    limited = [_t_star(compile_instance(tight, profile), e) for e in ("compiled", "numpy")]
    assert limited[0] == limited[1]
    assert limited[0] is None or limited[0].interval >= unlimited.interval
    assert throughput_optimal(compile_instance(_row(3), profile), engine="compiled") == unlimited
