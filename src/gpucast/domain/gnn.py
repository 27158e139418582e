"""Graph-neural-network facts from the catalog (issue #17): CPU neighbour-sampler rates."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuSampler:
    """A CPU neighbour sampler's measured throughput: sampled edges per second of one worker
    (a sampling process), with where the figure comes from."""

    name: str
    edges_per_s: float
    source: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.edges_per_s) and self.edges_per_s > 0):
            raise InvalidSpecError("edges_per_s", "must be a number > 0", got=self.edges_per_s)
