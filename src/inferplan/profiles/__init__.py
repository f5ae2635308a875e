"""DNN profiles: the :class:`Profile` value, built-in models and profile files.

Traced profiles of real models live behind optional extras: :mod:`inferplan.profiles.from_torch`
(``torch``), :mod:`inferplan.profiles.from_transformers` (``transformers``) and
:mod:`inferplan.profiles.from_onnx` (``onnx``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.profiles.cuts import Cut, GraphProfile
    from inferplan.profiles.io import load_profile, profile_from_dict, save_profile
    from inferplan.profiles.memory import memory_need
    from inferplan.profiles.profile import Profile
    from inferplan.profiles.transformers import decoder_lm, vit
    from inferplan.profiles.zoo import alexnet, builtin_profile, mlp, resnet50, vgg16

__all__ = [
    "Cut",
    "GraphProfile",
    "Profile",
    "alexnet",
    "builtin_profile",
    "decoder_lm",
    "load_profile",
    "memory_need",
    "mlp",
    "profile_from_dict",
    "resnet50",
    "save_profile",
    "vgg16",
    "vit",
]

export_lazily(
    __name__,
    {
        "inferplan.profiles.cuts": ("Cut", "GraphProfile"),
        "inferplan.profiles.io": ("load_profile", "profile_from_dict", "save_profile"),
        "inferplan.profiles.memory": ("memory_need",),
        "inferplan.profiles.profile": ("Profile",),
        "inferplan.profiles.transformers": ("decoder_lm", "vit"),
        "inferplan.profiles.zoo": ("alexnet", "builtin_profile", "mlp", "resnet50", "vgg16"),
    },
)
