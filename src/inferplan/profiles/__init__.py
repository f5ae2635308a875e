"""DNN profiles: the :class:`Profile` value, built-in models and profile files.

Traced profiles of real models live behind optional extras: :mod:`inferplan.profiles.from_torch`
(``torch``) and :mod:`inferplan.profiles.from_onnx` (``onnx``).
"""

from inferplan.profiles.cuts import Cut, GraphProfile
from inferplan.profiles.io import load_profile, profile_from_dict, save_profile
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
    "mlp",
    "profile_from_dict",
    "resnet50",
    "save_profile",
    "vgg16",
    "vit",
]
