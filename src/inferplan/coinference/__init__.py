"""Device-edge co-inference (seed paper B): model placement and online splitting.

Examples
--------
>>> from inferplan.coinference import default_system, plan_placement, simulate
>>> system = default_system("alexnet")
>>> plan = plan_placement(system)            # M*, thresholds, Z(0..N)
>>> policy = plan.policy()                   # the O(1) on-device rule
>>> policy.upload(1, snr=50.0) in (True, False)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.coinference.channels import (
        Chain,
        Channel,
        Discrete,
        LogNormal,
        Nakagami,
        Rayleigh,
        ScipyChannel,
        Trace,
    )
    from inferplan.coinference.io import load_system, save_system, system_from_dict
    from inferplan.coinference.markov import (
        GaussMarkov,
        Markov,
        clarke_correlation,
        fit_markov,
        stationary_law,
    )
    from inferplan.coinference.placement import (
        Baselines,
        MlpPlacement,
        PlacementPlan,
        compare_baselines,
        expected_costs,
        fixed_split_costs,
        hybrid_placement,
        memoryless_placement,
        mlp_placement,
        one_step_placement,
        optimal_placement,
        optimality_probabilities,
    )
    from inferplan.coinference.policy import (
        Policy,
        SplitPolicy,
        StatePolicy,
        policy_from_dict,
        policy_from_json,
    )
    from inferplan.coinference.simulate import (
        Simulation,
        StrategySimulation,
        sample_snr,
        simulate,
    )
    from inferplan.coinference.stopping import (
        RULES,
        StoppingSolution,
        evaluate_policy,
        evaluate_thresholds,
        one_step_etc_all,
        one_step_terms,
        one_step_thresholds,
        optimal_thresholds,
        optimality_probability,
        solve_stopping,
    )
    from inferplan.coinference.strategies import (
        FIXED_PREFIX,
        STRATEGIES,
        Decision,
        Strategy,
        decide,
        get_strategy,
        plan_placement,
        planner_names,
        strategy_label,
    )
    from inferplan.coinference.system import (
        DEFAULT_CHANNEL,
        DEFAULT_DEVICE,
        DEFAULT_EDGE,
        Device,
        Edge,
        Layers,
        System,
        default_system,
        layers_from_profile,
        mlp_layers,
    )

__all__ = [
    "DEFAULT_CHANNEL",
    "DEFAULT_DEVICE",
    "DEFAULT_EDGE",
    "FIXED_PREFIX",
    "RULES",
    "STRATEGIES",
    "Baselines",
    "Chain",
    "Channel",
    "Decision",
    "Device",
    "Discrete",
    "Edge",
    "GaussMarkov",
    "Layers",
    "LogNormal",
    "Markov",
    "MlpPlacement",
    "Nakagami",
    "PlacementPlan",
    "Policy",
    "Rayleigh",
    "ScipyChannel",
    "Simulation",
    "SplitPolicy",
    "StatePolicy",
    "StoppingSolution",
    "Strategy",
    "StrategySimulation",
    "System",
    "Trace",
    "clarke_correlation",
    "compare_baselines",
    "decide",
    "default_system",
    "evaluate_policy",
    "evaluate_thresholds",
    "expected_costs",
    "fit_markov",
    "fixed_split_costs",
    "get_strategy",
    "hybrid_placement",
    "layers_from_profile",
    "load_system",
    "memoryless_placement",
    "mlp_layers",
    "mlp_placement",
    "one_step_etc_all",
    "one_step_placement",
    "one_step_terms",
    "one_step_thresholds",
    "optimal_placement",
    "optimal_thresholds",
    "optimality_probabilities",
    "optimality_probability",
    "plan_placement",
    "planner_names",
    "policy_from_dict",
    "policy_from_json",
    "sample_snr",
    "save_system",
    "simulate",
    "solve_stopping",
    "stationary_law",
    "strategy_label",
    "system_from_dict",
]

export_lazily(
    __name__,
    {
        "inferplan.coinference.channels": (
            "Chain",
            "Channel",
            "Discrete",
            "LogNormal",
            "Nakagami",
            "Rayleigh",
            "ScipyChannel",
            "Trace",
        ),
        "inferplan.coinference.io": ("load_system", "save_system", "system_from_dict"),
        "inferplan.coinference.markov": (
            "GaussMarkov",
            "Markov",
            "clarke_correlation",
            "fit_markov",
            "stationary_law",
        ),
        "inferplan.coinference.placement": (
            "Baselines",
            "MlpPlacement",
            "PlacementPlan",
            "compare_baselines",
            "expected_costs",
            "fixed_split_costs",
            "hybrid_placement",
            "memoryless_placement",
            "mlp_placement",
            "one_step_placement",
            "optimal_placement",
            "optimality_probabilities",
        ),
        "inferplan.coinference.policy": (
            "Policy",
            "SplitPolicy",
            "StatePolicy",
            "policy_from_dict",
            "policy_from_json",
        ),
        "inferplan.coinference.simulate": (
            "Simulation",
            "StrategySimulation",
            "sample_snr",
            "simulate",
        ),
        "inferplan.coinference.stopping": (
            "RULES",
            "StoppingSolution",
            "evaluate_policy",
            "evaluate_thresholds",
            "one_step_etc_all",
            "one_step_terms",
            "one_step_thresholds",
            "optimal_thresholds",
            "optimality_probability",
            "solve_stopping",
        ),
        "inferplan.coinference.strategies": (
            "FIXED_PREFIX",
            "STRATEGIES",
            "Decision",
            "Strategy",
            "decide",
            "get_strategy",
            "plan_placement",
            "planner_names",
            "strategy_label",
        ),
        "inferplan.coinference.system": (
            "DEFAULT_CHANNEL",
            "DEFAULT_DEVICE",
            "DEFAULT_EDGE",
            "Device",
            "Edge",
            "Layers",
            "System",
            "default_system",
            "layers_from_profile",
            "mlp_layers",
        ),
    },
)
