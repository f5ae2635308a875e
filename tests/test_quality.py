"""The code stays lint-clean (ruff) and type-clean (mypy --strict), as CI checks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    beside = Path(sys.executable).parent / tool  # the tool of this virtual environment
    exe = str(beside) if beside.exists() else shutil.which(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_is_clean():
    result = _run("ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean():
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_packages_import_only_the_layers_below_them_and_no_cycles():
    # The contracts live in pyproject.toml ([tool.importlinter]): the layers of
    # docs/architecture.md, and no import cycle between the modules of any package.
    result = _run("lint-imports", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
