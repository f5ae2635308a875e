"""The examples in the README, the docs and the docstrings run as written."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import re
from pathlib import Path

import pytest

import inferplan

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for k, code in enumerate(BLOCK.findall(page.read_text())):
            out.append((f"{page.name}#{k + 1}", code))
    return out


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[w for w, _ in _blocks()])
def test_python_blocks_in_docs_run(where, code, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if "import torch" in code:
        pytest.importorskip("torch")
    if "import onnx" in code:
        pytest.importorskip("onnx")
    exec(compile(code, where, "exec"), {"__name__": "__docs__", "TMP": tmp_path})


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(inferplan.__path__, "inferplan."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # a module behind an optional extra that is not installed
        pytest.skip(str(exc))
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed in {name}"


def test_readme_quick_start_commands_match_ci():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2
    assert "inferplan provision examples/" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATH_MENTION = re.compile(r"(?<![\w/.])((?:docs|tests|examples|benchmarks|src)/[\w./-]+\.\w+)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", page.read_text(), re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_reference_points_into_the_repository(page):
    text = page.read_text()
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        assert where.exists(), f"{page.name}: link to {target}: no such file"
        if anchor and where.suffix == ".md":
            assert anchor in _anchors(where), f"{page.name}: link to {target}: no such heading"
    for mention in PATH_MENTION.findall(text):
        assert (ROOT / mention.rstrip(".")).exists(), f"{page.name}: {mention}: no such file"
    for outside in ("MODEL.md", "seeds/"):
        assert outside not in text, f"{page.name} cites {outside}, which is not in the repository"
