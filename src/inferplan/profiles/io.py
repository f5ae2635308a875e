"""Profile files (JSON or YAML) and the name-or-path lookup the CLI and API share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from inferplan.documents import path_exists, read_document, validate_document, write_document
from inferplan.errors import InferplanError, InvalidFile, InvalidProfile
from inferplan.profiles.graph import LayerGraph
from inferplan.profiles.profile import Profile
from inferplan.profiles.zoo import MAKE_A_PROFILE, builtin_profile

if TYPE_CHECKING:
    from inferplan.profiles.schema import ProfileFile

__all__ = ["load_profile", "profile_from_dict", "save_profile"]


def profile_from_dict(data: object, *, source: str | None = None) -> Profile:
    """Build a :class:`Profile` from profile-file data, naming ``source`` in errors."""
    from inferplan.profiles.schema import ProfileFile

    doc = validate_document(ProfileFile, data, source=source, error=InvalidProfile)
    try:
        graph = _graph(doc)
        if doc.flops is None or doc.activation_bits is None:
            if graph is None:
                missing = "flops" if doc.flops is None else "activation_bits"
                raise InvalidProfile("missing field", field=missing)
            if doc.flops is not None or doc.activation_bits is not None:
                raise InvalidProfile(
                    "give flops and activation_bits together, or neither beside a graph",
                    field="flops",
                )
            for extra in ("blocks", "params", "seconds"):
                if getattr(doc, extra) is not None:
                    raise InvalidProfile("needs flops and activation_bits beside it", field=extra)
            return Profile.from_graph(doc.name, graph, bytes_per_param=doc.bytes_per_param,
                                      state_bytes=tuple(doc.state_bytes or ()))  # fmt: skip
        return Profile(
            name=doc.name,
            flops=tuple(doc.flops),
            activation_bits=tuple(doc.activation_bits),
            blocks=tuple(doc.blocks or ()),
            params=tuple(doc.params or ()),
            seconds=tuple(doc.seconds or ()),
            graph=graph,
            bytes_per_param=doc.bytes_per_param,
            state_bytes=tuple(doc.state_bytes or ()),
        )
    except InferplanError as exc:
        raise (exc.located(source) if source else exc) from None


def _graph(doc: ProfileFile) -> LayerGraph | None:
    """The layer graph of a profile file, if it has one."""
    if doc.graph is None:
        if doc.input_bits is not None:
            raise InvalidProfile(
                "belongs to a layer graph (graph), which is missing", field="input_bits"
            )
        return None
    input_bits = doc.input_bits
    if input_bits is None:
        if doc.activation_bits is None:
            raise InvalidProfile("is required beside a layer graph", field="input_bits")
        input_bits = doc.activation_bits[0]
    layers = doc.graph.layers
    return LayerGraph(
        layers=tuple(layer.id for layer in layers),
        flops=tuple(layer.flops for layer in layers),
        output_bits=tuple(layer.output_bits for layer in layers),
        edges=tuple(doc.graph.edges),
        input_bits=input_bits,
        params=tuple(layer.params for layer in layers),
    )


def load_profile(name_or_path: str | Path) -> Profile:
    """A built-in profile by name (``vgg16``, ``resnet50``, ``alexnet``, ``mlp-WxD``) or a file.

    Examples
    --------
    >>> load_profile("vgg16").n_blocks
    16
    """
    text = str(name_or_path)
    path = Path(text)
    if path_exists(path):
        return profile_from_dict(read_document(path), source=text)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        raise InvalidFile(f"file not found ({MAKE_A_PROFILE})", source=text)
    return builtin_profile(text)


def save_profile(profile: Profile, path: str | Path) -> None:
    """Write ``profile`` in the profile-file format (JSON or YAML by suffix)."""
    write_document(profile.to_dict(), path)
