"""Packages whose public names load on first use, so that ``import inferplan`` stays light.

A package declares where each of its names lives (``{module: names}``) and keeps the same
imports in a ``TYPE_CHECKING`` block for the type checker. Nothing is imported until a name is
first read; then its module loads and the value is kept.

Each name is a data descriptor on the package's module class rather than a PEP 562
``__getattr__`` fallback: a package may export a function named like one of its modules
(``inferplan.codesign.provision``, the function, from ``codesign/provision.py``), and loading
that module later would otherwise rebind the package attribute to the module.

Examples
--------
>>> import inferplan.codesign
>>> import inferplan.codesign.provision  # the module, loaded by name
>>> inferplan.codesign.provision.__module__  # the function keeps the package's name
'inferplan.codesign.provision'
>>> inferplan.codesign.provision is inferplan.provision
True
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["export_lazily"]


class _Export:
    """A package attribute that imports its module when first read."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self.value: Any = None
        self.loaded = False

    def __get__(self, package: types.ModuleType | None, owner: type) -> Any:
        if package is None:
            return self
        if not self.loaded:
            self.value = getattr(importlib.import_module(self.module), self.name)
            self.loaded = True
        return self.value

    def __set__(self, package: types.ModuleType, value: Any) -> None:
        # The import system binds each submodule on its package; an export of the same name
        # (a function named like its module) wins. Anything else replaces the export.
        if isinstance(value, types.ModuleType) and value.__name__.endswith("." + self.name):
            return
        self.value, self.loaded = value, True


def export_lazily(package: str, homes: Mapping[str, Sequence[str]]) -> None:
    """Make the names of ``homes`` (module -> names) attributes of ``package`` that import
    their module on first read.

    Call it at the end of the package's ``__init__``, with ``package=__name__``.
    """
    module = sys.modules[package]
    exports = {name: _Export(home, name) for home, names in homes.items() for name in names}
    namespace: dict[str, Any] = {
        **exports,
        "__dir__": lambda self: sorted({*vars(self), *exports}),
    }
    module.__class__ = type(f"LazyPackage[{package}]", (types.ModuleType,), namespace)
