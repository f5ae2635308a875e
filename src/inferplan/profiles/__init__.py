"""DNN profiles: the :class:`Profile` value, built-in models and profile files."""

from inferplan.profiles.io import load_profile, profile_from_dict, save_profile
from inferplan.profiles.profile import Profile
from inferplan.profiles.zoo import alexnet, builtin_profile, mlp, resnet50, vgg16

__all__ = [
    "Profile",
    "alexnet",
    "builtin_profile",
    "load_profile",
    "mlp",
    "profile_from_dict",
    "resnet50",
    "save_profile",
    "vgg16",
]
