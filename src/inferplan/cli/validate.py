"""``inferplan validate FILE...``: what each input file is, or its one-line error.

A file's kind is read off its top-level fields (``study``: a sweep spec, ``services``: a
services file, ``device``/``edge``: a system, ``flops`` or ``graph``: a profile,
``nodes``/``links``: a network, ``partition``: a plan, ``block_seconds``: node times,
``kind``: a channel, as
``coinfer-fit --out`` writes it), or off its suffix (``.onnx``, profiled; ``.py``, whose
factories are listed without running it); it is then loaded exactly as the
command that takes it loads it, so a file that validates is one that command accepts.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from inferplan.cli.app import EXIT_INVALID, app, friendly_errors, one_line
from inferplan.cli.options import JsonOpt
from inferplan.cli.render import cut_words, print_json
from inferplan.errors import InferplanError, InvalidFile
from inferplan.units import cost, si

if TYPE_CHECKING:
    from inferplan.profiles.profile import Profile

Summary = dict[str, Any]


def _network(path: Path) -> Summary:
    from inferplan.network import load_network

    net = load_network(path)
    return {"nodes": len(net.nodes), "links": len(net.links), "source": net.source,
            "target": net.target}  # fmt: skip


def _profile(path: Path) -> Summary:
    from inferplan.profiles import load_profile

    return _summary(load_profile(path))


def _summary(profile: Profile) -> Summary:
    return {"name": profile.name, "blocks": profile.n_blocks, "flops": sum(profile.flops),
            "input_bits": profile.activation_bits[0],
            "measured": bool(profile.seconds)}  # fmt: skip


def _system(path: Path) -> Summary:
    from inferplan.coinference.io import check_system

    system, from_model = check_system(path)
    given = (system.memory_channel,) if system.chain is not None else system.channels
    channels = sorted(
        {" ".join(filter(None, (getattr(ch, "fading", ""), ch.kind))) for ch in given}
    )
    return {"layers": None if from_model else system.n_layers,
            "device_hz": system.device.cpu_hz, "edge_hz": system.edge.cpu_hz,
            "channel": ", ".join(channels)}  # fmt: skip


def _channel(path: Path) -> Summary:
    from inferplan.coinference.io import load_channel

    channel = load_channel(path)
    return {"channel": " ".join(filter(None, (getattr(channel, "fading", ""), channel.kind)))}


def _onnx(path: Path) -> Summary:
    from inferplan.profiles.models import model_profile

    return _summary(model_profile(str(path)))


def _python(path: Path) -> Summary:
    """The factories a Python model file defines, read without running it."""
    import ast

    from inferplan.documents import open_regular

    with open_regular(path) as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise InvalidFile(f"not Python{f' (line {line})' if line else ''}: {exc.args[0]}",
                          source=str(path)) from None  # fmt: skip
    names = [node.name for node in tree.body
             if isinstance(node, ast.FunctionDef | ast.ClassDef)
             and not node.name.startswith("_")]  # fmt: skip
    return {"factories": names}


def _services(path: Path) -> Summary:
    from inferplan.codesign.services.file import load_services

    services = load_services(path)
    return {"services": [s.name for s in services]}


def _sweep(path: Path) -> Summary:
    from inferplan.experiments.spec import load_spec

    sweep = load_spec(path)
    return {"study": sweep.study, "points": len(sweep.points)}


def _plan(path: Path) -> Summary:
    from inferplan.codesign.planfile import load_plan

    plan = load_plan(path)
    return {"path": list(plan.path), "cuts": cut_words(plan.partition, plan.ideals),
            "cost": plan.cost, "interval": plan.interval, "status": plan.status}  # fmt: skip


def _workload(path: Path) -> Summary:
    from inferplan.codesign.serving.files import load_workload

    w = load_workload(path)
    return {"requests_per_s": w.requests_per_s, "classes": len(w.classes),
            "ttft_s": w.ttft_s, "tpot_s": w.tpot_s}  # fmt: skip


def _catalog(path: Path) -> Summary:
    from inferplan.codesign.serving.files import load_catalog

    return {"gpus": [t.name for t in load_catalog(path).types]}


def _decoder(path: Path) -> Summary:
    from inferplan.codesign.serving.files import load_decoder

    d = load_decoder(str(path))
    return {"name": d.name, "layers": d.layers, "max_context": d.max_context}


def _gpu_mix(path: Path) -> Summary:
    from inferplan.codesign.serving.melange_file import load_melange

    problem = load_melange(path)
    return {"gpus": [t.name for t in problem.types], "buckets": len(problem.bucket_rates),
            "requests_per_s": sum(problem.bucket_rates)}  # fmt: skip


def _node_times(path: Path) -> Summary:
    from inferplan.codesign.timing.file import read_measured_blocks

    seconds = read_measured_blocks(path).seconds
    return {"nodes": [node for node, _ in seconds],
            "blocks": sorted({len(times) for _, times in seconds})}  # fmt: skip


# kind, the top-level fields that mark it (any of them), its loader
KINDS: tuple[tuple[str, frozenset[str], Callable[[Path], Summary]], ...] = (
    ("sweep", frozenset({"study"}), _sweep),
    ("services", frozenset({"services"}), _services),
    ("system", frozenset({"device", "edge"}), _system),
    ("profile", frozenset({"flops", "activation_bits", "graph"}), _profile),
    ("network", frozenset({"nodes", "links", "edges"}), _network),
    ("plan", frozenset({"partition", "ideals"}), _plan),
    ("workload", frozenset({"requests_per_s"}), _workload),
    ("catalog", frozenset({"gpus"}), _catalog),
    ("decoder", frozenset({"decoder"}), _decoder),
    ("channel", frozenset({"kind"}), _channel),
    ("GPU mix", frozenset({"gpu_info"}), _gpu_mix),
    ("node times", frozenset({"block_seconds"}), _node_times),
)
# kinds known by the file's suffix: files that are not documents
BY_SUFFIX: dict[str, tuple[str, Callable[[Path], Summary]]] = {
    ".onnx": ("ONNX model", _onnx),
    ".py": ("Python model file", _python),
}


def _kind(path: Path) -> tuple[str, Callable[[Path], Summary]]:
    from inferplan.documents import read_document

    if path.suffix.lower() in BY_SUFFIX:
        return BY_SUFFIX[path.suffix.lower()]
    data = read_document(path)
    keys = set(data) if isinstance(data, dict) else set()
    for kind, marks, load in KINDS:
        if keys & marks:
            return kind, load
    fields = ", ".join(sorted(f"'{m}'" for _, marks, _ in KINDS for m in marks))
    raise InvalidFile(f"not an inferplan file: it has none of the fields {fields}",
                      source=str(path))  # fmt: skip


def _describe(kind: str, s: Summary, path: Path) -> str:
    if kind == "network":
        return f"{s['nodes']} nodes, {s['links']} links, {s['source']} -> {s['target']}"
    if kind == "channel":
        return f"a {s['channel']} channel (a system file's channel)"
    if kind == "Python model file":
        names = s["factories"]
        return (
            f"defines {', '.join(names) or 'no public function or class'}; not imported "
            f"(validate runs no code): profile it as {path}:FACTORY with --input-shape"
        )
    if kind in ("profile", "ONNX model"):
        measured = ", measured seconds" if s["measured"] else ""
        return (f"{s['name']}, {s['blocks']} blocks, {si(s['flops'], 'FLOP')}, input "
                f"{si(s['input_bits'], 'bit')}{measured}")  # fmt: skip
    if kind == "system":
        layers = "layers from the model it runs" if s["layers"] is None else f"{s['layers']} layers"
        return (f"{layers}, device {si(s['device_hz'], 'Hz')}, edge {si(s['edge_hz'], 'Hz')}, "
                f"{s['channel']} channel")  # fmt: skip
    if kind == "services":
        names = s["services"]
        return f"{len(names)} service{'s' * (len(names) != 1)}: {', '.join(names)}"
    if kind == "sweep":
        return f"study {s['study']}, {s['points']} point{'s' * (s['points'] != 1)}"
    if kind == "workload":
        bounds = ", ".join(
            f"{name} {si(s[key], 's')}"
            for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
            if s[key] is not None
        )
        return (f"{s['requests_per_s']:g} requests/s, {s['classes']} classes"
                f"{', ' + bounds if bounds else ''}")  # fmt: skip
    if kind == "GPU mix":
        return (f"Mélange's format, {s['requests_per_s']:g} requests/s in {s['buckets']} "
                f"buckets, GPU types {', '.join(s['gpus'])}")  # fmt: skip
    if kind == "catalog":
        return f"GPU types {', '.join(s['gpus'])}"
    if kind == "decoder":
        return f"{s['name']}, {s['layers']} layers, context {s['max_context']}"
    if kind == "node times":
        blocks = "/".join(map(str, s["blocks"]))
        return (f"seconds per block on {', '.join(s['nodes'])} ({blocks} blocks; checked "
                "against the network and the model by provision and throughput --node-times)")
    return (f"path {' -> '.join(s['path'])}, {s['cuts']}, cost {cost(s['cost'])}, "
            f"interval {si(s['interval'], 's')} ({s['status']})")  # fmt: skip


@app.command("validate")
@friendly_errors
def validate_command(
    # described in the docstring: typer would show a list argument's type as <list[Path]>
    files: Annotated[list[Path], typer.Argument(metavar="FILE", hidden=True)],
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Check input files and say what each is.

    Each FILE is a network, profile, system, channel, services, sweep or plan file (JSON or
    YAML), an ONNX model, or a Python model file (its factories listed, the code not run).
    One line per file: its kind and what it holds, or its error (on stderr, with --json too);
    exit code 2 if any is wrong.
    """
    results: list[dict[str, Any]] = []
    for path in files:
        try:
            kind, load = _kind(path)
            summary = load(path)
        except InferplanError as exc:
            results.append({"file": str(path), "valid": False, "error": one_line(str(exc))})
        except OSError as exc:
            results.append({"file": str(path), "valid": False,
                            "error": one_line(f"{path}: {exc.strerror or exc}")})  # fmt: skip
        else:
            results.append({"file": str(path), "valid": True, "kind": kind, **summary})
            if not as_json:
                print(f"{path}: {kind}: {_describe(kind, summary, path)}")
        if not results[-1]["valid"]:
            print(f"error: {results[-1]['error']}", file=sys.stderr)
    if as_json:
        print_json({"files": results})
    if not all(r["valid"] for r in results):
        raise typer.Exit(EXIT_INVALID)
