"""The examples in the README, the docs and the docstrings run as written."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import re
import shlex
import tempfile
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
    """Each block runs as a reader would paste it into Python in the repository's root: with
    nothing defined beforehand (the temporary folders it makes land in this test's own)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if "import torch" in code:
        pytest.importorskip("torch")
    if "import onnx" in code:
        pytest.importorskip("onnx")
    exec(compile(code, where, "exec"), {"__name__": "__main__"})


FILE = re.compile(r"[\w./-]+\.(?:json|ya?ml|py|onnx|csv|parquet|pt|safetensors)\b")
# options after which a file is written, not read
WRITES = ("-o", "--output", "--plot", "--report", "--dot", ">", "--plot-states", "--log")


def _commands(page: Path) -> list[str]:
    """The ``inferplan`` commands of a page's shell blocks (fenced, not ``python``), in order,
    continuation lines joined and prompts and comments dropped."""
    return [command for command, _ in _commands_and_errors(page)]


def _commands_and_errors(page: Path) -> list[tuple[str, str | None]]:
    """:func:`_commands`, each with the ``error:`` line the page shows after it, if any."""
    found: list[tuple[str, str | None]] = []
    fence = None
    for line in page.read_text().replace("\\\n", " ").splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence is None or fence == "python":
            continue
        if line.startswith("error: ") and found and found[-1][1] is None:
            found[-1] = (found[-1][0], line)
            continue
        line = re.sub(r"^\S*\$ ", "", line.strip()).split("  #", 1)[0].strip()
        if line.startswith("inferplan "):
            found.append((line, None))
    return found


def _reads_and_writes(command: str) -> tuple[list[str], list[str]]:
    words = command.replace(">", " > ").split()
    reads, writes = [], []
    for k, word in enumerate(words):
        for name in FILE.findall(word.split("=", 1)[-1]):
            wrote = k > 0 and (words[k - 1] in WRITES or words[k - 1].endswith("-out"))
            (writes if wrote else reads).append(name)
    return reads, writes


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_file_a_command_reads_is_shipped_or_made_before(page):
    """A reader can paste every command of a page in order from the repository's root: each
    file a command reads is in the repository or written by an earlier command of the page."""
    made: set[str] = set()
    for command in _commands(page):
        reads, writes = _reads_and_writes(command)
        for name in reads:
            if name not in made and not name.startswith("tests/"):
                assert (ROOT / name).exists(), f"{page.name}: {command}: no file {name}"
        made.update(writes)


# the commands that answer in a second or two and need no extra
QUICK = ("throughput", "provision", "frontier", "generate", "coinfer", "profile", "serve")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_quick_commands_of_a_page_run_as_pasted(page, tmp_path, monkeypatch):
    """The page's quick commands, pasted in order in a checkout (here: a folder that holds the
    examples), succeed, or fail with the very error line the page shows after them; a command
    reading what a slower one wrote is left out with it."""
    from tests.cli import app, runner

    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for command, error in _commands_and_errors(page):
        args = shlex.split(command)[1:]
        reads, writes = _reads_and_writes(command)
        heavy = any(a.startswith("transformers:") or ".py:" in a for a in args)
        if args[0] not in QUICK or heavy or not all(Path(r).exists() for r in reads):
            continue
        if ">" in args:  # the shell's redirection: stdout to the file
            args, target = args[: args.index(">")], args[args.index(">") + 1]
            result = runner.invoke(app, args)
            Path(target).write_text(result.stdout)
        else:
            result = runner.invoke(app, args)
        if error is not None:  # the page shows the command refused: exactly so
            assert (result.exit_code, result.stderr.strip()) == (2, error), command
            continue
        assert result.exit_code == 0, f"{page.name}: {command}: {result.stderr}"
        for name in writes:
            assert Path(name).exists(), f"{page.name}: {command}: wrote no {name}"


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
