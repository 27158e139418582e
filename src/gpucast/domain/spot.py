"""Facts and records of spot (transient) servers that importers and models share.

GCE's 24-hour cap on preemptible VMs, how a lifetime that reached it is censored, zone names,
and the chief-rejoining eval series of CM-DARE. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: GCE stops every preemptible VM after 24 hours.
GCP_PREEMPTIBLE_CAP_S = 24 * 3600.0
#: A lifetime this close to (or beyond) the cap is the forced stop: right-censored.
DEFAULT_CAP_TOLERANCE_S = 30 * 60.0

_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")


def zone_to_region(zone: str) -> str:
    """``us-east1-c`` -> ``us-east1``; a region is returned unchanged."""
    match = _ZONE.match(zone.strip())
    return match.group(1) if match else zone.strip()


def censor_observed(
    duration_s: npt.ArrayLike,
    *,
    cap_s: float | None = GCP_PREEMPTIBLE_CAP_S,
    tolerance_s: float = DEFAULT_CAP_TOLERANCE_S,
) -> npt.NDArray[np.bool_]:
    """``True`` where a lifetime ended in a revocation, ``False`` where it reached the cap."""
    d = np.asarray(duration_s, dtype=np.float64)
    if cap_s is None:
        return np.ones(d.shape, dtype=bool)
    return d < cap_s - tolerance_s


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalSeries:
    """One chief-rejoining run: eval records (global step, wall time in s).

    ``chief_left_at_step`` is ``None`` for an undisturbed baseline run.
    """

    name: str
    steps: tuple[float, ...]
    wall_s: tuple[float, ...]
    chief_left_at_step: int | None
