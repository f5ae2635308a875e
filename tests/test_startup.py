"""Start-up: ``import inferplan`` and ``inferplan --help`` load no heavy dependency; every public
name still loads, on first use, from its home module.

How long start-up takes is measured by ``benchmarks/startup.py``, not here.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

HEAVY = ["scipy.stats", "scipy.optimize", "numba", "torch", "onnx", "matplotlib", "pandas", "dask"]
PACKAGES = ["inferplan", "inferplan.codesign", "inferplan.coinference", "inferplan.network",
            "inferplan.profiles", "inferplan.experiments"]  # fmt: skip


def _loaded_after(code: str, modules: list[str]) -> list[str]:
    """Run ``code`` in a fresh interpreter; which of ``modules`` it has loaded."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True, timeout=120)  # fmt: skip
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_import_inferplan_loads_no_heavy_module():
    assert _loaded_after("import inferplan", [*HEAVY, "scipy", "numpy", "networkx"]) == []


def test_the_probe_sees_a_heavy_import():
    # the check above can fail: a module the code does load is reported
    assert "scipy.optimize" in _loaded_after("import inferplan.codesign.milp.cost", HEAVY)


def test_help_loads_no_library_and_no_heavy_module():
    code = (
        "import sys\nsys.argv = ['inferplan', '--help']\nfrom inferplan.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert _loaded_after(code, [*HEAVY, "scipy", "numpy", "networkx", "pydantic", "rich"]) == []


def test_a_small_provision_loads_neither_scipy_nor_numba():
    code = (
        "import sys\nsys.argv = ['inferplan', 'provision', 'examples/network.json', 'vgg16',"
        " '--throughput', '30', '--json']\nfrom inferplan.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert _loaded_after(code, HEAVY) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_loads_from_its_home(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is not None, name
        assert name in dir(module)
        home = getattr(value, "__module__", None)
        if isinstance(value, type | types.FunctionType) and home is not None:
            assert getattr(importlib.import_module(home), name) is value
    with pytest.raises(AttributeError):
        _ = module.no_such_name


def test_a_function_named_like_its_module_stays_the_function():
    import inferplan.codesign.engine.throughput
    import inferplan.codesign.provision
    import inferplan.coinference.simulate

    assert isinstance(inferplan.codesign.provision, types.FunctionType)
    assert inferplan.codesign.throughput is inferplan.throughput
    assert isinstance(inferplan.coinference.simulate, types.FunctionType)
    from inferplan.codesign import provision, throughput

    assert provision is inferplan.provision and throughput is inferplan.throughput
