"""What every performance model returns: a value, an interval, and what bounds it.

Measured and predicted values share this shape, so a planner need not care which it got.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpucast.domain.errors import InvalidSpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """A quantity with an interval and a breakdown of the terms that make it up.

    ``breakdown`` maps a term (``compute``, ``memory_bandwidth``, ``ps_network``,
    ``allreduce``, ``checkpoint``, ``startup``, ``overhead``...) to its share in ``unit``.
    ``bottleneck`` names the term that bounds the value. ``source`` says where it came from:
    ``measured``, ``fitted`` (model trained on data for this GPU) or ``catalog`` (specs only).
    """

    value: float
    lower: float
    upper: float
    unit: str
    bottleneck: str
    source: str
    breakdown: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("value", "lower", "upper"):
            v = getattr(self, name)
            if not math.isfinite(v):
                raise InvalidSpecError(name, "must be a finite number", got=v)
        if not self.lower <= self.value <= self.upper:
            raise InvalidSpecError(
                "interval",
                "must satisfy lower <= value <= upper",
                got=(self.lower, self.value, self.upper),
            )
        object.__setattr__(self, "breakdown", MappingProxyType(dict(self.breakdown)))

    @property
    def relative_halfwidth(self) -> float:
        """Half the interval's width over the value (0.1 means +-10%)."""
        return (self.upper - self.lower) / (2 * self.value) if self.value else math.inf

    def to_dict(self) -> dict[str, object]:
        return {
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "unit": self.unit,
            "bottleneck": self.bottleneck,
            "source": self.source,
            "breakdown": dict(self.breakdown),
            "notes": list(self.notes),
        }
