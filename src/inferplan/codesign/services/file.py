"""Services files (JSON or YAML): the services that share a network, for
``inferplan provision NETWORK --services FILE`` and :func:`load_services`.

::

    services:
      - {name: cams, profile: resnet50, source: cam1, target: dc, throughput: 30}
      - {name: asr, profile: asr.json, source: mic, target: dc, interval: 0.05, latency: 0.2}

``profile`` is a built-in profile name or a profile file, relative to the services file, or a
model profiled on the fly as ``inferplan profile`` profiles it (an ONNX file, ``file.py:FACTORY``
relative to the services file, ``MODULE:FACTORY``, ``transformers:CONFIG_CLASS``), with the
options of that command as fields of the service::

      - {name: seg, profile: models.py:make_unet, input_shape: "1,3,256,256",
         source: cam1, target: dc, throughput: 10}
      - {name: lm, profile: "transformers:GPT2Config", config: [n_layer=2], seq_len: 128,
         source: mic, target: dc, interval: 0.5}

``latency`` (seconds, optional) bounds the time each inference of the service takes through
the plan. ``node_times`` (optional) is a node times file, relative to the services file: the
seconds each block of the service's model takes on some nodes (docs/codesign.md), which its
stages on those nodes then take in place of the FLOPs over the capacity. ``input_shape`` is
one shape or a list of them; ``blocks``, ``dtype``, ``config`` (a list of ``key=value``),
``seq_len`` and ``decode`` are as the command's flags.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from inferplan.codesign.services.joint import Service
from inferplan.codesign.timing.file import load_measured_blocks
from inferplan.documents import read_document, validate_document
from inferplan.errors import InferplanError, InvalidArgument, InvalidFile
from inferplan.profiles.cuts import parse_factory_spec
from inferplan.profiles.models import ModelOptions, TransformerOptions, model_profile

__all__ = ["load_services", "services_from_dict"]

Positive = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]


class _ServiceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    profile: str
    source: str
    target: str
    throughput: Positive | None = None
    interval: Positive | None = None
    latency: Positive | None = None  # seconds each inference may take through the plan
    node_times: str | None = None  # a node times file: seconds per block on some nodes
    # how a model named in place of a profile is profiled (inferplan profile's options)
    input_shape: str | list[str] | None = None
    blocks: str | None = None
    dtype: str = "float32"
    config: list[str] = []
    seq_len: Annotated[int, Field(strict=True, ge=1)] | None = None
    decode: Annotated[bool, Field(strict=True)] = False

    def model_options(self) -> ModelOptions:
        shapes = [self.input_shape] if isinstance(self.input_shape, str) else self.input_shape
        hf = TransformerOptions(config=tuple(self.config), seq_len=self.seq_len,
                                decode=self.decode)  # fmt: skip
        return ModelOptions(tuple(shapes or ()), self.blocks, self.dtype, "matrix", hf)


class _ServicesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    services: list[_ServiceEntry] = Field(min_length=1)


def services_from_dict(
    data: object, *, source: str | None = None, base: Path | None = None
) -> list[Service]:
    """Build the services of services-file data, naming ``source`` (the file) in errors and
    reading profile files relative to ``base``.

    Raises
    ------
    InvalidFile
        For a bad field, a duplicate name, both or neither of ``throughput`` and
        ``interval``, or a profile that cannot be loaded, naming the service.

    Examples
    --------
    >>> services = services_from_dict({"services": [
    ...     {"name": "cams", "profile": "resnet50", "source": "s", "target": "t",
    ...      "throughput": 30}]})
    >>> services[0].name, services[0].interval == 1 / 30
    ('cams', True)
    """
    doc = validate_document(_ServicesFile, data, source=source, error=InvalidFile)
    out: list[Service] = []
    seen: set[str] = set()
    for k, entry in enumerate(doc.services):
        where = f"services[{k}] ({entry.name!r})"
        if entry.name in seen:
            raise InvalidFile(f"duplicate service name {entry.name!r}", source=source, field=where)
        seen.add(entry.name)
        if (entry.throughput is None) == (entry.interval is None):
            raise InvalidFile(
                "give exactly one of throughput or interval", source=source, field=where
            )
        interval = entry.interval if entry.interval is not None else 1.0 / entry.throughput  # type: ignore[operator]
        try:
            profile = model_profile(_profile_path(entry.profile, base), entry.model_options())
        except InvalidArgument as exc:  # an option of the model: the service's field of it
            name = {"input_shapes": "input_shape"}.get(exc.field or "", exc.field)
            raise InvalidFile(f"profile {entry.profile!r}: {exc.message}", source=source,
                              field=f"{where}.{name}") from None  # fmt: skip
        except InferplanError as exc:
            raise InvalidFile(
                f"profile {entry.profile!r}: {exc}", source=source, field=f"{where}.profile"
            ) from None
        service = Service(entry.name, profile, entry.source, entry.target, interval,
                          entry.latency)  # fmt: skip
        if entry.node_times is not None:
            path = Path(entry.node_times) if base is None else base / entry.node_times
            measured = load_measured_blocks(path, None, profile.n_blocks)  # nodes: checked later
            service = replace(service, node_time=measured)
        out.append(service)
    return out


def _profile_path(profile: str, base: Path | None) -> str:
    """``profile`` relative to ``base`` when it names a file there (or looks like one), and
    the file of a ``file.py:FACTORY`` too."""
    factory = parse_factory_spec(profile)
    if factory is not None and factory[0].endswith(".py"):
        return f"{_profile_path(factory[0], base)}:{factory[1]}"
    if base is None or Path(profile).is_absolute():
        return profile
    candidate = base / profile
    if candidate.suffix.lower() in (".json", ".yaml", ".yml", ".onnx") or candidate.exists():
        return str(candidate)
    return profile


def load_services(path: str | Path) -> list[Service]:
    """Read a services file (JSON or YAML); profile files are relative to it.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "services.yaml"
    >>> _ = f.write_text("services:\\n"
    ...     "  - {name: a, profile: vgg16, source: s, target: t, interval: 0.5}\\n")
    >>> [s.name for s in load_services(f)]
    ['a']
    """
    path = Path(path)
    return services_from_dict(read_document(path), source=str(path), base=path.parent)
