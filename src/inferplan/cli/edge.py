"""``inferplan edge serve`` and ``inferplan device run``: device-edge co-inference, executed.

Both need the ``torch`` and ``serve`` extras; their modules are imported when a command runs.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import BlocksOpt, DtypeOpt, RunShapesOpt
from inferplan.cli.render import console, print_json, table, working
from inferplan.coinference.strategies import FIXED_PREFIX, STRATEGIES
from inferplan.errors import InvalidArgument, InvalidFile, InvalidProfile
from inferplan.units import etc_unit

if TYPE_CHECKING:
    from inferplan.runtime.device import DeviceRun
    from inferplan.runtime.layered import LayeredModel, ModelSpec

edge_app = typer.Typer(help="The edge server of device-edge co-inference.", no_args_is_help=True)
device_app = typer.Typer(help="A device that co-infers with an edge server.", no_args_is_help=True)
app.add_typer(edge_app, name="edge")
app.add_typer(device_app, name="device")

SystemArg = Annotated[Path, typer.Argument(help="System file of `inferplan coinfer` (YAML/JSON).")]
ModelArg = Annotated[str, typer.Argument(help=(
    "alexnet, mlp-WIDTHxDEPTH, or a PyTorch module as module.path:factory (or file.py:factory); "
    "the same on the edge and the device."))]  # fmt: skip
TokenOpt = Annotated[Path | None, typer.Option(
    "--token-file", help="File holding the bearer token every request carries.")]  # fmt: skip


def _runtime() -> None:
    try:
        import safetensors  # noqa: F401
        import starlette  # noqa: F401
        import torch  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise InvalidProfile(
            f"co-inference needs {exc.name} (pip install 'inferplan[torch,serve]')"
        ) from None


def _builtin_blocks(model: str, blocks: str | None) -> tuple[str, tuple[str, ...]] | None:
    """A built-in model's name and blocks, known without torch (an unknown name is refused
    here); ``None`` for a ``MODULE:FACTORY`` or blocks regrouped by ``--blocks``, whose count
    only the built model tells."""
    from inferplan.runtime.examples import builtin_model, is_builtin_model

    if not is_builtin_model(model):
        return None
    builtin = builtin_model(model)
    return None if blocks is not None else (builtin.name, builtin.blocks)


def _check_layers(system: Path, model: tuple[str, tuple[str, ...]] | None) -> None:
    """The system file, checked without torch; when ``model`` (its name and blocks) is known,
    a file with explicit layers must give one per block."""
    from inferplan.coinference.io import check_system, layer_count_error  # loads scipy

    checked, from_model = check_system(system)
    if model is not None and not from_model and checked.n_layers != len(model[1]):
        raise layer_count_error(system, checked.n_layers, *model)


def _check_method(method: str, n_layers: int | None) -> None:
    """The strategy's name, and ``fixed:K`` against the model's ``n_layers`` when known."""
    from inferplan.coinference.strategies import get_strategy

    try:
        get_strategy(method, n_layers=n_layers)
    except InvalidArgument as exc:
        raise InvalidArgument(exc.message, field="method") from None


def _check_edge(system: Path, url: str, token: str | None, timeout: float, retries: int,
                model: str, blocks: str | None, method: str) -> None:  # fmt: skip
    """The model's name, the system file, and the edge: it answers, takes the token and serves
    a model with as many layers as the system file gives (when it gives them); the method
    for as many layers as that model has."""
    from inferplan.runtime.client import EdgeClient, served_model

    _builtin_blocks(model, blocks)  # an unknown built-in name, before the edge is asked
    client = EdgeClient(url, token=token, timeout_s=timeout, retries=retries, backoff_s=0.1)
    try:
        served = served_model(client)
    finally:
        client.close()
    names = served.get("names")
    known = (str(served.get("model")), tuple(map(str, names))) if isinstance(names, list) else None
    _check_layers(system, known)
    _check_method(method, None if known is None else len(known[1]))


def _spec(model: str, shapes: list[str] | None, blocks: str | None, dtype: str) -> ModelSpec:
    from inferplan.profiles.cuts import parse_block_spec, parse_shape
    from inferplan.runtime.layered import ModelSpec

    parsed = [parse_shape(s) for s in shapes or []]
    return ModelSpec(
        model,
        input_shapes=tuple(s for s, _ in parsed),
        blocks=parse_block_spec(blocks),
        dtype=dtype,
        input_dtypes=tuple(d for _, d in parsed),
    )


@edge_app.command("serve")
@friendly_errors
def serve_command(
    system: SystemArg,
    model: ModelArg,
    input_shape: RunShapesOpt = None,
    blocks: BlocksOpt = None,
    dtype: DtypeOpt = "float32",
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=1, max=65535)] = 8000,
    token_file: TokenOpt = None,
    weights_seed: Annotated[int, typer.Option(
        "--weights-seed", help="Seed of the model's weights.", min=0)] = 0,
    max_body_mb: Annotated[float | None, typer.Option(
        "--max-body-mb", help="Largest request body (default: 4x the largest activation "
                              "+ 1 MiB).")] = None,
) -> None:  # fmt: skip
    """Serve layers to devices and finish their inferences.

    A Starlette app on uvicorn: devices download the weights of the layers they place and upload
    activations for the edge to finish.
    """
    from inferplan.runtime.client import listen, read_token

    # Everything that needs no torch is checked before torch is imported.
    token = read_token(token_file) if token_file is not None else None
    if max_body_mb is not None and not (math.isfinite(max_body_mb) and max_body_mb > 0):
        raise InvalidArgument(f"must be positive, got {max_body_mb}", field="--max-body-mb")
    sock = listen(host, port)  # an address in use is refused before the model is built
    _check_layers(system, _builtin_blocks(model, blocks))
    _runtime()
    from inferplan.runtime.edge import EdgeService, create_app, serve
    from inferplan.runtime.layered import build_layers, load_model_system

    layered = build_layers(_spec(model, input_shape, blocks, dtype), weights=True,
                           seed=weights_seed)  # fmt: skip
    sys_ = load_model_system(system, layered.profile)
    limit = None if max_body_mb is None else int(max_body_mb * (1 << 20))
    service = EdgeService(layered, sys_, max_body_bytes=limit)
    print(
        f"edge: serving {layered.name} ({layered.n_layers} layers) on http://{host}:{port}"
        + (" (bearer token required)" if token else ""),
        file=sys.stderr,
    )
    serve(create_app(service, token=token), sock)
    stats = service.stats()
    times = stats.get("service_s")
    summary = (f", service time p50 {1e3 * times['p50']:.2f} ms, p99 {1e3 * times['p99']:.2f} ms"
               if times else "")  # fmt: skip
    print(f"edge: stopped after {stats['requests']} inference requests{summary}", file=sys.stderr)


def _load_inputs(path: Path, layered: LayeredModel, inferences: int | None) -> list[Any]:
    from inferplan.runtime.measure import load_inputs

    if len(layered.crossings[0]) != 1:
        raise InvalidArgument("an inputs file takes models with one input", field="inputs")
    (shape, dtype), = layered.crossings[0]  # fmt: skip
    data = load_inputs(path, tuple(shape), dtype=dtype)
    if inferences is not None and inferences > len(data):
        raise InvalidArgument(f"{inferences} inferences but {path} holds {len(data)} inputs",
                              field="inferences")  # fmt: skip
    return [(x.contiguous(),) for x in data[:inferences]]


def _read_snr(path: Path) -> Any:
    import numpy as np

    from inferplan.documents import read_text

    rows = []
    lines = read_text(path).splitlines()
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            rows.append([float(v) for v in text.split(",")])
        except ValueError:
            if rows or number > 1:
                raise InvalidFile(f"line {number}: not numbers: {text!r}", source=str(path)
                                  ) from None  # fmt: skip
    if not rows or len({len(r) for r in rows}) != 1:
        raise InvalidFile("needs rows of N + 1 SNR values, all of one length", source=str(path))
    return np.asarray(rows)


def _write_log(run: DeviceRun, path: Path) -> None:
    """The decisions; with the gain's phase after the SNR where the device observed it."""
    phased = any(d.phase is not None for d in run.decisions)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["inference", "stage", "snr", *(["phase"] if phased else []), "action"])
        for d in run.decisions:
            seen = [repr(d.snr), *([repr(d.phase)] if phased else [])]
            writer.writerow([d.inference, d.stage, *seen, d.action])


def _write_outputs(run: DeviceRun, path: Path) -> None:
    """The completed outputs, stacked in input order; after failures, those that completed
    (the summary's ``failed`` says which are missing)."""
    import torch

    outputs = [out for out in run.outputs if out is not None]
    if not outputs:
        print(f"warning: {path} not written: no inference completed", file=sys.stderr)
        return
    stacked = [torch.cat([out[k] for out in outputs]) for k in range(len(outputs[0]))]
    torch.save(stacked[0] if len(stacked) == 1 else tuple(stacked), path)
    if run.failed:
        print(f"warning: {path} holds the {len(outputs)} completed outputs, in input order; "
              f"failed (not in it): {list(run.failed)}", file=sys.stderr)  # fmt: skip


@device_app.command("run")
@friendly_errors
def run_command(
    system: SystemArg,
    model: ModelArg,
    edge: Annotated[str | None, typer.Option("--edge", help="URL of the edge, e.g. "
                                             "http://127.0.0.1:8000 (not with --testbed).")
                    ] = None,
    input_shape: RunShapesOpt = None,
    blocks: BlocksOpt = None,
    dtype: DtypeOpt = "float32",
    token_file: TokenOpt = None,
    method: Annotated[str, typer.Option("--method", help=(
        f"A strategy: {', '.join(STRATEGIES)}, or {FIXED_PREFIX}K (K layers on the device, "
        "always upload after them)."))] = "optimal",
    inferences: Annotated[int | None, typer.Option(
        "--inferences", help="Inferences to run (default 100, or all --inputs).", min=1)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of SNR draws and random inputs.",
                                      min=0)] = 0,
    inputs: Annotated[Path | None, typer.Option(
        "--inputs", help="Tensor file (torch.save) of K inputs stacked on the first "
                         "dimension.")] = None,
    outputs: Annotated[Path | None, typer.Option(
        "--outputs", help="Write the K outputs, stacked in input order.")] = None,
    log: Annotated[Path | None, typer.Option(
        "--log", help="CSV of every decision: inference,stage,snr,action (on Rician fading "
                      "inference,stage,snr,phase,action).")] = None,
    snr_trace: Annotated[Path | None, typer.Option(
        "--snr-trace", help="Replay a CSV of SNRs (one row per inference, N + 1 values; on "
                            "Rician fading the N + 1 SNRs, then the N + 1 phases of the gain) "
                            "instead of drawing from the system's channel.")] = None,
    emulate: Annotated[bool | None, typer.Option(
        "--emulate/--no-emulate", help="Pace device, links and edge as the system file says "
                                       "(the default without --testbed).")] = None,
    testbed: Annotated[bool, typer.Option(
        "--testbed", help="Start the edge and run the device on a testbed the kernel shapes: "
        "own network namespace, CPU quotas at f_l and f_c, the uplink shaped to each upload's "
        "Shannon rate; needs root (docs/testbed.md).")] = False,
    dilation: Annotated[float | None, typer.Option(
        "--dilation", help="With --testbed: stretch the run's time at least this many times.",
        min=1.0)] = None,
    retries: Annotated[int, typer.Option("--retries", help="Retries of a failed request.",
                                         min=0, max=10)] = 3,
    timeout: Annotated[float, typer.Option("--timeout", help="Per-request timeout (s).",
                                           min=0.001)] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:  # fmt: skip
    """Co-infer with an edge server.

    Download the placed layers from the edge, then split each inference by the observed SNR
    (on Rician fading with memory, by the SNR and the phase of the channel's gain).
    """
    from inferplan.runtime.client import read_token

    if testbed:
        _check_testbed(edge, token_file, emulate)
    elif edge is None:
        raise InvalidArgument("give the edge's URL (or --testbed, which starts one)",
                              field="--edge")  # fmt: skip
    elif dilation is not None:
        raise InvalidArgument("only with --testbed", field="--dilation")
    # Everything that needs no torch is checked before torch is imported: the token, the
    # model's name, the system file, the edge (it answers, takes the token), the system
    # against its model and the method.
    token = read_token(token_file) if token_file is not None else None
    if edge is not None:
        _check_edge(system, edge, token, timeout, retries, model, blocks, method)
    else:  # the testbed's own edge serves this model
        known = _builtin_blocks(model, blocks)
        _check_layers(system, known)
        _check_method(method, None if known is None else len(known[1]))
    _runtime()
    from inferplan.runtime.device import run_device
    from inferplan.runtime.layered import build_layers, load_model_system, plan_device

    layered = build_layers(_spec(model, input_shape, blocks, dtype), weights=False)
    sys_ = load_model_system(system, layered.profile)
    plan = plan_device(sys_, method)  # an unknown method is an error before anything runs
    given = None if inputs is None else _load_inputs(inputs, layered, inferences)
    count = len(given) if given is not None else (inferences or 100)
    snr = phase = None
    if snr_trace is not None:
        snr = _read_snr(snr_trace)
        stages = sys_.n_layers + 1
        if getattr(plan.policy, "phases", 1) > 1:  # the rule reads the gain's phase too
            if snr.shape[1] != 2 * stages:
                raise InvalidFile(
                    f"needs rows of 2 (N + 1) = {2 * stages} values: the rule reads the phase "
                    "of the channel's gain (Rician fading), so each row gives the N + 1 SNRs, "
                    "then the N + 1 phases (radians)",
                    source=str(snr_trace),
                )
            snr, phase = snr[:, :stages], snr[:, stages:]
    where = "on the testbed" if edge is None else f"against {edge}"
    try:
        with working(f"device run: {count} inferences {where}"):
            if edge is None:
                from inferplan.runtime.testbed.pair import run_on_testbed

                run = run_on_testbed(sys_, _spec(model, input_shape, blocks, dtype),
                                     method=method, inferences=count, seed=seed, inputs=given,
                                     snr=snr, phase=phase, at_least=dilation or 1.0,
                                     timeout_s=timeout)  # fmt: skip
            else:
                run = run_device(sys_, layered, edge, method=method, inferences=count,
                                 seed=seed, inputs=given, snr=snr, phase=phase,
                                 emulate=emulate is not False, token=token, timeout_s=timeout,
                                 retries=retries)  # fmt: skip
    except KeyboardInterrupt:  # the testbed (if any) is already down: say so, as run does
        print("error: interrupted: the run was stopped", file=sys.stderr)
        raise typer.Exit(130) from None
    if log is not None:
        _write_log(run, log)
    if outputs is not None:
        _write_outputs(run, outputs)
    if as_json:
        print_json(run.to_dict())
    else:
        _print(run, sys_.energy_weight)
    for warning in run.warnings:  # on stderr, with --json too
        print(f"warning: {warning}", file=sys.stderr)
    if run.failed:
        print(f"error: {len(run.failed)} inference(s) failed: {list(run.failed)}; first: "
              f"{run.errors[run.failed[0]]}", file=sys.stderr)  # fmt: skip
        raise typer.Exit(1)


def _check_testbed(edge: str | None, token_file: Path | None, emulate: bool | None) -> None:
    """``--testbed``'s options, then the machine (one line naming what it lacks), before
    anything is read or created."""
    if edge is not None:
        raise InvalidArgument("the testbed starts its own edge: give --edge or --testbed, "
                              "not both", field="--edge")  # fmt: skip
    if token_file is not None:
        raise InvalidArgument("the testbed's edge is its own: no token", field="--token-file")
    if emulate:
        raise InvalidArgument("the testbed runs without pacing: give --testbed or --emulate, "
                              "not both", field="--emulate")  # fmt: skip
    from inferplan.runtime.testbed.linux import require

    require()


def _print(run: DeviceRun, energy_weight: float) -> None:
    d = run.to_dict()

    def g(value: Any) -> str:
        return "-" if value is None else f"{value:.6g}"

    low, high = d["ci95"]
    console.print(
        f"[bold]{d['method']}[/]: {d['placement']} layers on the device, "
        f"{d['completed']} of {d['inferences']} inferences completed"
    )
    rows = [
        ["cost per inference (ETC units)", g(d["mean_cost"]), g(d["expected_cost"]),
         f"[{g(low)}, {g(high)}]"],
        ["with download (Z, ETC units)", g(d["mean_total_cost"]), g(d["expected_total_cost"]),
         ""],
        ["modelled cost of these draws (ETC units)", g(d["modelled_cost"]), "", ""],
        ["latency (s)", g(d["mean_latency_s"]), "", ""],
        ["energy (J)", g(d["mean_energy_j"]), "", ""],
        ["latency over the model (s)", g(d["overhead_s"]), "", ""],
        *([f"  of it: {part}", g(value), "", ""] for part, value in d["overhead_parts_s"].items()),
        ["download (s)", g(d["download_s"]["measured"]), g(d["download_s"]["predicted"]), ""],
    ]  # fmt: skip
    console.print(table("measured beside expected", ["", "measured", "expected", "95 % CI"],
                        rows))  # fmt: skip
    console.print(etc_unit(energy_weight))
    splits = ", ".join(f"{n}: {c}" for n, c in d["splits"].items()) or "none"
    console.print(f"split stages: {splits}")
    match = {True: "yes", False: "NO", None: "not checked"}[d["outputs_match"]]
    console.print(f"outputs equal the unsplit model's: {match}")
    if d["finished_locally"]:
        console.print(f"finished on the device (edge unreachable): {d['finished_locally']}")
    bed = d["testbed"]
    if bed:
        change = bed["rate_change_s"]["median"]
        console.print(
            f"on the testbed, time dilated {bed['dilation']:.3g}x (times above in the system's "
            f"seconds); {bed['rate_changes']} uplink rate changes"
            + (f", median {1e3 * change:.2f} ms each" if change is not None else "")
        )
