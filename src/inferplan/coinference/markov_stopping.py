"""Optimal stopping on a channel with memory: backward induction over (stage, state).

On a :class:`~inferplan.coinference.markov.Chain` the cost of continuing depends on the SNR just
seen. With ``eta_n(k) = a_n + b_n / log2(1 + snr_k)`` and ``P_n`` the step from stage ``n`` to
``n + 1``::

    V_{M+1}(k) = eta_{M+1}(k)
    C_n(k)     = sum_j P_n[k, j] V_{n+1}(j)          = E[V_{n+1} | state k at stage n]
    V_n(k)     = min(eta_n(k), C_n(k))               stop iff eta_n(k) <= C_n(k)

so the rule is a threshold on the observed SNR per stage and per state:
``t_{n,k} = eta_n^{-1}(C_n(k))``, split iff ``gamma_n >= t_{n,k}``. Whether the stop set of a
stage is also an upper set of the states (one threshold per stage) depends on the chain; it is
checked, not assumed (:func:`threshold_structure`). A chain whose rows are all equal has
``C_n(k)`` independent of ``k``: the thresholds of the i.i.d. model.

The 1-sla rule with memory stops iff ``eta_n(k) <= E[eta_{n+1} | state k at stage n]``.
Each backward step is one ``K x K`` matrix-vector product: ``O(M K^2)`` per placement.
"""

from __future__ import annotations

import math

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.coinference.channels import Chain, inv_log2
from inferplan.coinference.policy import StatePolicy
from inferplan.coinference.system import System
from inferplan.errors import InvalidArgument

__all__ = [
    "agreement_probability",
    "evaluate_rule",
    "memory_one_step_etc_all",
    "memory_one_step_thresholds",
    "memory_optimal_etc_all",
    "memory_thresholds",
    "rician_threshold_curve",
    "stage_thresholds",
    "state_costs",
    "state_policy",
    "threshold_structure",
]

_LN2 = math.log(2.0)


def _chain(system: System) -> Chain:
    if system.chain is None:
        raise InvalidArgument("the system's channel has no memory (use the i.i.d. solvers)")
    return system.chain


def state_costs(system: System, snr: FloatArray | None = None) -> FloatArray:
    """``(N + 1, K)``: ``eta_n(snr_k)`` for every stage and state (``inf`` for a state of SNR 0
    with a positive upload weight); the states are the chain's unless ``snr`` is given."""
    a, b = system.stage_costs
    with np.errstate(divide="ignore"):
        g = np.asarray(inv_log2(_chain(system).snr if snr is None else snr))
    with np.errstate(over="ignore", invalid="ignore"):
        upload = np.where(b[:, None] == 0.0, 0.0, b[:, None] * g[None, :])
        return np.asarray(a[:, None] + upload, dtype=np.float64)


def _expect(matrix: FloatArray, values: FloatArray) -> FloatArray:
    """``matrix @ values`` where an impossible transition to an infinite value costs nothing."""
    finite = np.isfinite(values)
    if np.all(finite):
        return np.asarray(matrix @ values, dtype=np.float64)
    out = matrix @ np.where(finite, values, 0.0)
    return np.asarray(np.where((matrix[:, ~finite] > 0).any(axis=1), np.inf, out))


def _weigh(law: FloatArray, values: FloatArray) -> float:
    """``law . values`` with impossible states costing nothing (even an infinite cost)."""
    keep = law > 0
    return float(np.dot(law[keep], values[keep]))


def _threshold(a: float, b: float, target: FloatArray) -> FloatArray:
    """The SNRs where ``a + b / log2(1 + gamma)`` equals each ``target`` (``inf``: never)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = _LN2 * b / (target - a)
        t = np.where(exponent < 709.0, np.expm1(np.minimum(exponent, 709.0)), np.inf)
    return np.asarray(np.where(target <= a, np.inf, t), dtype=np.float64)


def memory_thresholds(system: System, placement: int) -> tuple[FloatArray, FloatArray]:
    """Backward induction over (stage, state) for ``M = placement``.

    Returns
    -------
    thresholds
        ``(M, K)``: split at stage ``n`` in state ``k`` iff ``gamma_n >= thresholds[n-1, k]``.
    values
        ``(M + 1, K)``: ``V_n(k)``, the optimal expected ETC from stage ``n`` in state ``k``;
        the optimal expected ETC of an inference is ``initial . values[0]``.
    """
    chain = _chain(system)
    m = system.check_placement(placement)
    return _backward(system, chain.snr, chain.transitions, state_costs(system), m)


def _backward(
    system: System, snr: FloatArray, transitions: FloatArray, eta: FloatArray, m: int
) -> tuple[FloatArray, FloatArray]:
    """Backward induction over (stage, state) for ``M = m``, states of SNR ``snr``."""
    a, b = system.stage_costs
    values = np.empty((m + 1, snr.size))
    thresholds = np.empty((m, snr.size))
    values[m] = eta[m]
    for n in range(m, 0, -1):
        cont = _expect(transitions[n - 1], values[n])
        t = _threshold(float(a[n - 1]), float(b[n - 1]), cont)
        thresholds[n - 1] = t
        values[n - 1] = np.where(snr >= t, eta[n - 1], cont)
    return thresholds, values


def memory_one_step_thresholds(system: System) -> FloatArray:
    """``(N, K)`` 1-sla thresholds with memory: split at ``n`` in state ``k`` iff
    ``eta_n(gamma) <= E[eta_{n+1} | state k at stage n]``. They do not depend on ``M``."""
    chain = _chain(system)
    a, b = system.stage_costs
    eta = state_costs(system)
    out = np.empty((system.n_layers, chain.states))
    for n in range(1, system.n_layers + 1):
        nxt = _expect(chain.transitions[n - 1], eta[n])
        out[n - 1] = _threshold(float(a[n - 1]), float(b[n - 1]), nxt)
    return out


def _as_table(system: System, thresholds: FloatArray) -> FloatArray:
    """Thresholds per stage (i.i.d. rules) broadcast to one per stage and state."""
    chain = _chain(system)
    table = np.asarray(thresholds, dtype=np.float64)
    if table.ndim == 1:
        table = np.broadcast_to(table[:, None], (table.size, chain.states))
    if table.ndim != 2 or table.shape[1] != chain.states:
        raise InvalidArgument(
            f"thresholds must be one per stage or one per stage and state ({chain.states})"
        )
    return table


def evaluate_rule(system: System, thresholds: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Expected ETC and split probabilities of a threshold rule on the system's chain.

    ``thresholds`` is ``(M,)`` (one per stage, an i.i.d. rule) or ``(M, K)`` (per state).

    Returns
    -------
    values
        ``(M + 1,)``: ``E[W_n]``, the rule's expected ETC from stage ``n`` on, averaged over the
        law of the state at stage ``n``; ``values[0]`` is the rule's expected ETC.
    split_probabilities
        ``P(split at n)``, ``n = 1..M+1``.
    """
    chain = _chain(system)
    table = _as_table(system, thresholds)
    m = system.check_placement(table.shape[0])
    eta = state_costs(system)
    stop = chain.snr[None, :] >= table
    cost = eta[m].copy()
    values = np.empty(m + 1)
    values[m] = _weigh(chain.marginals[m], cost)
    for n in range(m, 0, -1):
        cost = np.where(stop[n - 1], eta[n - 1], _expect(chain.transitions[n - 1], cost))
        values[n - 1] = _weigh(chain.marginals[n - 1], cost)
    reach = chain.initial.copy()
    split = np.empty(m + 1)
    for n in range(1, m + 1):
        split[n - 1] = float(reach[stop[n - 1]].sum())
        reach = np.where(stop[n - 1], 0.0, reach) @ chain.transitions[n - 1]
    split[m] = float(reach.sum())
    return values, split


def memory_optimal_etc_all(system: System) -> FloatArray:
    """The optimal expected ETC with memory for every placement ``M = 0..N``."""
    chain = _chain(system)
    return np.array(
        [
            _weigh(chain.initial, memory_thresholds(system, m)[1][0])
            for m in range(system.n_layers + 1)
        ]
    )


def memory_one_step_etc_all(system: System) -> FloatArray:
    """Expected ETC of the 1-sla rule with memory for every placement ``M = 0..N``, in one
    forward pass (its thresholds do not depend on ``M``)."""
    chain = _chain(system)
    eta = state_costs(system)
    stop = chain.snr[None, :] >= memory_one_step_thresholds(system)
    reach = chain.initial.copy()
    stopped = 0.0
    out = np.empty(system.n_layers + 1)
    for n in range(1, system.n_layers + 2):
        out[n - 1] = stopped + _weigh(reach, eta[n - 1])
        if n <= system.n_layers:
            stopped += _weigh(np.where(stop[n - 1], reach, 0.0), eta[n - 1])
            reach = np.where(stop[n - 1], 0.0, reach) @ chain.transitions[n - 1]
    return out


def threshold_structure(system: System, thresholds: FloatArray) -> tuple[bool, ...]:
    """Per stage: whether the states the rule splits in are all the states of SNR at or above
    some SNR (then one threshold per stage, the lowest such state's SNR, says the same). On
    Rician fading the rule reads the phase too and this rarely holds: see
    :func:`rician_threshold_curve`."""
    chain = _chain(system)
    stop = chain.snr[None, :] >= _as_table(system, thresholds)
    lowest = np.asarray(stage_thresholds(system, thresholds))
    # Every state at or above the lowest SNR the rule splits at splits too.
    return tuple(
        bool(np.array_equal(row, chain.snr >= t)) for row, t in zip(stop, lowest, strict=True)
    )


def stage_thresholds(system: System, thresholds: FloatArray) -> tuple[float, ...]:
    """Per stage, the SNR of the lowest state the rule splits in (``inf``: none)."""
    chain = _chain(system)
    stop = chain.snr[None, :] >= _as_table(system, thresholds)
    return tuple(float(chain.snr[row].min()) if row.any() else math.inf for row in stop)


def state_policy(system: System, thresholds: FloatArray) -> StatePolicy:
    """The on-device rule of per-state thresholds on the system's chain."""
    chain = _chain(system)
    table = _as_table(system, thresholds)
    return StatePolicy(
        tuple(chain.boundaries.tolist()),
        tuple(tuple(row) for row in table.tolist()),
        chain.phases,
    )


def agreement_probability(system: System, first: FloatArray, second: FloatArray) -> float:
    """``P(two threshold rules of the same M split at the same stage)`` on the chain: both go
    on while the SNR is below both thresholds and stop together when it is above both."""
    chain = _chain(system)
    lo_rule, hi_rule = _as_table(system, first), _as_table(system, second)
    m = lo_rule.shape[0]
    reach = chain.initial.copy()
    total = 0.0
    for n in range(1, m + 1):
        lo = np.minimum(lo_rule[n - 1], hi_rule[n - 1])
        hi = np.maximum(lo_rule[n - 1], hi_rule[n - 1])
        total += float(reach[chain.snr >= hi].sum())
        reach = np.where(chain.snr < lo, reach, 0.0) @ chain.transitions[n - 1]
    return min(1.0, total + float(reach.sum()))


def rician_threshold_curve(system: System, thresholds: FloatArray) -> FloatArray:
    """``(M, phases)``: on Rician fading (:class:`~inferplan.coinference.RicianGaussMarkov`),
    per stage and phase sector the representative SNR of the lowest ring the rule
    ``thresholds`` (``(M, K)``, as :func:`memory_thresholds` gives) splits in (``inf``: none).

    The stop set of a sector is every ring from there on where it is an upper set of the rings,
    which holds in every case tested but is not assumed.

    Examples
    --------
    >>> from inferplan.coinference import RicianGaussMarkov, default_system, mlp_layers
    >>> channel = RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.9, radii=8, phases=4)
    >>> s = default_system(layers=mlp_layers(64, 3), channel=channel)
    >>> rician_threshold_curve(s, memory_thresholds(s, 2)[0]).shape
    (2, 4)
    """
    chain = _chain(system)
    table = _as_table(system, thresholds)
    rings = chain.states // chain.phases
    snr = chain.snr.reshape(rings, chain.phases)
    stop = snr[None] >= table.reshape(-1, rings, chain.phases)
    lowest = np.where(stop.any(axis=1), np.argmax(stop, axis=1), -1)
    curve = np.take_along_axis(snr, np.maximum(lowest, 0), axis=0)
    return np.asarray(np.where(lowest >= 0, curve, np.inf), dtype=np.float64)
