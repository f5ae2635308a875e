"""The errors inferplan raises for bad input and impossible requests.

Every error carries *where* the problem is (a file and a field, when known) and *what* is wrong,
so that the command line can print it as one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "DivergentCost",
    "Infeasible",
    "InferplanError",
    "InvalidArgument",
    "InvalidFile",
    "InvalidNetwork",
    "InvalidProfile",
    "InvalidSystem",
    "NetworkHasCycle",
]


class InferplanError(Exception):
    """Base class of every error inferplan raises on purpose.

    Parameters
    ----------
    message
        What is wrong, in words a user can act on.
    source
        The file (or other origin) the bad value came from, if any.
    field
        The element within that source, e.g. ``nodes[2].capacity`` or ``link 'a'->'b'``.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.message = message
        self.source = source
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.source, self.field) if p]
        return ": ".join([*parts, self.message])

    def located(self, source: str) -> InferplanError:
        """Return the same error, attributed to ``source`` if it has no source yet."""
        if self.source is None:
            self.source = source
            self.args = (str(self),)
        return self


class InvalidArgument(InferplanError):
    """A function or command argument is out of range."""


class InvalidFile(InferplanError):
    """A file cannot be read or parsed."""


class InvalidNetwork(InferplanError):
    """A network description is malformed or inconsistent."""


class NetworkHasCycle(InvalidNetwork):
    """A cycle lies on the way from source to target where an acyclic network is required."""


class InvalidProfile(InferplanError):
    """A DNN profile is malformed or inconsistent."""


class InvalidSystem(InferplanError):
    """A device-edge system description is malformed or inconsistent."""


class Infeasible(InferplanError):
    """The request cannot be met by any plan.

    ``details`` holds what is known beyond the message, as JSON-ready values (for a co-design
    target: the best interval the capacity caps allow and the caps that bind it); the command
    line adds them to its ``{"status": "infeasible", ...}`` object.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        details: Mapping[str, Any] | None = None,
    ):
        self.details: Mapping[str, Any] = dict(details or {})
        super().__init__(message, source=source, field=field)


class DivergentCost(InferplanError):
    """An expected cost is infinite, so no meaningful plan exists under the given model."""
