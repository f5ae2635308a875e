"""GPUs from a price list (Mélange's problem): the MILP against brute force on small random
instances, the fractional optimum against an LP at every count, the assignment recomputed,
Mélange's example through ``benchmarks/melange.py`` and its files' errors."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from inferplan.codesign.serving.gpu_mix import (
    GpuMix,
    GpuMixProblem,
    ProfiledGpu,
    solve_gpu_mix,
    tensor_parallel,
)
from inferplan.errors import InvalidArgument

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "melange-example.json"


def _benchmark():
    where = ROOT / "benchmarks" / "melange.py"
    spec = importlib.util.spec_from_file_location("melange_benchmark", where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCHMARK = _benchmark()


@st.composite
def instances(draw, max_buckets=3, max_types=3, max_slices=2, max_rate=8):
    """Integer rates and sustainable rates (so that loads are exact fractions), prices as
    floats, now and then a limit on a type's GPUs, a unit of two GPUs of the first type (at
    twice or three times its rates) and a limit on the GPUs of that kind."""
    buckets = draw(st.integers(1, max_buckets))
    types = []
    for t in range(draw(st.integers(1, max_types))):
        rates = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, 13]), min_size=buckets,
                                    max_size=buckets)))  # fmt: skip
        price = draw(st.sampled_from([0.4, 1.01, 1.5, 2.0, 3.67, 5.0]))
        available = draw(st.one_of(st.none(), st.integers(0, 4)))
        types.append(ProfiledGpu(f"gpu{t}", price, rates, available))
    limits = ()
    if draw(st.booleans()):
        types.append(tensor_parallel(types[0], 2, draw(st.sampled_from([1.0, 1.5]))))
        if draw(st.booleans()):
            limits = (("gpu0", draw(st.integers(0, 6))),)
    rates = tuple(draw(st.lists(st.integers(0, max_rate), min_size=buckets, max_size=buckets)))
    return GpuMixProblem(tuple(float(r) for r in rates), tuple(types),
                         draw(st.integers(1, max_slices)), gpu_limits=limits)  # fmt: skip


def _exact_load(problem: GpuMixProblem, b: int, t: int) -> Fraction:
    """Bucket b's whole rate on type t, in GPUs, exactly (the rates are integers)."""
    return Fraction(int(problem.bucket_rates[b])) / Fraction(int(problem.types[t].rates[b]))


def _limit(gpu: ProfiledGpu) -> float:
    return math.inf if gpu.available is None else gpu.available


def _within_limits(problem: GpuMixProblem, counts) -> bool:
    """The counts within each type's units available and each kind's GPUs."""
    if any(n > _limit(gpu) for n, gpu in zip(counts, problem.types, strict=True)):
        return False
    return all(
        sum(g.gpus * n for g, n in zip(problem.types, counts, strict=True) if g.kind == kind)
        <= size
        for kind, size in problem.gpu_limits
    )


def brute_sliced(problem: GpuMixProblem) -> float | None:
    """Every way of giving each slice to a type that serves its size; each way needs the
    least counts that carry its loads. The cheapest within the limits (None: no way)."""
    S, T = problem.slices, len(problem.types)
    slices = [b for b, r in enumerate(problem.bucket_rates) if r > 0 for _ in range(S)]
    best = None
    choices = [[t for t in range(T) if problem.types[t].rates[b] > 0] for b in slices]
    for pick in itertools.product(*choices):
        load = [Fraction(0)] * T
        for b, t in zip(slices, pick, strict=True):
            load[t] += _exact_load(problem, b, t) / S
        counts = [math.ceil(x) for x in load]
        if not _within_limits(problem, counts):
            continue
        cost = sum(n * gpu.price_per_hour for n, gpu in zip(counts, problem.types, strict=True))
        best = cost if best is None else min(best, cost)
    return best


def _fractional_feasible(problem: GpuMixProblem, counts: tuple[int, ...]) -> bool:
    """Whether some split of every bucket's rate across types fits these counts (an LP)."""
    B, T = len(problem.bucket_rates), len(problem.types)
    busy = [b for b in range(B) if problem.bucket_rates[b] > 0]
    pairs = [(b, t) for b in busy for t in range(T) if problem.types[t].rates[b] > 0]
    if any(all(p[0] != b for p in pairs) for b in busy):
        return False
    if not pairs:
        return True
    a_eq = np.zeros((len(busy), len(pairs)))
    a_ub = np.zeros((T, len(pairs)))
    for k, (b, t) in enumerate(pairs):
        a_eq[busy.index(b), k] = 1.0
        a_ub[t, k] = float(_exact_load(problem, b, t))
    out = linprog(np.zeros(len(pairs)), A_ub=a_ub, b_ub=np.array(counts, float), A_eq=a_eq,
                  b_eq=np.ones(len(busy)), bounds=(0, 1), method="highs")  # fmt: skip
    return bool(out.status == 0)


def brute_fractional(problem: GpuMixProblem, ceiling: float) -> float | None:
    """The cheapest counts, at most ``ceiling`` $/h, at which the LP of a free split is
    feasible, tried in increasing price (None: none)."""
    boxes = []
    for t, gpu in enumerate(problem.types):
        whole = sum((_exact_load(problem, b, t) for b, r in enumerate(problem.bucket_rates)
                     if r > 0 and gpu.rates[b] > 0), Fraction(0))  # fmt: skip
        boxes.append(range(int(min(math.ceil(whole), _limit(gpu))) + 1))
    priced = []
    for counts in itertools.product(*boxes):
        cost = sum(n * gpu.price_per_hour for n, gpu in zip(counts, problem.types, strict=True))
        if cost <= ceiling + 1e-9 and _within_limits(problem, counts):
            priced.append((cost, counts))
    for cost, counts in sorted(priced):
        if _fractional_feasible(problem, counts):
            return cost
    return None


def check_serves(problem: GpuMixProblem, mix: GpuMix) -> None:
    """The assignment serves each bucket's whole rate, only on types that can serve it, within
    the counts (and their limits) it bought, and the cost is the counts' price."""
    assert mix.status == "optimal"
    carried = [0.0] * len(problem.types)
    for b, rate in enumerate(problem.bucket_rates):
        row = mix.served[b]
        assert math.isclose(sum(row), rate, rel_tol=1e-9, abs_tol=1e-9)
        for t, (q, gpu) in enumerate(zip(row, problem.types, strict=True)):
            assert q >= 0
            if q > 0:
                assert gpu.rates[b] > 0
                carried[t] += q / gpu.rates[b]
        if mix.slices is not None:
            assert sum(mix.slices[b]) == (problem.slices if rate > 0 else 0)
            for t, k in enumerate(mix.slices[b]):
                assert math.isclose(row[t], rate * k / problem.slices, abs_tol=1e-12)
    for t in range(len(problem.types)):
        assert carried[t] <= mix.counts[t] * (1 + 1e-8) + 1e-12
    assert _within_limits(problem, mix.counts)
    for kind, _ in problem.gpu_limits:
        assert mix.gpus_of().get(kind, 0) == sum(
            g.gpus * n for g, n in zip(problem.types, mix.counts, strict=True) if g.kind == kind
        )
    price = sum(n * gpu.price_per_hour for n, gpu in zip(mix.counts, problem.types, strict=True))
    assert math.isclose(mix.cost, price, rel_tol=1e-12)
    assert mix.lower_bound <= mix.cost * (1 + 1e-8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_sliced_mix_is_the_brute_force_optimum(problem):
    mix = solve_gpu_mix(problem)
    best = brute_sliced(problem)
    if best is None:
        assert mix.status == "infeasible" and mix.reason
        assert mix.to_dict()["cost"] is None
        return
    check_serves(problem, mix)
    assert math.isclose(mix.cost, best, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_rate=5))
@example(  # HiGHS leaves crumbs of 1e-15 of a bucket on types that would each cost a GPU
    GpuMixProblem(
        (0.0, 3.0, 1.0),
        (ProfiledGpu("gpu0", 0.4, (0, 1, 0)), ProfiledGpu("gpu1", 0.4, (0, 3, 1)),
         ProfiledGpu("gpu0x2", 0.8, (0, 2, 0), gpus=2, kind="gpu0")),
        gpu_limits=(("gpu0", 2),),
    )
)
@example(  # HiGHS at a tolerance of 1e-10 proved (0, 1, 1) at $1.41/h optimal, its bound too
    GpuMixProblem(
        (0.0, 1.0, 1.0),
        (ProfiledGpu("gpu0", 1.01, (0, 1, 0)), ProfiledGpu("gpu1", 1.01, (0, 0, 3)),
         ProfiledGpu("gpu2", 0.4, (0, 1, 1))),
    )
)
@example(  # and 2 + 2 GPUs at $5.02/h where 1 + 3 carry a free split at $4.53/h
    GpuMixProblem(
        (3.0, 4.0), (ProfiledGpu("gpu0", 1.5, (2, 0)), ProfiledGpu("gpu1", 1.01, (1, 2)))
    )
)
def test_fractional_mix_is_the_least_counts_a_free_split_fits(problem):
    sliced = solve_gpu_mix(problem)
    split = solve_gpu_mix(problem, fractional=True)
    assert split.slices is None
    if split.status == "infeasible":
        assert sliced.status == "infeasible"
        assert brute_fractional(problem, math.inf) is None
        return
    check_serves(problem, split)
    if sliced.status != "infeasible":
        assert split.cost <= sliced.cost + 1e-9  # a free split can do what slices do
    # no counts cheaper than the mix's admit a free split, and the mix's own do
    assert math.isclose(brute_fractional(problem, split.cost), split.cost, rel_tol=1e-9)


def test_a_free_split_of_the_pinned_problem_is_two_of_the_cheapest_gpus():
    # the relaxation may not cost more than the sliced problem: gpu2 serves both buckets
    gpus = (ProfiledGpu("gpu0", 1.01, (0, 1, 0)), ProfiledGpu("gpu1", 1.01, (0, 0, 3)),
            ProfiledGpu("gpu2", 0.4, (0, 1, 1)))  # fmt: skip
    problem = GpuMixProblem((0.0, 1.0, 1.0), gpus)
    sliced, split = solve_gpu_mix(problem), solve_gpu_mix(problem, fractional=True)
    assert sliced.counts == split.counts == (0, 0, 2)
    assert split.status == "optimal" and math.isclose(split.cost, 0.8)
    assert math.isclose(split.lower_bound, 0.8)


@st.composite
def plain_instances(draw):
    """Two or three buckets and types without limits, prices among a few, rates small
    integers: where HiGHS's bounds went wrong at a tolerance of 1e-10."""
    buckets, types = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    gpus = tuple(
        ProfiledGpu(f"gpu{t}", draw(st.sampled_from([0.4, 1.01, 1.5, 2.0, 3.67])),
                    tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=buckets,
                                        max_size=buckets))))
        for t in range(types)
    )  # fmt: skip
    rates = draw(st.lists(st.integers(0, 4), min_size=buckets, max_size=buckets))
    return GpuMixProblem(tuple(float(r) for r in rates), gpus)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_instances())
def test_free_split_and_slices_are_their_brute_forces_and_in_order(problem):
    sliced, split = solve_gpu_mix(problem), solve_gpu_mix(problem, fractional=True)
    best_sliced, best_split = brute_sliced(problem), brute_fractional(problem, math.inf)
    assert (best_sliced is None) == (sliced.status == "infeasible")
    assert (best_split is None) == (split.status == "infeasible")
    if best_sliced is None or best_split is None:
        assert best_sliced is None and best_split is None  # one type serving a size suffices
        return
    check_serves(problem, sliced)
    check_serves(problem, split)
    assert math.isclose(sliced.cost, best_sliced, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(split.cost, best_split, rel_tol=1e-9, abs_tol=1e-9)
    assert split.cost <= sliced.cost + 1e-9


def test_more_slices_never_cost_more_than_fewer_that_divide_them():
    # S slices are also 2 S slices taken two by two: the optimum cannot rise
    rng = np.random.default_rng(5)
    for _ in range(20):
        types = tuple(
            ProfiledGpu(f"g{t}", float(rng.uniform(0.5, 4)), tuple(rng.uniform(0.5, 9, 4)))
            for t in range(3)
        )
        base = GpuMixProblem(tuple(rng.uniform(0, 20, 4)), types, 1)
        costs = [solve_gpu_mix(GpuMixProblem(base.bucket_rates, types, s)).cost
                 for s in (1, 2, 4)]  # fmt: skip
        free = solve_gpu_mix(base, fractional=True).cost
        assert costs[0] >= costs[1] - 1e-9 >= costs[2] - 2e-9 >= free - 3e-9


def test_a_time_limit_gives_a_mix_that_serves_or_none():
    problem = BENCHMARK.melange_from_dict(BENCHMARK.generate(3))
    mix = solve_gpu_mix(problem, time_limit=1e-3)
    assert mix.status in ("time_limit", "optimal")
    if math.isfinite(mix.cost):
        carried = np.zeros(len(problem.types))
        for b, row in enumerate(mix.served):
            assert math.isclose(sum(row), problem.bucket_rates[b], rel_tol=1e-9, abs_tol=1e-9)
            for t, q in enumerate(row):
                carried[t] += q / problem.types[t].rates[b] if q else 0.0
        assert np.all(carried <= np.array(mix.counts) * (1 + 1e-8) + 1e-12)


def test_a_tensor_parallel_unit_is_k_gpus_priced_and_profiled_as_one():
    one = ProfiledGpu("L4", 0.8, (3.0, 0.0, 1.5), available=7)
    four = tensor_parallel(one, 4, 0.75)
    assert (four.name, four.gpus, four.kind, four.available) == ("L4x4", 4, "L4", 1)
    assert four.price_per_hour == pytest.approx(3.2)
    assert four.rates == pytest.approx((9.0, 0.0, 4.5))
    with pytest.raises(InvalidArgument, match="integer >= 1"):
        tensor_parallel(one, 0, 1.0)
    with pytest.raises(InvalidArgument, match="positive"):
        tensor_parallel(one, 2, 0.0)


def test_a_kind_limit_holds_over_its_units():
    # 10 req/s in two slices of 5/s; one L4 serves 3/s at $1, a pair of them 9/s at $1.5, an
    # H100 20/s at $5. Two pairs ($3, four L4s) are cheapest. With three L4s at most, one pair
    # carries one slice and the other needs two L4s or an H100 (four L4s, or $6.5), and three
    # L4s alone serve 9/s: the H100 alone ($5) is cheapest.
    one = ProfiledGpu("L4", 1.0, (3.0,))
    pair = ProfiledGpu("L4x2", 1.5, (9.0,), gpus=2, kind="L4")
    big = ProfiledGpu("H100", 5.0, (20.0,))
    free = solve_gpu_mix(GpuMixProblem((10.0,), (one, pair, big), slices=2))
    assert free.count_of() == {"L4x2": 2} and free.gpus_of() == {"L4": 4}
    tight = solve_gpu_mix(GpuMixProblem((10.0,), (one, pair, big), slices=2,
                                        gpu_limits=(("L4", 3),)))  # fmt: skip
    assert tight.count_of() == {"H100": 1} and tight.status == "optimal"
    none = solve_gpu_mix(GpuMixProblem((10.0,), (one, pair), gpu_limits=(("L4", 3),)))
    assert none.status == "infeasible" and "L4 GPUs <= 3" in none.reason


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ProfiledGpu("a", -1.0, (1.0,)), "types['a'].price_per_hour"),
        (lambda: ProfiledGpu("a", 1.0, (math.nan,)), "types['a'].rates[0]"),
        (lambda: ProfiledGpu("a", 1.0, (1.0,), available=-1), "types['a'].available"),
        (lambda: GpuMixProblem((1.0, 2.0), (ProfiledGpu("a", 1.0, (1.0,)),)), "types['a'].rates"),
        (lambda: GpuMixProblem((-1.0,), (ProfiledGpu("a", 1.0, (1.0,)),)), "bucket_rates[0]"),
        (lambda: GpuMixProblem((1.0,), (ProfiledGpu("a", 1.0, (1.0,)),), slices=0), "slices"),
        (lambda: GpuMixProblem((1.0,), (ProfiledGpu("a", 1.0, (1.0,)),) * 2), "types"),
        (lambda: GpuMixProblem((1.0,), ()), "types"),
        (lambda: ProfiledGpu("a", 1.0, (1.0,), gpus=0), "types['a'].gpus"),
        (lambda: GpuMixProblem((1.0,), (ProfiledGpu("a", 1.0, (1.0,)),), gpu_limits=(("b", 1),)),
         "gpu_limits['b']"),
        (lambda: GpuMixProblem((1.0,), (ProfiledGpu("a", 1.0, (1.0,)),), gpu_limits=(("a", -1),)),
         "gpu_limits['a']"),
    ],
)
def test_bad_problems_name_the_field(make, field):
    with pytest.raises(InvalidArgument) as caught:
        make()
    assert caught.value.field == field


# --- Mélange's example and its files through the benchmark ---------------------------------


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = BENCHMARK.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_melanges_example_gives_its_published_answer(capsys):
    code, out, _ = _run(capsys, str(EXAMPLE), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["counts"] == {"A10G": 3, "A100-80GB": 1}  # Mélange's README
    assert result["cost"] == pytest.approx(6.70)
    assert result["status"] == "optimal"


def test_melanges_example_split_freely(capsys):
    # By hand: one A100-80GB alone would carry 6/20 + 3/20 + 15/40 + 6/20 = 1.125 GPUs; split
    # freely it takes all but a third of the 15 req/s bucket (0.75 + 10/40 = 1) and one A10G
    # the 5 req/s left (5/5 = 1), $1.01 + $3.67; no single type is cheaper (12 A10G, 2 A100s).
    code, out, _ = _run(capsys, str(EXAMPLE), "--json", "--fractional")
    assert code == 0
    result = json.loads(out)
    assert result == {"counts": {"A10G": 1, "A100-80GB": 1}, "cost": pytest.approx(4.68),
                      "status": "optimal"}  # fmt: skip


def test_the_table_names_each_buckets_types(capsys):
    code, out, _ = _run(capsys, str(EXAMPLE))
    assert code == 0
    assert "A10G: 3" in out and "bucket 1,1:" in out


def _file(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "melange.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _example() -> dict:
    return json.loads(EXAMPLE.read_text())


def _with(change):
    data = _example()
    change(data)
    return data


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (_with(lambda d: d.pop("gpu_info")), "gpu_info: missing field"),
        (_with(lambda d: d["gpu_info"]["A10G"].update(cost=-1)), "gpu_info.A10G.cost"),
        (_with(lambda d: d["gpu_info"]["A10G"].update(cost=0)), "gpu_info.A10G.cost"),
        (_with(lambda d: d["gpu_info"]["A10G"].pop("cost")), "gpu_info.A10G.cost: missing"),
        (_with(lambda d: d["gpu_info"]["A10G"].update(tputs=[[2, 1]])), "gpu_info.A10G.tputs"),
        (_with(lambda d: d["gpu_info"]["A10G"].update(tputs=[[2, 1], [5]])),
         "gpu_info.A10G.tputs: row [1] has 1 columns"),
        (_with(lambda d: d["gpu_info"]["A100-80GB"]["tputs"][0].__setitem__(0, -3)),
         "gpu_info.A100-80GB.tputs[0][0]"),
        (_with(lambda d: d.update(gpu_info={})), "gpu_info"),
        (_with(lambda d: d.update(workload_distribution=[[0.5, 0.5], [0.0]])),
         "workload_distribution: row [1]"),
        (_with(lambda d: d.update(workload_distribution=[[0.2, 0.1], [0.5, 0.1]])),
         "workload_distribution: the shares sum to 0.9"),
        (_with(lambda d: d.update(total_request_rate=-30)), "total_request_rate"),
        (_with(lambda d: d.update(total_request_rate="fast")), "total_request_rate"),
        (_with(lambda d: d.update(slice_factor=0)), "slice_factor"),
        (_with(lambda d: d.update(slice_factor=1.5)), "slice_factor"),
        (_with(lambda d: d.update(slicefactor=4)), "slicefactor: unknown field"),
        ('{"gpu_info": {}, "total_request_rate": NaN}', "gpu_info"),
        ("[1, 2]", "the top level must be a mapping"),
        ('{"gpu_info": ', "malformed JSON"),
    ],
)
def test_bad_melange_files_are_one_line_naming_the_field(capsys, tmp_path, data, where):
    path = _file(tmp_path, data)
    code, out, err = _run(capsys, str(path), "--json")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"error: {path}: ")
    assert where in err


def test_nan_rate_names_the_field(capsys, tmp_path):
    data = json.dumps(_example()).replace('"total_request_rate": 30.0', '"total_request_rate": NaN')
    code, _, err = _run(capsys, str(_file(tmp_path, data)))
    assert code == 2 and "total_request_rate" in err and err.count("\n") == 1


def test_a_missing_file_is_one_line(capsys, tmp_path):
    code, _, err = _run(capsys, str(tmp_path / "none.json"))
    assert code == 2 and err.count("\n") == 1 and "file not found" in err


def test_a_size_no_gpu_serves_is_infeasible_exit_3(capsys, tmp_path):
    data = _example()
    for gpu in data["gpu_info"].values():
        gpu["tputs"][1][0] = 0
    code, out, err = _run(capsys, str(_file(tmp_path, data)), "--json")
    assert code == 3
    assert json.loads(out) == {"counts": {}, "cost": None, "status": "infeasible"}
    assert err.startswith("error: ") and "bucket '1,0'" in err and err.count("\n") == 1


def test_generated_problems_are_melange_files(tmp_path, capsys):
    path = tmp_path / "g.json"
    code, _, _ = _run(capsys, "--generate", str(path), "--seed", "1", "--types", "4",
                      "--buckets", "3")  # fmt: skip
    assert code == 0
    data = json.loads(path.read_text())
    assert len(data["gpu_info"]) == 4
    assert np.array(data["workload_distribution"]).shape == (3, 3)
    code, out, _ = _run(capsys, str(path), "--json")
    assert code == 0 and json.loads(out)["status"] == "optimal"


def test_the_slice_factor_of_the_file_cuts_each_bucket(tmp_path):
    data = _example()
    data["slice_factor"] = 4
    path = tmp_path / "melange.yaml"  # Mélange's fields read from YAML too
    path.write_text("\n".join(f"{key}: {json.dumps(value)}" for key, value in data.items()))
    problem = BENCHMARK.load_melange(path)
    assert problem.slices == 4
    assert problem.bucket_rates == pytest.approx((6.0, 3.0, 15.0, 6.0))
    mix = solve_gpu_mix(problem)
    check_serves(problem, mix)
    assert mix.slices is not None and all(sum(row) == 4 for row in mix.slices)
    # quarter slices can only do better than whole buckets, never better than a free split
    assert solve_gpu_mix(problem, fractional=True).cost - 1e-9 <= mix.cost <= 6.70 + 1e-9
