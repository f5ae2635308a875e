"""The on-device splitting rule: a vector of SNR thresholds, nothing else.

The device runs it once per stage of every inference. Deciding is one comparison (O(1)), and the
policy travels as a small JSON object ``{"placement": M, "thresholds": [...]}`` with ``null``
for an infinite threshold (never split there). On a channel with memory the threshold of a
stage depends on the channel's state, read from the observed SNR (:class:`StatePolicy`, one
binary search among ``K - 1`` boundaries and one comparison) and, on Rician fading, from the
phase of the observed gain too (a sector of it: one division).
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from inferplan.errors import InvalidArgument

__all__ = [
    "Policy",
    "SplitPolicy",
    "StatePolicy",
    "phase_sector",
    "policy_from_dict",
    "policy_from_json",
]


def phase_sector(phase: npt.ArrayLike, phases: int) -> npt.NDArray[np.int64]:
    """The sector of each phase (radians, wrapped to ``[-pi, pi)``) among ``phases`` equal
    slices of the circle, sector 0 starting at ``-pi``.

    Examples
    --------
    >>> phase_sector([-math.pi, -0.1, 0.0, 3.0, math.pi], 4).tolist()
    [0, 1, 2, 3, 0]
    """
    turns = (np.asarray(phase, dtype=np.float64) + math.pi) / (2.0 * math.pi)
    sector = np.floor((turns - np.floor(turns)) * phases).astype(np.int64)
    return np.asarray(np.minimum(sector, phases - 1), dtype=np.int64)


def _stages(snr: npt.ArrayLike, m: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The SNRs of stages ``1..M`` and a stop table whose stage ``M + 1`` always uploads."""
    values = np.asarray(snr, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] < m + 1:
        raise InvalidArgument(f"snr must have shape (k, {m + 1}), got {values.shape}")
    stop = np.ones((values.shape[0], m + 1), dtype=bool)
    return values[:, :m], stop


def _first_upload(stop: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """The 1-based stage of each row's first upload."""
    return np.asarray(np.argmax(stop, axis=1), dtype=np.int64) + 1


@dataclass(frozen=True)
class SplitPolicy:
    """Split at the first stage ``n <= M`` with ``snr >= thresholds[n-1]``, else at ``M + 1``.

    Examples
    --------
    >>> p = SplitPolicy((3.0, math.inf, 0.5))
    >>> p.upload(1, 2.0), p.upload(2, 100.0), p.upload(3, 0.7), p.upload(4, 0.0)
    (False, False, True, True)
    >>> SplitPolicy.from_json(p.to_json()) == p
    True
    """

    thresholds: tuple[float, ...]

    def __post_init__(self) -> None:
        values = tuple(math.inf if t is None else float(t) for t in self.thresholds)
        for n, t in enumerate(values, start=1):
            if math.isnan(t) or t < 0:
                raise InvalidArgument(f"threshold of stage {n} must be >= 0 or null, got {t!r}")
        object.__setattr__(self, "thresholds", values)

    @property
    def placement(self) -> int:
        """``M``: layers on the device; stage ``M + 1`` always uploads."""
        return len(self.thresholds)

    def upload(self, stage: int, snr: float, phase: float | None = None) -> bool:
        """At 1-based ``stage`` with observed linear ``snr``: upload now (True) or run the layer
        (the gain's ``phase`` does not matter to this rule)."""
        if stage > len(self.thresholds):
            return True
        return snr >= self.thresholds[stage - 1]

    def split_points(
        self, snr: npt.ArrayLike, phase: npt.ArrayLike | None = None
    ) -> npt.NDArray[np.int64]:
        """Vectorised: split stage (1-based) for each row of ``snr`` (shape ``(k, M + 1)``);
        ``phase`` does not matter to this rule."""
        values, stop = _stages(snr, self.placement)
        stop[:, : self.placement] = values >= np.asarray(self.thresholds)
        return _first_upload(stop)

    def to_dict(self) -> dict[str, Any]:
        return {
            "placement": self.placement,
            "thresholds": [t if math.isfinite(t) else None for t in self.thresholds],
        }

    def to_json(self) -> str:
        """The policy as one line of JSON."""
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SplitPolicy:
        """Inverse of :meth:`to_dict`."""
        thresholds = data.get("thresholds")
        if not isinstance(thresholds, Sequence) or isinstance(thresholds, str):
            raise InvalidArgument("policy needs a 'thresholds' list")
        policy = cls(tuple(thresholds))
        if "placement" in data and data["placement"] != policy.placement:
            raise InvalidArgument(
                f"policy placement {data['placement']!r} does not match its "
                f"{policy.placement} thresholds"
            )
        return policy

    @classmethod
    def from_json(cls, text: str) -> SplitPolicy:
        """Inverse of :meth:`to_json`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"policy is not valid JSON: {exc.msg}") from None
        if not isinstance(data, Mapping):
            raise InvalidArgument("policy JSON must be an object")
        return cls.from_dict(data)


def _finite_or_none(values: Sequence[float]) -> list[float | None]:
    return [t if math.isfinite(t) else None for t in values]


@dataclass(frozen=True)
class StatePolicy:
    """On a channel with memory: at stage ``n <= M`` in state ``k``, split iff
    ``snr >= thresholds[n - 1][k]``; always split at ``M + 1``.

    The state is the ring whose SNR range ``[boundaries[r - 1], boundaries[r])`` holds the
    observed ``snr``; with ``phases > 1`` (Rician fading, observed as the complex gain) it is
    ``k = r * phases + s``, ``s`` the sector of the gain's phase (:func:`phase_sector`).

    Examples
    --------
    >>> p = StatePolicy(boundaries=(2.0,), thresholds=((math.inf, 3.0), (0.0, 0.0)))
    >>> p.upload(1, 1.0), p.upload(1, 5.0), p.upload(2, 0.5), p.placement
    (False, True, True, 2)
    >>> policy_from_json(p.to_json()) == p
    True
    >>> q = StatePolicy((2.0,), ((math.inf, 0.0, 0.0, 0.0),), phases=2)
    >>> q.upload(1, 1.0, phase=0.5), q.upload(1, 1.0, phase=-0.5)
    (True, False)
    """

    boundaries: tuple[float, ...]
    thresholds: tuple[tuple[float, ...], ...]
    phases: int = 1

    def __post_init__(self) -> None:
        cuts = tuple(float(b) for b in self.boundaries)
        if any(not math.isfinite(b) for b in cuts) or any(
            hi <= lo for lo, hi in itertools.pairwise(cuts)
        ):
            raise InvalidArgument("policy boundaries must be increasing finite SNRs")
        p = self.phases
        if isinstance(p, bool) or not isinstance(p, int | np.integer) or p < 1:
            raise InvalidArgument(f"policy phases must be an integer >= 1, got {p!r}")
        states = (len(cuts) + 1) * int(p)
        rows = []
        for n, row in enumerate(self.thresholds, start=1):
            values = tuple(math.inf if t is None else float(t) for t in row)
            if len(values) != states:
                raise InvalidArgument(
                    f"stage {n} must give one threshold per state ({states}), got {len(values)}"
                )
            for t in values:
                if math.isnan(t) or t < 0:
                    raise InvalidArgument(f"threshold of stage {n} must be >= 0 or null, got {t!r}")
            rows.append(values)
        object.__setattr__(self, "boundaries", cuts)
        object.__setattr__(self, "thresholds", tuple(rows))
        object.__setattr__(self, "phases", int(p))

    @property
    def placement(self) -> int:
        """``M``: layers on the device; stage ``M + 1`` always uploads."""
        return len(self.thresholds)

    def _phase(self, phase: npt.ArrayLike | None) -> npt.ArrayLike:
        if self.phases == 1:
            return 0.0
        if phase is None:
            raise InvalidArgument(
                "this policy's states are sectors of the gain's phase: give the phase",
                field="phase",
            )
        return phase

    def state(self, snr: float, phase: float | None = None) -> int:
        """The state of an observed SNR (and phase of the gain, when the policy reads it)."""
        ring = bisect.bisect_right(self.boundaries, snr)
        return ring * self.phases + int(phase_sector(self._phase(phase), self.phases))

    def upload(self, stage: int, snr: float, phase: float | None = None) -> bool:
        """At 1-based ``stage`` with observed linear ``snr`` (and the gain's ``phase``, radians,
        when the policy reads it): upload now (True) or run the layer."""
        if stage > len(self.thresholds):
            return True
        return snr >= self.thresholds[stage - 1][self.state(snr, phase)]

    def split_points(
        self, snr: npt.ArrayLike, phase: npt.ArrayLike | None = None
    ) -> npt.NDArray[np.int64]:
        """Vectorised: split stage (1-based) for each row of ``snr`` (shape ``(k, M + 1)``),
        and of ``phase`` (the same shape) when the policy reads it."""
        m = self.placement
        values, stop = _stages(snr, m)
        if m:
            states = np.searchsorted(np.asarray(self.boundaries), values, side="right")
            if self.phases > 1:
                angles = np.asarray(self._phase(phase), dtype=np.float64)
                if angles.shape[:1] != values.shape[:1] or angles.ndim != 2:
                    raise InvalidArgument(
                        f"phase must have shape (k, {m + 1}), got {angles.shape}", field="phase"
                    )
                states = states * self.phases + phase_sector(angles[:, :m], self.phases)
            table = np.asarray(self.thresholds, dtype=np.float64)
            stop[:, :m] = values >= table[np.arange(m), states]
        return _first_upload(stop)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "state",
            "placement": self.placement,
            "boundaries": list(self.boundaries),
            "thresholds": [_finite_or_none(row) for row in self.thresholds],
        }
        if self.phases > 1:
            out["phases"] = self.phases
        return out

    def to_json(self) -> str:
        """The policy as one line of JSON."""
        return json.dumps(self.to_dict(), allow_nan=False)


Policy = SplitPolicy | StatePolicy
"""A splitting rule the device runs: thresholds per stage, or per stage and channel state."""


def policy_from_dict(data: Mapping[str, Any]) -> Policy:
    """A policy from its :meth:`~SplitPolicy.to_dict` / :meth:`~StatePolicy.to_dict` form."""
    if data.get("kind") != "state":
        return SplitPolicy.from_dict(data)
    boundaries, thresholds = data.get("boundaries"), data.get("thresholds")
    for name, value in (("boundaries", boundaries), ("thresholds", thresholds)):
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise InvalidArgument(f"policy needs a {name!r} list")
    assert isinstance(boundaries, Sequence) and isinstance(thresholds, Sequence)
    rows = []
    for row in thresholds:
        if not isinstance(row, Sequence) or isinstance(row, str):
            raise InvalidArgument("policy 'thresholds' must be a list of lists (stage x state)")
        rows.append(tuple(row))
    phases = data.get("phases", 1)
    policy = StatePolicy(tuple(boundaries), tuple(rows), phases)
    if "placement" in data and data["placement"] != policy.placement:
        raise InvalidArgument(
            f"policy placement {data['placement']!r} does not match its "
            f"{policy.placement} stages of thresholds"
        )
    return policy


def policy_from_json(text: str) -> Policy:
    """A policy from one line of JSON (either kind)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"policy is not valid JSON: {exc.msg}") from None
    if not isinstance(data, Mapping):
        raise InvalidArgument("policy JSON must be an object")
    return policy_from_dict(data)
