"""The compiled kernels' object code, kept on disk and loaded without numba
(``inferplan.codesign.engine.native``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from inferplan.codesign.engine import compiled, native

pytestmark = pytest.mark.skipif(not compiled.available(), reason="needs numba (the fast extra)")

# Solves a random layered network by both engines in a new process, and says whether numba
# was imported, and whether the compiled answers (plan, cost, path; T* deployment) equal
# numpy's.
SCRIPT = textwrap.dedent(
    """
    import sys
    import inferplan
    from inferplan.codesign import compile_instance, solve_psg, throughput_optimal

    inst = compile_instance(inferplan.layered_dag(80, 400, seed=5), inferplan.vgg16())
    deployments = [throughput_optimal(inst, engine=e) for e in ("compiled", "numpy")]
    beta = 0.6 * deployments[0].interval
    plans = [solve_psg(inst, beta, engine=e) for e in ("compiled", "numpy")]
    same_plan = plans[0].path == plans[1].path and plans[0].partition == plans[1].partition
    close = abs(plans[0].cost - plans[1].cost) <= 1e-9 * max(plans[1].cost, 1.0)
    print("numba" in sys.modules, same_plan and close, deployments[0] == deployments[1])
    """
)


def _run(cache: Path) -> list[str]:
    env = {**os.environ, "INFERPLAN_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600, check=True)  # fmt: skip
    return done.stdout.split()


@pytest.fixture(scope="module")
def cached() -> dict[str, Path]:
    """This process's cache files, made (compiled) if missing."""
    for name in native.SIGNATURES:
        native.kernel(name)
    return {name: native.cache_path(name) for name in native.SIGNATURES}


def test_a_new_process_solves_from_the_cache_without_importing_numba(cached, tmp_path):
    for path in cached.values():
        shutil.copy(path, tmp_path / path.name)
    assert _run(tmp_path) == ["False", "True", "True"]


def test_a_damaged_cache_file_is_compiled_again_and_replaced(cached, tmp_path):
    damaged = tmp_path / cached["psg"].name
    data = bytearray(cached["psg"].read_bytes())
    data[-100] ^= 0xFF  # one flipped byte in the machine code
    damaged.write_bytes(bytes(data))
    assert native._read(damaged) is None  # the checksum catches it
    numba_loaded, same_psg, same_t_star = _run(tmp_path)
    assert numba_loaded == "True"  # compiled again (both kernels: the directory had neither)
    assert (same_psg, same_t_star) == ("True", "True")
    assert native._read(damaged) is not None  # replaced by sound code


def test_cache_files_round_trip_and_a_missing_or_unwritable_cache_is_no_error(tmp_path):
    path = tmp_path / "sub" / "kernels-x.o"
    native._write(path, "entry", b"\x00machine\x00code")
    assert native._read(path) == ("entry", b"\x00machine\x00code")
    assert native._read(tmp_path / "missing.o") is None
    (tmp_path / "file").write_text("not a directory")
    native._write(tmp_path / "file" / "kernels-x.o", "entry", b"code")  # skipped quietly
    assert not (tmp_path / "file").is_dir()


def test_the_cache_lives_where_the_environment_says(monkeypatch, tmp_path):
    monkeypatch.setenv("INFERPLAN_CACHE_DIR", str(tmp_path / "kernels"))
    assert native.cache_dir() == tmp_path / "kernels"
    assert native.cache_path("psg").parent == tmp_path / "kernels"
    assert native.cache_path("psg") != native.cache_path("throughput")
    monkeypatch.delenv("INFERPLAN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert native.cache_dir() == tmp_path / "xdg" / "inferplan"


def test_a_kernel_refuses_arguments_of_the_wrong_kind(cached):
    throughput = native.kernel("throughput")  # work_t (2-d floats), D (1-d floats), ...
    with pytest.raises(TypeError, match="takes 21 arguments, got 2"):
        throughput(np.zeros((1, 1)), np.zeros(1))
    with pytest.raises(TypeError, match="argument 1 must be a C-contiguous 1-d float64 array"):
        throughput.pack([np.zeros(1, dtype=np.int64)], start=1)  # activations must be floats
    with pytest.raises(TypeError, match="argument 1 must be a C-contiguous"):
        throughput.pack([np.zeros(4)[::2]], start=1)  # not contiguous
    with pytest.raises(TypeError, match="argument 0 must be a C-contiguous 2-d"):
        throughput.pack([np.zeros(3)])
    work = np.zeros((2, 3))
    fields = throughput.pack([work, np.zeros(2), 7], start=0)
    assert fields.tolist()[:9] == [0, 0, 6, 8, work.ctypes.data, 2, 3, 24, 8]  # numba's fields
    assert fields.size == 9 + 7 + 1 and fields[-1] == 7
    beta_position = native.SIGNATURES["psg"].index("f8")  # PSG's one float scalar
    beta = native.kernel("psg").pack([2.5], start=beta_position)
    assert beta.tolist() == [int(np.float64(2.5).view(np.int64))]  # a float's bits


def test_a_frame_carves_the_per_call_arrays_from_one_buffer(cached):
    kernel = native.kernel("throughput")
    fixed = [np.zeros((3, 3)), np.zeros(3), 0, 1] + [np.zeros(2, dtype=np.int64)] * 6
    fixed.append(np.zeros((3, 3)))  # need_t
    shapes = [(2,), (1,), (2,), (2, 3), (3,), (3,), (3,), (2,), (2,), (1,)]
    frame = kernel.frame(fixed, shapes)
    call = frame.new()
    assert [a.shape for a in call.arrays] == shapes
    assert [a.dtype.kind for a in call.arrays] == list("ffffffiiii")
    addresses = [a.ctypes.data for a in call.arrays]
    assert addresses == sorted(addresses) and len(set(addresses)) == len(addresses)
    assert all(a.base is not None for a in call.arrays)  # views of the one buffer
    assert frame.call() is frame.call()  # a small buffer is kept for this thread
    with pytest.raises(TypeError, match="3 shapes for the arrays of 10 per-call arguments"):
        kernel.frame(fixed, [(2,), (1,), (2, 3)])


def test_threads_solving_one_instance_at_once_get_the_same_answers(cached):
    """Each thread has its own buffer (kernels run without the GIL), so concurrent solves of
    one instance do not share labels."""
    import inferplan
    from inferplan.codesign import compile_instance, solve_psg, throughput_optimal

    inst = compile_instance(inferplan.layered_dag(60, 300, seed=2), inferplan.vgg16())
    interval = throughput_optimal(inst, engine="compiled").interval
    targets = [interval * factor for factor in (0.5, 0.7, 0.9, 1.2)] * 25
    alone = {beta: solve_psg(inst, beta, engine="compiled").cost for beta in set(targets)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda beta: solve_psg(inst, beta, engine="compiled").cost,
                                 targets))  # fmt: skip
    assert together == [alone[beta] for beta in targets]
