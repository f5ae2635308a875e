"""Hypothesis strategies for small random co-inference systems."""

from __future__ import annotations

from hypothesis import strategies as st

from inferplan.coinference import Device, Discrete, Edge, Layers, System


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(0.0, 1.0).map(lambda u: lo * (hi / lo) ** u)


@st.composite
def discrete_channels(draw: st.DrawFn, max_levels: int = 3) -> Discrete:
    k = draw(st.integers(1, max_levels))
    snr = draw(st.lists(log_uniform(0.05, 200.0), min_size=k, max_size=k, unique=True))
    weights = draw(st.lists(st.floats(0.05, 1.0), min_size=k, max_size=k))
    total = sum(weights)
    return Discrete(tuple(snr), tuple(w / total for w in weights))


@st.composite
def systems(
    draw: st.DrawFn,
    min_layers: int = 1,
    max_layers: int = 3,
    max_levels: int = 3,
    per_stage: bool | None = None,
) -> System:
    """Random systems whose costs make every split stage plausible."""
    n = draw(st.integers(min_layers, max_layers))
    layers = Layers(
        cycles=tuple(draw(st.lists(log_uniform(1e6, 1e9), min_size=n, max_size=n))),
        input_bits=tuple(draw(st.lists(log_uniform(1e4, 1e7), min_size=n + 1, max_size=n + 1))),
        param_bits=tuple(draw(st.lists(log_uniform(1e3, 1e9), min_size=n, max_size=n))),
    )
    device = Device(
        cpu_hz=draw(log_uniform(1e8, 3e9)),
        kappa=draw(log_uniform(1e-29, 1e-27)),
        tx_power_w=draw(log_uniform(0.01, 1.0)),
        bandwidth_hz=draw(log_uniform(1e5, 2e7)),
    )
    edge = Edge(draw(log_uniform(3e9, 1e11)))
    split = draw(st.booleans()) if per_stage is None else per_stage
    channel = (
        tuple(draw(discrete_channels(max_levels)) for _ in range(n + 1))
        if split
        else draw(discrete_channels(max_levels))
    )
    return System(
        device=device,
        edge=edge,
        layers=layers,
        channel=channel,
        downlink_bps=draw(log_uniform(1e6, 1e9)),
        inferences_per_update=draw(st.integers(1, 100_000)),
        energy_weight=draw(st.floats(0.0, 1.0)),
    )
