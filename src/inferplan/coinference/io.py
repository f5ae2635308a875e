"""System files (YAML or JSON, SI units, linear SNR): loading with validation, and saving.

```yaml
device: {cpu_hz: 1.0e9, kappa: 1.0e-28, tx_power_w: 0.1, bandwidth_hz: 2.0e6}
edge: {cpu_hz: 2.0e10}
downlink_bps: 5.0e7
inferences_per_update: 1000        # K
energy_weight: 0.5                 # beta_e; beta_t = 1 - beta_e
channel: {kind: discrete, snr: [0.5, 2.0, 10.0], prob: [0.2, 0.5, 0.3]}
layers: {cycles: [...], input_bits: [...], param_bits: [...]}   # N, N+1, N entries
```

``layers`` may instead name a profile (``layers: {profile: alexnet, cycles_per_flop: 0.25}``, or
the shorthand top-level ``profile: alexnet``); a system read for a model (``model=``, as ``edge
serve`` and ``device run`` read it) may leave ``profile`` out, or ``layers`` altogether: the
model's profile stands in, encoded by the same rules and defaults (:func:`layers_from_profile`).
``channel`` may be a list of ``N + 1`` entries, one per split stage, except for a channel with
memory (``kind: markov`` or ``kind: gauss-markov``, Rayleigh or, with ``fading: rician`` and
``k_factor``, Rician; docs/coinference.md), which describes every stage. Relative file names
(profile files, ``trace`` CSVs) are resolved against the system file's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from inferplan.coinference.channels import (
    Channel,
    Discrete,
    LogNormal,
    Nakagami,
    Rayleigh,
    Trace,
)
from inferplan.coinference.markov import GaussMarkov, Markov, RicianGaussMarkov
from inferplan.coinference.pathloss import THERMAL_NOISE_W_PER_HZ, PathLoss
from inferplan.coinference.system import (
    DEFAULT_BITS_PER_ELEMENT,
    DEFAULT_BITS_PER_PARAM,
    DEFAULT_CYCLES_PER_FLOP,
    DEFAULT_DOWNLINK_BPS,
    DEFAULT_INPUT_BITS_PER_ELEMENT,
    Device,
    Edge,
    Layers,
    System,
    layers_from_profile,
)
from inferplan.documents import (
    decode_text,
    path_exists,
    read_bytes,
    read_document,
    validate_document,
    write_document,
)
from inferplan.errors import InferplanError, InvalidFile, InvalidSystem
from inferplan.profiles import Profile, load_profile

__all__ = [
    "check_system",
    "layer_count_error",
    "load_channel",
    "load_system",
    "read_trace",
    "save_system",
    "system_from_dict",
]


class _Strict(BaseModel):
    # strict: a YAML `true` or a quoted "1000" is a mistake, not a number (ints still pass as
    # floats).
    model_config = ConfigDict(extra="forbid", strict=True)


class _Device(_Strict):
    cpu_hz: float
    kappa: float
    tx_power_w: float
    bandwidth_hz: float
    memory: float | None = None


class _Edge(_Strict):
    cpu_hz: float


class _PathLoss(_Strict):
    tx_power_w: float
    distance_m: float
    carrier_hz: float
    bandwidth_hz: float
    noise_density_w_per_hz: float = THERMAL_NOISE_W_PER_HZ
    tx_gain: float = 1.0
    rx_gain: float = 1.0


class _SystemFile(_Strict):
    device: _Device
    edge: _Edge
    downlink_bps: float | None = None
    downlink: _PathLoss | None = None
    inferences_per_update: int
    energy_weight: float
    channel: Any  # checked by _channels, so that a wrong shape gets a message naming it
    layers: dict[str, Any] | None = None
    profile: str | None = None


class _ExplicitLayers(_Strict):
    cycles: list[float]
    input_bits: list[float]
    param_bits: list[float]
    names: list[str] | None = None


class _ProfileLayers(_Strict):
    profile: str | None = None  # None: the model's profile (``model=``)
    cycles_per_flop: float = DEFAULT_CYCLES_PER_FLOP
    bits_per_element: float = DEFAULT_BITS_PER_ELEMENT
    input_bits_per_element: float = DEFAULT_INPUT_BITS_PER_ELEMENT
    bits_per_param: float = DEFAULT_BITS_PER_PARAM
    profile_bits_per_element: float = 32


class _DiscreteEntry(_Strict):
    kind: str
    snr: list[float]
    prob: list[float]


class _RayleighEntry(_Strict):
    kind: str
    mean_snr: float
    min_snr: float | None = None


class _NakagamiEntry(_Strict):
    kind: str
    m: float
    mean_snr: float
    min_snr: float | None = None


class _LogNormalEntry(_Strict):
    kind: str
    mean_db: float
    sigma_db: float


class _TraceEntry(_Strict):
    kind: str
    snr: list[float] | None = None
    file: str | None = None
    replay: bool = False


class _MarkovEntry(_Strict):
    kind: str
    snr: list[float]
    transition: list[list[float]] | list[list[list[float]]]
    initial: list[float] | None = None
    boundaries: list[float] | None = None


class _GaussMarkovEntry(_Strict):
    kind: str
    fading: str = "rayleigh"
    mean_snr: float
    min_snr: float | None = None
    rho: float | list[float] | None = None
    speed_mps: float | None = None
    carrier_hz: float | None = None
    grid: int | None = None
    sampler: str = "recursion"
    k_factor: float | None = None
    radii: int | None = None
    phases: int | None = None


# What only one fading of `kind: gauss-markov` takes: Rayleigh's grid of SNR cells, Rician's
# K-factor and polar grid.
_FADING_ONLY = {"rayleigh": ("grid",), "rician": ("k_factor", "radii", "phases")}


def _gauss_markov(doc: _GaussMarkovEntry) -> Channel:
    """Rayleigh or Rician Gauss-Markov fading (``fading``), each field checked to belong."""
    if doc.fading not in _FADING_ONLY:
        raise InvalidSystem(
            f"must be one of {', '.join(_FADING_ONLY)}, got {doc.fading!r}", field="fading"
        )
    for fading, names in _FADING_ONLY.items():
        for name in names:
            if fading != doc.fading and getattr(doc, name) is not None:
                raise InvalidSystem(f"applies to fading: {fading}, not {doc.fading}", field=name)
    given = {
        name: getattr(doc, name)
        for name in ("min_snr", "speed_mps", "carrier_hz", "sampler", "grid", "radii", "phases")
        if getattr(doc, name) is not None
    }
    given["rho"] = tuple(doc.rho) if isinstance(doc.rho, list) else doc.rho
    if doc.fading == "rayleigh":
        return GaussMarkov(doc.mean_snr, **given)
    if doc.k_factor is None:
        raise InvalidSystem(
            "is required with fading: rician (line-of-sight to scattered power; 0 is Rayleigh)",
            field="k_factor",
        )
    return RicianGaussMarkov(doc.mean_snr, doc.k_factor, **given)


_CHANNEL_KINDS: dict[str, type[_Strict]] = {
    "discrete": _DiscreteEntry,
    "rayleigh": _RayleighEntry,
    "nakagami": _NakagamiEntry,
    "lognormal": _LogNormalEntry,
    "trace": _TraceEntry,
    "markov": _MarkovEntry,
    "gauss-markov": _GaussMarkovEntry,
}


def _prefixed(exc: InferplanError, prefix: str) -> InferplanError:
    exc.field = f"{prefix}.{exc.field}" if exc.field else prefix
    exc.args = (str(exc),)
    return exc


def read_trace(path: Path) -> tuple[float, ...]:
    """SNR samples from a CSV: first column, one sample a line, an optional header line."""
    try:
        raw = read_bytes(path)
    except InvalidFile as exc:
        raise InvalidSystem(
            f"cannot read trace file {str(path)!r} ({exc.message})", field="file"
        ) from None
    try:
        lines = decode_text(raw, path).splitlines()
    except InvalidFile as exc:
        raise InvalidSystem(exc.message, source=exc.source) from None
    values: list[float] = []
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        first = text.split(",")[0].strip()
        try:
            values.append(float(first))
        except ValueError:
            if values or number > 1:
                raise InvalidSystem(
                    f"line {number}: not a number: {first!r}", source=str(path)
                ) from None
    return tuple(values)


def _nested_tuple(value: Any) -> Any:
    return tuple(_nested_tuple(v) for v in value) if isinstance(value, list) else value


def _channel(
    data: dict[str, Any], where: str, base: Path | None, path_snr: float | None = None
) -> Channel:
    kind = data.get("kind")
    model = _CHANNEL_KINDS.get(str(kind))
    if model is None:
        kinds = ", ".join(_CHANNEL_KINDS)
        raise InvalidSystem(
            f"unknown channel kind {kind!r} (use one of: {kinds})", field=f"{where}.kind"
        )
    try:
        if data.get("mean_snr") == "path-loss":
            if path_snr is None:
                raise InvalidSystem(
                    "'path-loss' needs the downlink as a free-space link (downlink: {tx_power_w, "
                    "distance_m, carrier_hz, bandwidth_hz}) for the device's distance",
                    field="mean_snr",
                )
            data = {**data, "mean_snr": path_snr}
        doc = validate_document(model, data, source=None, error=InvalidSystem)
        if isinstance(doc, _DiscreteEntry):
            return Discrete(tuple(doc.snr), tuple(doc.prob))
        if isinstance(doc, _RayleighEntry):
            return Rayleigh(doc.mean_snr, doc.min_snr)
        if isinstance(doc, _NakagamiEntry):
            return Nakagami(doc.m, doc.mean_snr, doc.min_snr)
        if isinstance(doc, _LogNormalEntry):
            return LogNormal(doc.mean_db, doc.sigma_db)
        if isinstance(doc, _MarkovEntry):
            return Markov(
                tuple(doc.snr),
                _nested_tuple(doc.transition),
                None if doc.initial is None else tuple(doc.initial),
                None if doc.boundaries is None else tuple(doc.boundaries),
            )
        if isinstance(doc, _GaussMarkovEntry):
            return _gauss_markov(doc)
        assert isinstance(doc, _TraceEntry)
        if (doc.snr is None) == (doc.file is None):
            raise InvalidSystem("give exactly one of 'snr' and 'file'")
        if doc.file is not None:
            path = Path(doc.file)
            if base is not None and not path.is_absolute():
                path = base / path
            return Trace(read_trace(path), doc.replay)
        return Trace(tuple(doc.snr or ()), doc.replay)
    except InferplanError as exc:
        if exc.source is not None:  # an error inside a trace file names that file
            raise
        raise _prefixed(exc, where) from None


def _channels(
    value: Any, base: Path | None, path_snr: float | None = None
) -> Channel | tuple[Channel, ...]:
    """One channel, or one per split stage, from the ``channel`` field."""
    like = "a mapping like {kind: rayleigh, mean_snr: 10.0, min_snr: 0.25}"
    if isinstance(value, list):
        for k, item in enumerate(value):
            if not isinstance(item, dict):
                raise InvalidSystem(f"must be {like}, got {item!r}", field=f"channel[{k}]")
        return tuple(
            _channel(item, f"channel[{k}]", base, path_snr) for k, item in enumerate(value)
        )
    if not isinstance(value, dict):
        raise InvalidSystem(f"must be {like} or a list of them, got {value!r}", field="channel")
    return _channel(value, "channel", base, path_snr)


def _layers(doc: _SystemFile, base: Path | None, model: Profile | None) -> Layers:
    if doc.layers is not None and doc.profile is not None:
        raise InvalidSystem("give exactly one of 'layers' and 'profile'", field="layers")
    raw: dict[str, Any] | None = doc.layers if doc.profile is None else {"profile": doc.profile}
    if raw is None:
        if model is None:
            raise InvalidSystem("give exactly one of 'layers' and 'profile'", field="layers")
        raw = {}
    if "profile" in raw or (model is not None and "cycles" not in raw):
        try:
            spec = validate_document(_ProfileLayers, raw, source=None, error=InvalidSystem)
        except InferplanError as exc:
            raise _prefixed(exc, "layers") from None
        if spec.profile is None:
            if model is None:
                raise InvalidSystem("missing field", field="layers.profile")
            profile = model
        else:
            name = spec.profile
            if base is not None and path_exists(base / name):
                name = str(base / name)
            profile = load_profile(name)
        return layers_from_profile(
            profile,
            cycles_per_flop=spec.cycles_per_flop,
            bits_per_element=spec.bits_per_element,
            input_bits_per_element=spec.input_bits_per_element,
            bits_per_param=spec.bits_per_param,
            profile_bits_per_element=spec.profile_bits_per_element,
        )
    try:
        explicit = validate_document(_ExplicitLayers, raw, source=None, error=InvalidSystem)
    except InferplanError as exc:
        raise _prefixed(exc, "layers") from None
    return Layers(
        tuple(explicit.cycles),
        tuple(explicit.input_bits),
        tuple(explicit.param_bits),
        tuple(explicit.names or ()),
    )


def _downlink(doc: _SystemFile) -> PathLoss | None:
    if (doc.downlink_bps is None) == (doc.downlink is None):
        raise InvalidSystem(
            "give exactly one of 'downlink_bps' (the rate) and 'downlink' (a free-space link: "
            "tx_power_w, distance_m, carrier_hz, bandwidth_hz)",
            field="downlink_bps",
        )
    if doc.downlink is None:
        return None
    try:
        return PathLoss(**doc.downlink.model_dump())
    except InferplanError as exc:
        raise _prefixed(exc, "downlink") from None


def system_from_dict(
    data: object,
    *,
    source: str | None = None,
    base: Path | None = None,
    model: Profile | None = None,
) -> System:
    """Build a :class:`System` from system-file data, naming ``source`` in errors.

    ``base`` is the directory that relative file names (profiles, traces) are resolved against;
    ``model``, the profile of the model the system runs, gives the layers of a file that names
    no profile and no explicit layers.
    """
    doc = validate_document(_SystemFile, data, source=source, error=InvalidSystem)
    try:
        layers = _layers(doc, base, model)
        device = Device(**doc.device.model_dump())
        downlink = _downlink(doc)
        path_snr = None
        if downlink is not None:
            path_snr = downlink.snr(tx_power_w=device.tx_power_w, bandwidth_hz=device.bandwidth_hz)
        channel = _channels(doc.channel, base, path_snr)
        return System(
            device=device,
            edge=Edge(doc.edge.cpu_hz),
            layers=layers,
            channel=channel,
            downlink_bps=DEFAULT_DOWNLINK_BPS if doc.downlink_bps is None else doc.downlink_bps,
            downlink=downlink,
            inferences_per_update=doc.inferences_per_update,
            energy_weight=doc.energy_weight,
        )
    except InferplanError as exc:
        raise exc.located(source) if source else exc from None


def load_system(path: str | Path, *, model: Profile | None = None) -> System:
    """Read a system file (YAML or JSON); ``model`` as for :func:`system_from_dict`.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from inferplan.coinference import default_system
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "system.yaml"
    >>> save_system(default_system("alexnet"), path)
    >>> load_system(path) == default_system("alexnet")
    True
    """
    path = Path(path)
    return system_from_dict(read_document(path), source=str(path), base=path.parent, model=model)


def load_channel(path: str | Path) -> Channel:
    """Read a channel file, one ``channel`` of a system file on its own (as
    ``inferplan coinfer-fit --out`` writes it), trace files relative to it.

    Raises
    ------
    InvalidSystem
        For anything a system file's ``channel`` would be refused for, naming the file.
    """
    path = Path(path)
    data = read_document(path)
    if not isinstance(data, dict):
        raise InvalidSystem("must be a mapping of fields (a channel)", source=str(path))
    try:
        return _channel(data, "channel", path.parent)
    except InferplanError as exc:
        raise (exc if exc.source is not None else exc.located(str(path))) from None


def save_system(system: System, path: str | Path) -> None:
    """Write ``system`` as a system file with explicit layers (JSON or YAML by suffix)."""
    write_document(system.to_dict(), path)


def check_system(path: str | Path) -> tuple[System, bool]:
    """The system file at ``path``, checked without the model it runs.

    Returns the system and whether its layers come from that model (a file that names no
    profile and gives no explicit layers, as ``edge serve`` and ``device run`` read it); such a
    system holds a stand-in of one layer per channel entry, so that everything else in the
    file is checked.
    """
    path = Path(path)
    data = read_document(path)
    layers = data.get("layers") if isinstance(data, dict) else None
    named = isinstance(layers, dict) and bool({"profile", "cycles"} & set(layers))
    from_model = (
        isinstance(data, dict)
        and "profile" not in data
        and (layers is None or (isinstance(layers, dict) and not named))
    )
    model = None
    if from_model:
        channel = data.get("channel")
        n = len(channel) - 1 if isinstance(channel, list) and len(channel) > 1 else 1
        model = Profile("model", flops=(1.0,) * n, activation_bits=(32.0,) * (n + 1))
    system = system_from_dict(data, source=str(path), base=path.parent, model=model)
    return system, from_model


def layer_count_error(
    path: str | Path, layers: int, model: str, blocks: tuple[str, ...]
) -> InvalidSystem:
    """The error of a system file whose ``layers`` are not one per block of the model it runs."""
    return InvalidSystem(
        f"has {layers} layers but model {model} has {len(blocks)} blocks ({', '.join(blocks)}); "
        "give one layer per block, or leave 'layers' out to take them from the model's profile",
        source=str(Path(path)),
        field="layers",
    )
