"""Fast simulators: Monte Carlo of training on transient clusters (:mod:`.transient`)."""

from gpucast.simulate.transient import (
    Sampler,
    SpeedFunction,
    SpeedTable,
    empirical_sampler,
    simulate_runs,
    simulate_scenario,
)

__all__ = [
    "Sampler",
    "SpeedFunction",
    "SpeedTable",
    "empirical_sampler",
    "simulate_runs",
    "simulate_scenario",
]
