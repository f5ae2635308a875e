"""Profile files (JSON or YAML) and the name-or-path lookup the CLI and API share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from inferplan.documents import path_exists, read_document, validate_document, write_document
from inferplan.errors import InferplanError, InvalidFile, InvalidProfile
from inferplan.profiles.profile import Profile
from inferplan.profiles.zoo import MAKE_A_PROFILE, builtin_profile

__all__ = ["load_profile", "profile_from_dict", "save_profile"]

# Strict: a boolean or a quoted number in a file is a mistake, not 1.0 (ints are fine).
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]


class _ProfileFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "profile"
    flops: list[Positive]
    activation_bits: list[Positive]
    blocks: list[str] | None = None
    params: list[Annotated[int, Field(ge=0, strict=True)]] | None = None
    seconds: list[Positive] | None = None
    bytes_per_param: Positive = 4.0
    state_bytes: list[Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]] | None = None
    flops_per_s: list[Positive] | None = None  # written beside seconds; derived, not read


def profile_from_dict(data: object, *, source: str | None = None) -> Profile:
    """Build a :class:`Profile` from profile-file data, naming ``source`` in errors."""
    doc = validate_document(_ProfileFile, data, source=source, error=InvalidProfile)
    try:
        return Profile(
            name=doc.name,
            flops=tuple(doc.flops),
            activation_bits=tuple(doc.activation_bits),
            blocks=tuple(doc.blocks or ()),
            params=tuple(doc.params or ()),
            seconds=tuple(doc.seconds or ()),
            bytes_per_param=doc.bytes_per_param,
            state_bytes=tuple(doc.state_bytes or ()),
        )
    except InferplanError as exc:
        raise (exc.located(source) if source else exc) from None


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
