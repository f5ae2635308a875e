"""The device client of device-edge co-inference: download ``M`` layers, split online by SNR.

:func:`run_device` plans the placement ``M`` and the splitting thresholds with the chosen method
(:func:`~inferplan.runtime.layered.plan_device`, the planner of ``inferplan coinfer``),
downloads the weights of layers ``1..M`` from the edge over HTTP, then runs every inference
layer by layer. Before layer ``n`` it observes ``gamma_n`` (on Rician fading with memory also
the phase of its channel estimate, the complex gain) and asks the policy
(:meth:`~inferplan.coinference.SplitPolicy.upload`, one comparison): *upload* the activation
to the edge, which computes layers ``n..N`` and answers with the output, or *continue* with
layer ``n``. At ``M + 1`` it must upload; at ``N + 1`` (every layer on the device) it has the
output and *finishes* by uploading it, as the cost model has it.

Emulation (the default) paces the device as the physical system: layer ``i`` takes at least
``L_i / f_l``, an upload at least ``I_n / (W log2(1 + gamma_n))``; the edge paces its layers
(``L_i / f_c``) and the downloads (``m_i / R_d``). Energy follows the model:
``kappa f_l^2 L_i`` per layer run on the device plus ``P`` times the measured upload time.

On the testbed (``host``, :mod:`inferplan.runtime.testbed.pair`) nothing is paced: the kernel
holds the device's layers to ``f_l / k`` by a CPU quota and shapes each upload to
``W log2(1 + gamma_n) / k``; the records are then in the system's own seconds (the run's
divided by the dilation ``k``), and the device's energy is that of the time it really computed:
``kappa f_l^3`` per second of it, plus ``P`` times the measured upload time.

Faults: an unreachable edge (or a 5xx) is retried with a bounded exponential back-off; after
that a device holding all ``N`` layers finishes the inference locally, any other lists it in
:attr:`DeviceRun.failed`. Every inference ends with an output or in that list.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import torch

from inferplan.coinference import StatePolicy, System, sample_channel
from inferplan.errors import InvalidArgument
from inferplan.runtime.client import EdgeClient, EdgeUnavailable, Refused, served_model
from inferplan.runtime.emulate import Overrun, overrun, pace
from inferplan.runtime.examples import check_inferences
from inferplan.runtime.layered import DevicePlan, LayeredModel, plan_device
from inferplan.runtime.measure import random_inputs
from inferplan.runtime.split import TensorSpec, run_layer
from inferplan.runtime.wire import (
    SERVICE_HEADER,
    WireError,
    decode_state,
    decode_tensors,
    dtype_name,
    encode_tensors,
    shape_text,
)

__all__ = [
    "ACTIONS",
    "Decision",
    "DeviceHost",
    "DeviceRun",
    "EdgeUnavailable",
    "InferenceRecord",
    "run_device",
]

ACTIONS = ("continue", "upload", "finish")
"""What the device does before layer ``n``: run it, upload the activation, or (at ``N + 1``)
deliver the output it computed."""

Tensors = tuple[torch.Tensor, ...]
#: Float32 tolerance of the split outputs against the unsplit model's.
RTOL, ATOL = 1e-4, 1e-5


class DeviceHost(Protocol):
    """What holds the device on the testbed (:class:`~inferplan.runtime.testbed.pair.Pair`):
    its address, the dilation ``k``, how many times it runs each layer, its CPU quota around
    the layers, and the uplink's rate for each upload."""

    address: str
    dilation: float
    repeats: int

    def compute(self, work: Callable[[], Tensors]) -> Tensors:
        """``work()`` run on the device's compute thread, which its CPU quota holds."""

    def before_upload(self, rate_bps: float, payload_bits: float, body_bytes: int) -> float:
        """Shape the uplink to ``rate_bps`` (the system's) for a body of ``body_bytes`` that
        carries ``payload_bits`` of the model's; return how long the change took (s)."""

    def before_verify(self) -> None:
        """Lift the uplink's rate: the outputs are checked after the run, at full speed."""

    def summary(self) -> dict[str, Any]:
        """What the report says about the testbed."""


@dataclass(frozen=True)
class Decision:
    """One row of the decision log: before layer ``stage`` of inference ``inference``
    (0-based, in input order) the device saw ``snr`` (and the gain's ``phase``, radians, on a
    channel observed as its complex gain; else ``None``) and did ``action``."""

    inference: int
    stage: int
    snr: float
    action: str
    phase: float | None = None


@dataclass(frozen=True)
class InferenceRecord:
    """A completed inference.

    Attributes
    ----------
    index
        0-based position in the inputs.
    split
        The stage ``n`` where the activation went to the edge (``N + 1``: the device ran
        every layer).
    snr
        ``gamma_n`` at the split.
    latency_s, energy_j, cost
        Measured latency, modelled energy (compute + ``P`` x measured upload time) and
        ``beta_t latency + beta_e energy``.
    modelled_latency_s, modelled_cost
        What the model gives for this split and SNR (``eta_n(gamma_n)``).
    modelled_upload_s, modelled_edge_s
        The model's upload time ``I_n / (W log2(1 + gamma_n))`` and edge time
        ``sum_{i>=n} L_i / f_c``, two of the three parts of ``modelled_latency_s``.
    upload_s, edge_s
        Measured upload time (request and answer, without the edge's work) and the edge's
        own service time.
    local
        The edge was unreachable and the device computed the rest itself.
    device_s, modelled_device_s
        The real time of the device's layers (their work alone, before pacing) and the
        model's ``sum_{i<n} L_i / f_l``.
    """

    index: int
    split: int
    snr: float
    latency_s: float
    energy_j: float
    cost: float
    modelled_latency_s: float
    modelled_cost: float
    modelled_upload_s: float
    modelled_edge_s: float
    upload_s: float
    edge_s: float
    local: bool = False
    device_s: float = 0.0
    modelled_device_s: float = 0.0


@dataclass(frozen=True)
class DeviceRun:
    """The result of :func:`run_device`; :meth:`to_dict` is ``device run --json``."""

    plan: DevicePlan
    inferences: int
    records: tuple[InferenceRecord, ...]
    failed: tuple[int, ...]
    errors: dict[int, str]
    decisions: tuple[Decision, ...]
    outputs: tuple[Tensors | None, ...] = field(repr=False)
    download_predicted_s: float
    download_measured_s: float
    inferences_per_update: int
    outputs_match: bool | None = None
    max_abs_diff: float | None = None
    elapsed_s: float = 0.0
    emulated: bool = False
    testbed: dict[str, Any] | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        """What cannot hold the modelled system in an emulated run: the device's layers or the
        edge's service taking longer than modelled in more than a few percent of the
        inferences (:func:`~inferplan.runtime.emulate.overrun`), with both times and what to
        change."""
        if not self.emulated:
            return ()
        out = []
        ran = [r for r in self.records if r.modelled_device_s > 0]
        device = overrun([r.modelled_device_s for r in ran], [r.device_s for r in ran])
        if device is not None:
            out.append(_overrun_line("the device's layers", "device.cpu_hz", device))
        served = [r for r in self.records if not r.local and r.modelled_edge_s > 0]
        edge = overrun([r.modelled_edge_s for r in served], [r.edge_s for r in served])
        if edge is not None:
            out.append(_overrun_line("the edge's service", "edge.cpu_hz", edge))
        return tuple(out)

    def _mean(self, name: str) -> float:
        values = [getattr(r, name) for r in self.records]
        return float(np.mean(values)) if values else math.nan

    @property
    def mean_cost(self) -> float:
        """Measured mean energy-time cost per completed inference."""
        return self._mean("cost")

    def ci95(self) -> tuple[float, float]:
        """95 % normal-approximation confidence interval of :attr:`mean_cost` (NaN with fewer
        than two completed inferences)."""
        from scipy import stats  # 0.4 s to import: here, not at the device's start

        costs = np.array([r.cost for r in self.records])
        if costs.size < 2:
            return math.nan, math.nan
        half = float(stats.norm.ppf(0.975)) * float(costs.std(ddof=1)) / math.sqrt(costs.size)
        return self.mean_cost - half, self.mean_cost + half

    @property
    def overhead_cost(self) -> float:
        """Mean measured cost minus the mean modelled cost ``eta_S(gamma_S)`` of the same
        inferences: what transport (HTTP, serialisation) and pacing slack add."""
        return self.mean_cost - self._mean("modelled_cost")

    def overhead_parts(self) -> dict[str, float]:
        """Where the latency went over the model, mean seconds per completed inference:
        ``upload`` (measured minus modelled upload: HTTP and serialisation the modelled
        upload could not hide), ``edge`` (the edge's service time minus its modelled
        compute) and ``device`` (the rest: the device's layers and scheduling). They add up
        to the latency minus the modelled latency."""
        upload = self._mean("upload_s") - self._mean("modelled_upload_s")
        edge = self._mean("edge_s") - self._mean("modelled_edge_s")
        total = self._mean("latency_s") - self._mean("modelled_latency_s")
        return {"device": total - upload - edge, "upload": upload, "edge": edge}

    def split_counts(self) -> dict[int, int]:
        """How many completed inferences split at each stage."""
        counts: dict[int, int] = {}
        for r in sorted(self.records, key=lambda r: r.split):
            counts[r.split] = counts.get(r.split, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """One JSON-able object (``None`` where no inference completed)."""

        def num(value: float) -> float | None:
            return value if math.isfinite(value) else None

        low, high = self.ci95()
        latency = self._mean("latency_s")
        overhead = latency - self._mean("modelled_latency_s")
        download_cost = self.download_measured_s / self.inferences_per_update
        return {
            "method": self.plan.method,
            "placement": self.plan.placement,
            "inferences": self.inferences,
            "completed": len(self.records),
            "mean_cost": num(self.mean_cost),
            "ci95": [num(low), num(high)],
            "expected_cost": self.plan.expected_cost,
            "expected_total_cost": self.plan.expected_total_cost,
            "mean_total_cost": num(self.mean_cost + download_cost),
            "modelled_cost": num(self._mean("modelled_cost")),
            "overhead_cost": num(self.overhead_cost),
            "mean_latency_s": num(latency),
            "mean_energy_j": num(self._mean("energy_j")),
            "overhead_s": num(overhead),
            "overhead_share": num(overhead / latency) if latency > 0 else None,
            "overhead_parts_s": {part: num(value) for part, value in self.overhead_parts().items()},
            "download_s": {
                "predicted": self.download_predicted_s,
                "measured": self.download_measured_s,
            },
            "splits": {str(n): c for n, c in self.split_counts().items()},
            "outputs_match": self.outputs_match,
            "max_abs_diff": self.max_abs_diff,
            "elapsed_s": self.elapsed_s,
            "failed": list(self.failed),
            "finished_locally": [r.index for r in self.records if r.local],
            "errors": {str(k): v for k, v in self.errors.items()},
            "warnings": list(self.warnings),
            "mode": "testbed" if self.testbed else "emulate" if self.emulated else "native",
            "testbed": self.testbed,
        }


def _overrun_line(what: str, field: str, late: Overrun) -> str:
    change = (f"model a slower {field} in the system file (or layers from a profile measured "
              "on this machine, profile --measure), or run with --no-emulate")  # fmt: skip
    return late.says(what, "modelled", "system", change)


def _check_edge_model(edge: EdgeClient, layered: LayeredModel) -> None:
    served = served_model(edge)
    mine = layered.describe()
    if served.get("crossings") != mine["crossings"] or served.get("layers") != mine["layers"]:
        raise InvalidArgument(
            f"serves model {served.get('model')!r} with {served.get('layers')} layers and other "
            f"tensors between them; this device runs {mine['model']!r} with "
            f"{mine['layers']} layers (both sides must use the same MODEL and blocks)",
            source=edge.url,
        )


def _download(edge: EdgeClient, layered: LayeredModel, placement: int, emulate: bool,
              system: System) -> None:  # fmt: skip
    """Download the weights of layers ``1..placement``, refusing any beyond the device's
    memory (the weights as they arrive, with the largest activation of the layers so far)."""
    memory, held = system.device.memory, 0
    for layer in range(1, placement + 1):
        response = edge.request("GET", f"/layers/{layer}", params={"emulate": int(emulate)})
        try:
            state = decode_state(response.content)
        except WireError as exc:
            raise EdgeUnavailable(f"weights of layer {layer}: {exc}") from None
        held += sum(t.numel() * t.element_size() for t in state.values())
        working = max((system.layers.input_bits[i] + system.layers.input_bits[i + 1]) / 8
                      for i in range(layer))  # fmt: skip
        if memory is not None and held + working > memory:
            raise InvalidArgument(
                f"layer {layer} does not fit the device's memory of {memory:.6g} bytes: layers "
                f"1..{layer} hold {held:.6g} bytes of weights and {working:.6g} of activations",
                field="device.memory",
            )
        stage = layered.stages[layer - 1]
        problem = _state_mismatch(state, stage.state_dict())
        if problem:  # assign=True would take any dtype: a failure mid-inference later
            raise EdgeUnavailable(f"weights of layer {layer} do not fit: {problem}")
        try:
            stage.load_state_dict(state, strict=True, assign=True)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise EdgeUnavailable(f"weights of layer {layer} do not fit: {first}") from None
        if any(t.is_meta for t in [*stage.parameters(), *stage.buffers()]):
            raise InvalidArgument(
                f"layer {layer} has tensors outside its state_dict (non-persistent buffers); "
                "it cannot be downloaded"
            )


RECORD_BYTES = 2048
"""What one inference's record and decisions take in memory, at most (Python objects)."""


def _tensor_bytes(specs: Sequence[tuple[tuple[int, ...], str]]) -> int:
    return sum(math.prod(shape) * TensorSpec((), kind).torch_dtype.itemsize
               for shape, kind in specs)  # fmt: skip


def _check_memory(layered: LayeredModel, inferences: int, *, drawn_inputs: bool) -> None:
    """Refuse a run whose inputs (when drawn here), SNRs and phases, outputs and records would
    not fit
    in this machine's memory, before any of them is made or the edge is contacted."""
    per = (16 * (layered.n_layers + 1) + _tensor_bytes(layered.crossings[layered.n_layers])
           + RECORD_BYTES * (layered.n_layers + 2))  # fmt: skip
    if drawn_inputs:
        per += _tensor_bytes(layered.crossings[0])
    check_inferences(inferences, per, "inputs, SNRs, outputs and records")


def _state_mismatch(state: dict[str, torch.Tensor], expected: dict[str, Any]) -> str:
    """What makes the downloaded ``state`` differ from the stage's own (names, shapes and
    dtypes); empty if nothing does."""
    for key, want in expected.items():
        got = state.get(key)
        if got is None:
            return f"no tensor {key}"
        if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
            return (f"{key} is {dtype_name(got.dtype)} {shape_text(got.shape)}, the model's "
                    f"{dtype_name(want.dtype)} {shape_text(want.shape)}")  # fmt: skip
    extra = sorted(set(state) - set(expected))
    return f"unexpected tensor {extra[0]}" if extra else ""


def _observations(
    system: System,
    plan: DevicePlan,
    snr: npt.ArrayLike | None,
    phase: npt.ArrayLike | None,
    inferences: int,
    seed: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
    """What the device observes before each layer: SNRs, and the gain's phases where the
    policy reads them (drawn from the system's channel, or a recorded trace's)."""
    reads_phase = isinstance(plan.policy, StatePolicy) and plan.policy.phases > 1
    if snr is None:
        return sample_channel(system, np.random.default_rng(seed), inferences)
    values = _trace(system, snr, inferences, "SNR", "snr")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise InvalidArgument("SNR trace values must be positive finite numbers", field="snr")
    with np.errstate(all="ignore"):
        rates = system.device.bandwidth_hz * np.log2(1.0 + values)
    if np.any(rates <= 0):  # 1 + SNR rounds to 1: no upload could ever end
        row, column = map(int, np.argwhere(rates <= 0)[0])
        raise InvalidArgument(
            f"SNR {values[row, column]:g} (row {row + 1}, column {column + 1}) gives an uplink "
            "rate of 0 bit/s: 1 + SNR is 1 in floating point",
            field="snr",
        )
    if phase is None:
        if reads_phase:
            raise InvalidArgument(
                "the rule reads the phase of the channel's gain (Rician fading with memory): "
                "give the gain's phase at every stage beside the SNRs",
                field="phase",
            )
        return values, None
    angles = _trace(system, phase, inferences, "phase", "phase")
    if not np.all(np.isfinite(angles)):
        raise InvalidArgument("phases must be finite numbers (radians)", field="phase")
    return values, angles


def _trace(
    system: System, data: npt.ArrayLike, inferences: int, what: str, name: str
) -> npt.NDArray[np.float64]:
    values = np.asarray(data, dtype=np.float64)
    n = system.n_layers + 1
    if values.ndim != 2 or values.shape[1] != n or values.shape[0] < inferences:
        raise InvalidArgument(
            f"{what} trace must have {inferences} rows of N + 1 = {n} values, got shape "
            f"{'x'.join(map(str, values.shape))}",
            field=name,
        )
    return values[:inferences]


def run_device(
    system: System,
    layered: LayeredModel,
    edge_url: str,
    *,
    method: str = "optimal",
    inferences: int = 100,
    seed: int = 0,
    inputs: Sequence[Tensors] | None = None,
    snr: npt.ArrayLike | None = None,
    phase: npt.ArrayLike | None = None,
    emulate: bool = True,
    token: str | None = None,
    timeout_s: float = 30.0,
    retries: int = 3,
    backoff_s: float = 0.1,
    verify: bool = True,
    on_inference: Callable[[int], None] | None = None,
    host: DeviceHost | None = None,
) -> DeviceRun:
    """Run ``inferences`` co-inferences against the edge at ``edge_url``.

    Parameters
    ----------
    system
        The co-inference system (its layers are ``layered``'s blocks).
    layered
        The model's structure (:func:`~inferplan.runtime.layered.build_layers` with
        ``weights=False``); the layers placed on the device get the edge's weights.
    edge_url
        ``http://host:port`` of ``inferplan edge serve``.
    method
        A strategy of :data:`inferplan.coinference.STRATEGIES` or ``fixed:K``.
    inferences
        How many inferences.
    seed
        Seed of the SNR draws and of the random inputs.
    inputs
        One tuple of input tensors per inference (seeded random inputs by default).
    snr
        A recorded ``(inferences, N + 1)`` SNR trace to replay (column ``n - 1`` is seen before
        layer ``n``) instead of draws from the system's channel.
    phase
        With ``snr``: the phases (radians) of the channel's gain at the same stages, which a
        rule on Rician fading with memory reads (ignored by rules that do not).
    emulate
        Pace device, uplink, edge and downlink as the physical system.
    token
        Bearer token of the edge.
    timeout_s, retries, backoff_s
        Per-request timeout; retries after a failed request, waiting ``backoff_s * 2^k``
        (at most 2 s) before retry ``k + 1``.
    verify
        Compare every output with the unsplit model's (run on the edge, ``/reference``).
    on_inference
        Called with each inference's index once it ended (completed or failed).
    host
        The testbed's hold on the device (``emulate`` must then be False): its compute under
        a CPU quota, each upload shaped by the kernel.
    """
    if isinstance(inferences, bool) or not isinstance(inferences, int) or inferences < 1:
        raise InvalidArgument(f"must be an integer >= 1, got {inferences!r}", field="inferences")
    if retries < 0 or backoff_s < 0 or timeout_s <= 0:
        raise InvalidArgument("retries and backoff_s must be >= 0 and timeout_s > 0")
    if host is not None and emulate:
        raise InvalidArgument("the testbed runs without pacing: emulate must be False",
                              field="emulate")  # fmt: skip
    if system.n_layers != layered.n_layers:
        raise InvalidArgument(
            f"the system has {system.n_layers} layers, the model {layered.n_layers} blocks"
        )
    plan = plan_device(system, method)
    _check_memory(layered, inferences, drawn_inputs=inputs is None)
    gammas, phases = _observations(system, plan, snr, phase, inferences, seed)
    if inputs is None:
        inputs = random_inputs(
            [shape for shape, _ in layered.crossings[0]],
            inferences,
            seed=seed,
            input_dtypes=[dtype for _, dtype in layered.crossings[0]],
        )
    elif len(inputs) < inferences:
        raise InvalidArgument(f"{len(inputs)} inputs for {inferences} inferences", field="inputs")
    source = None if host is None else host.address
    edge = EdgeClient(edge_url, token=token, timeout_s=timeout_s, retries=retries,
                      backoff_s=backoff_s, source=source)  # fmt: skip
    try:
        return _run(
            system, layered, edge, plan, (gammas, phases), list(inputs[:inferences]), emulate,
            verify, on_inference, host,
        )  # fmt: skip
    finally:
        edge.close()


def _run(
    system: System,
    layered: LayeredModel,
    edge: EdgeClient,
    plan: DevicePlan,
    observed: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None],
    inputs: list[Tensors],
    emulate: bool,
    verify: bool,
    on_inference: Callable[[int], None] | None,
    host: DeviceHost | None,
) -> DeviceRun:
    m = plan.placement
    gammas, phases = observed
    memory = system.device.memory
    if memory is not None and system.placement_needs[m] > memory:
        raise InvalidArgument(
            f"placing {m} layers needs {system.placement_needs[m]:.6g} bytes, more than the "
            f"device's memory of {memory:.6g}: refused before downloading",
            field="device.memory",
        )
    predicted = float(sum(system.layers.param_bits[:m])) / system.downlink_bps
    started = time.monotonic()
    inferences = len(inputs)
    try:
        step = "the edge's model could not be read"
        _check_edge_model(edge, layered)
        step = "download of the placed layers failed"
        _download(edge, layered, m, emulate, system)
    except (EdgeUnavailable, Refused) as exc:
        every = tuple(range(inferences))
        reason = f"{step}: {exc}"
        return DeviceRun(
            plan, inferences, (), every, dict.fromkeys(every, reason), (), (None,) * inferences,
            predicted, time.monotonic() - started, system.inferences_per_update,
        )  # fmt: skip
    measured = (time.monotonic() - started) / (1.0 if host is None else host.dilation)
    device = _Device(system, layered, edge, plan, emulate, host)
    first = time.monotonic()
    records: list[InferenceRecord] = []
    outputs: list[Tensors | None] = []
    failed: list[int] = []
    errors: dict[int, str] = {}
    for k, x in enumerate(inputs):
        try:
            output, record = device.infer(k, x, gammas[k], None if phases is None else phases[k])
        except (EdgeUnavailable, Refused) as exc:
            failed.append(k)
            errors[k] = str(exc)
            outputs.append(None)
        else:
            records.append(record)
            outputs.append(output)
        if on_inference is not None:
            on_inference(k)
    run = DeviceRun(
        plan, inferences, tuple(records), tuple(failed), errors, tuple(device.decisions),
        tuple(outputs), predicted, measured, system.inferences_per_update,
        elapsed_s=time.monotonic() - first, emulated=emulate,
    )  # fmt: skip
    if host is not None:
        host.before_verify()
        run = DeviceRun(**{**run.__dict__, "testbed": host.summary()})
    if verify:
        match, diff = _verify(edge, inputs, outputs)
        run = DeviceRun(**{**run.__dict__, "outputs_match": match, "max_abs_diff": diff})
    return run


def _verify(
    edge: EdgeClient, inputs: list[Tensors], outputs: list[Tensors | None]
) -> tuple[bool | None, float | None]:
    """Every completed output against the unsplit model's on the edge (None: edge gone)."""
    match, worst = True, 0.0
    for x, out in zip(inputs, outputs, strict=True):
        if out is None:
            continue
        specs = [(tuple(t.shape), t.dtype) for t in out]
        try:
            response = edge.request("POST", "/reference", content=encode_tensors(x))
            reference = decode_tensors(response.content, specs)
        except (EdgeUnavailable, Refused, WireError):
            return None, None
        for a, b in zip(out, reference, strict=True):
            if a.is_floating_point():
                worst = max(worst, float((a - b).abs().max()) if a.numel() else 0.0)
            match = match and torch.allclose(a, b, rtol=RTOL, atol=ATOL)
    return match, worst


def _without_grad(stage: torch.nn.Module, values: Tensors, repeats: int) -> Tensors:
    with torch.no_grad():  # per thread: the compute thread's own
        return run_layer(stage, values, repeats)


class _Device:
    """One device's inference loop: decisions, local layers, uploads, accounting."""

    def __init__(
        self,
        system: System,
        layered: LayeredModel,
        edge: EdgeClient,
        plan: DevicePlan,
        emulate: bool,
        host: DeviceHost | None = None,
    ) -> None:
        self.system = system
        self.host = host
        self.scale = 1.0 if host is None else 1.0 / host.dilation  # run seconds -> system's
        self.layered = layered
        self.edge = edge
        self.policy = plan.policy
        self.emulate = emulate
        self.decisions: list[Decision] = []
        self.n_layers = layered.n_layers
        self._started = 0.0  # this inference's start (time.monotonic) and emulated time so far
        self._budget = 0.0
        self._computed = 0.0  # this inference's real time of the device's layers

    def _wait(self, seconds: float) -> None:
        """Advance the emulated clock of this inference by ``seconds`` and sleep until it.

        Pacing against one clock per inference (not per step) keeps a late wake-up of one
        sleep from being added again at the next step; every step still ends no earlier than
        the modelled time of everything up to it."""
        self._budget += seconds
        if self.emulate:
            pace(self._started, self._budget)

    def _layer(self, layer: int, values: Tensors) -> Tensors:
        stage = self.layered.stages[layer - 1]
        computing = time.monotonic()
        with torch.no_grad():
            if self.host is None:
                out: Tensors = stage(*values)
            else:
                repeats = self.host.repeats
                out = self.host.compute(lambda: _without_grad(stage, values, repeats))
        self._computed += time.monotonic() - computing
        self._wait(self.system.layers.cycles[layer - 1] / self.system.device.cpu_hz)
        return out

    def rate_bps(self, snr: float) -> float:
        """The uplink's Shannon rate ``W log2(1 + gamma)``."""
        return self.system.device.bandwidth_hz * math.log2(1.0 + snr)

    def upload_seconds(self, stage: int, snr: float) -> float:
        """``I_n / (W log2(1 + gamma_n))``."""
        return self.system.layers.input_bits[stage - 1] / self.rate_bps(snr)

    def _upload(self, stage: int, snr: float, values: Tensors) -> tuple[Tensors, float, float]:
        """Send the activation before layer ``stage``: the output, upload and edge seconds.

        The request leaves at once: the real transfer (loopback HTTP, both serialisations) is
        part of the modelled upload, not added to it. Emulated, the step then lasts at least
        the modelled upload plus the edge's own service time (which the edge paced to at
        least its modelled compute): the upload takes ``max(real, modelled)``, as a device
        step does, and the edge's part is never hidden inside it."""
        started = time.monotonic()
        body = encode_tensors(values)
        if self.host is not None:  # the channel's rate is not the device's work: not timed
            started += self.host.before_upload(self.rate_bps(snr),
                                               self.system.layers.input_bits[stage - 1],
                                               len(body))  # fmt: skip
        response = self.edge.request(
            "POST",
            "/infer",
            params={"stage": stage, "emulate": int(self.emulate)},
            content=body,
        )
        try:
            edge_s = float(response.headers.get(SERVICE_HEADER.lower(), 0.0))
            output = decode_tensors(response.content, self.layered.crossings[self.n_layers])
        except (ValueError, WireError) as exc:
            raise Refused(f"the edge's answer: {exc}") from None
        waited = time.monotonic() - started
        # The edge cannot have served longer than the device waited for its answer (a little
        # more allowed for the two clocks' resolution): anything else is not slept.
        if not (math.isfinite(edge_s) and 0 <= edge_s <= waited + 1e-3):
            raise Refused(f"the edge's answer: {SERVICE_HEADER} is {edge_s} s, but the answer "
                           f"came after {waited:.3g} s")  # fmt: skip
        floor = self.upload_seconds(stage, snr) + edge_s
        self._wait(floor)  # the inference's clock ...
        if self.emulate:
            pace(started, floor)  # ... and this step's own, so the upload lasts at least I/r
        total = time.monotonic() - started
        return output, max(total - edge_s, 0.0) * self.scale, edge_s * self.scale

    def infer(
        self,
        k: int,
        x: Tensors,
        snr: npt.NDArray[np.float64],
        phase: npt.NDArray[np.float64] | None = None,
    ) -> tuple[Tensors, InferenceRecord]:
        started = self._started = time.monotonic()
        self._budget = self._computed = 0.0
        values, local, n = x, False, 1
        upload_s = edge_s = 0.0

        def seen(stage: int, action: str) -> Decision:
            angle = None if phase is None else float(phase[stage - 1])
            return Decision(k, stage, float(snr[stage - 1]), action, angle)

        while n <= self.n_layers:
            gamma = float(snr[n - 1])
            if not self.policy.upload(n, gamma, None if phase is None else float(phase[n - 1])):
                self.decisions.append(seen(n, "continue"))
                values = self._layer(n, values)
                n += 1
                continue
            self.decisions.append(seen(n, "upload"))
            try:
                values, upload_s, edge_s = self._upload(n, gamma, values)
                break
            except EdgeUnavailable:
                if self.policy.placement < self.n_layers:
                    raise
                local = True  # every layer is here: finish without the edge
                for layer in range(n, self.n_layers + 1):
                    self.decisions.append(seen(layer, "continue"))
                    values = self._layer(layer, values)
                n = self.n_layers + 1
        if n == self.n_layers + 1:
            gamma = float(snr[n - 1])
            self.decisions.append(seen(n, "finish"))
            try:
                _, upload_s, edge_s = self._upload(n, gamma, values)
            except EdgeUnavailable:
                local = True  # the output is here; only its delivery failed
        latency = (time.monotonic() - started) * self.scale
        return values, self._record(k, n, float(snr[n - 1]), latency, upload_s, edge_s, local)

    def _record(
        self, k: int, split: int, gamma: float, latency: float, upload_s: float, edge_s: float,
        local: bool,
    ) -> InferenceRecord:  # fmt: skip
        s = self.system
        cycles = s.layers.cycles
        device_cycles = float(sum(cycles[: split - 1]))
        computed_s = self._computed * self.scale
        # emulated, the device ran the modelled cycles; on the testbed, f_l for as long as the
        # kernel let its layers run
        ran = device_cycles if self.host is None else s.device.cpu_hz * computed_s
        energy = s.device.kappa * s.device.cpu_hz**2 * ran + s.device.tx_power_w * upload_s
        modelled_upload = self.upload_seconds(split, gamma)
        modelled_edge = float(sum(cycles[split - 1 :])) / s.edge.cpu_hz
        modelled_latency = device_cycles / s.device.cpu_hz + modelled_upload + modelled_edge
        return InferenceRecord(
            index=k,
            split=split,
            snr=gamma,
            latency_s=latency,
            energy_j=energy,
            cost=s.time_weight * latency + s.energy_weight * energy,
            modelled_latency_s=modelled_latency,
            modelled_cost=float(s.eta(split, gamma)),
            modelled_upload_s=modelled_upload,
            modelled_edge_s=modelled_edge,
            upload_s=upload_s,
            edge_s=edge_s,
            local=local,
            device_s=computed_s,
            modelled_device_s=device_cycles / s.device.cpu_hz,
        )
