"""Serverless function compute as a catalog fact, for the Dorylus-style GNN split (issue #17):
graph operations on CPU servers, tensor operations on GPUs or serverless functions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCompute:
    """A serverless function offering: US$ per GB-second of memory and per request, the
    memory that buys one vCPU and the least and most memory a function may have."""

    name: str
    usd_per_gb_s: float
    usd_per_request: float
    gb_per_vcpu: float
    max_gb: float
    min_gb: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("usd_per_gb_s", "usd_per_request", "gb_per_vcpu", "max_gb"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a number > 0", got=value)
        if not (math.isfinite(self.min_gb) and 0 <= self.min_gb <= self.max_gb):
            raise InvalidSpecError(
                "min_gb", f"must be in [0, max_gb {self.max_gb:g}]", got=self.min_gb
            )
