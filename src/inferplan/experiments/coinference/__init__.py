"""The co-inference study: a sweep point function, and the reproduction of the paper's findings.

**The study** (``study: coinference`` in a sweep spec, :func:`coinference_point`): one point
is one device-edge system, the documented default system (docs/coinference.md) with the
point's parameters replacing fields. Parameters (all optional):

``profile``
    A built-in profile (``alexnet``, ``vgg16``, ``resnet50``), a profile file, or
    ``mlp-WIDTHxDEPTH``: the paper's equal-width MLP (:func:`~inferplan.coinference.mlp_layers`:
    every ``I_i``, the input included, is ``8 lambda X`` bits), so its closed form applies.
    Default ``alexnet``.
``inferences_per_update`` (``K``), ``energy_weight`` (``beta_e``), ``bandwidth_hz`` (uplink
``W``), ``downlink_bps``, ``device_cpu_hz``, ``edge_cpu_hz``, ``tx_power_w``
    The system fields of those names.
``channel``, ``mean_snr``, ``min_snr``, ``nakagami_m``, ``sigma_db``, ``speed_mps``,
``carrier_hz``, ``rho``, ``k_factor``
    The SNR law of every split stage: ``rayleigh`` (default), ``nakagami`` (shape
    ``nakagami_m``, default 2), ``lognormal`` (shadowing ``sigma_db``, default 6 dB) or
    ``gauss-markov`` (Rayleigh fading with memory, :class:`~inferplan.coinference.GaussMarkov`:
    ``rho``, or Clarke's model from ``speed_mps`` and ``carrier_hz``; with ``k_factor``,
    Rician fading with memory, :class:`~inferplan.coinference.RicianGaussMarkov`, on its
    default grid).
    ``mean_snr`` (linear, default 10) is the mean of the fading law before the outage floor
    ``min_snr`` (linear, default 0.25; ``0`` removes the floor where the cost stays finite),
    as in :class:`~inferplan.coinference.Rayleigh`; a log-normal law has no floor and its
    linear mean is ``mean_snr``.
``sample``
    The index of the point in a random sample (set by the engine).

Options: ``methods``, the placement methods to run and time (default ``optimal``, ``1sla``,
``hybrid``); ``simulate``, inferences to simulate per point as a Monte-Carlo check (default 0:
none), drawn from the point's seed; ``confidence`` of the simulated intervals (default 0.999).

Rows: ``record = "curve"``, one per placement ``M = 0..N``: ``placement_cost`` ``c(M)``,
``z_optimal``, ``z_1sla`` and ``p_1sla_optimal`` (the exact probability that 1-sla splits where
the optimal rule does); ``record = "strategy"``, one per planner and baseline: ``cost`` (``Z``
per inference), ``placement`` (``M``), ``split_stage`` (fixed splits), ``saving``
(``1 - Z_joint / cost``, ``Z_joint`` the exact optimum), ``runtime_s`` and
``stage_evaluations`` (planners), ``closed_form_placement`` (``1sla`` on an equal-width MLP) and
``sim_mean``, ``sim_ci_low``, ``sim_ci_high`` and ``sim_confidence`` (the interval's level) when
simulating.

**The reproduction** (:func:`reproduce_coinference`, ``inferplan reproduce coinference``):
AlexNet, VGG-16 and ``mlp-1024x8``, each swept one parameter at a time around the default
system over ``K``, the mean SNR, the uplink bandwidth and ``beta_e``
(:data:`COINFERENCE_SWEEPS`); it writes results, summaries, figures and a report.
"""

from __future__ import annotations

from inferplan.experiments.coinference.driver import (
    reproduce_coinference,
)
from inferplan.experiments.coinference.point import (
    BASELINES,
    CoinferenceOptions,
    CoinferenceParams,
    build_system,
    check_values,
    coinference_point,
)
from inferplan.experiments.coinference.report import (
    coinference_report,
)
from inferplan.experiments.coinference.summary import (
    COINFERENCE_DNNS,
    COINFERENCE_SWEEPS,
    CURVE_COLUMNS,
    SAVINGS_COLUMNS,
    SWEEP_COLUMNS,
    coinference_sweep,
    curve_summary,
    savings_summary,
    sweep_summary,
)

__all__ = [
    "BASELINES",
    "COINFERENCE_DNNS",
    "COINFERENCE_SWEEPS",
    "CURVE_COLUMNS",
    "SAVINGS_COLUMNS",
    "SWEEP_COLUMNS",
    "CoinferenceOptions",
    "CoinferenceParams",
    "build_system",
    "check_values",
    "coinference_point",
    "coinference_report",
    "coinference_sweep",
    "curve_summary",
    "reproduce_coinference",
    "savings_summary",
    "sweep_summary",
]
