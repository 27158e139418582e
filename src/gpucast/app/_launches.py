"""``simulate train``'s work is bounded up front in server launches, as its memory is in Monte
Carlo cells: the engine draws every incarnation of every spot server until its run ends, so a
large synchronous job that is revoked faster than it restarts (it never finishes) launches
``runs x nodes x revocations per node over the whole horizon`` servers -- minutes to hours.

The estimate: a run needs, per checkpoint segment, one stretch of ``segment + checkpoint +
start-up + restart`` seconds free of the revocations that roll it back (any node when
synchronous, the chief's otherwise); with those at ``h`` per second that takes
``(exp(h L) - 1) / h`` on average (Poisson revocations), up to the horizon. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import format_duration

#: server launches one ``simulate train`` may draw without ``--allow-large``: about a minute
#: on one core (26 million took 94 s on a shared 2-CPU machine)
MAX_LAUNCHES = 20_000_000


def mean_delay_s(delay: object) -> float:
    """Mean of a start-up delay: a number of seconds, or a sampler ``(rng, n) -> seconds``."""
    if callable(delay):
        import numpy as np

        return float(np.mean(delay(np.random.default_rng(0), 256)))
    return float(delay)  # type: ignore[arg-type]


def expected_run_s(
    *, segments: float, segment_s: float, lost_per_rollback_s: float, rollback_per_s: float,
    horizon_s: float,
) -> float:  # fmt: skip
    """Mean time of a run whose ``segments`` each need ``segment_s + lost_per_rollback_s``
    seconds without a rollback (rollbacks at ``rollback_per_s``), capped at the horizon."""
    need = segment_s + lost_per_rollback_s
    if rollback_per_s <= 0:
        return min(horizon_s, segments * need)
    x = rollback_per_s * need
    if x > 700:  # (exp overflows: never within any horizon)
        return horizon_s
    return min(horizon_s, segments * math.expm1(x) / rollback_per_s)


def check_launches(
    *,
    runs: int,
    counts: Sequence[int],
    hazards_per_s: Sequence[float],
    rollback_per_s: float,
    run_s: float,
    horizon_s: float,
    allow_large: bool,
) -> None:
    """Refuse ``runs`` of a cluster whose spot nodes (``counts[g]`` at ``hazards_per_s[g]``
    revocations per second each) would launch more than the default ceiling of servers in a
    mean run of ``run_s``, unless ``allow_large``."""
    per_s = sum(c * h for c, h in zip(counts, hazards_per_s, strict=True))
    launches = runs * (sum(counts) + per_s * run_s)
    if allow_large or launches <= MAX_LAUNCHES:
        return
    nodes = sum(c for c, h in zip(counts, hazards_per_s, strict=True) if h > 0)
    ends = (
        f"the runs go on to the {horizon_s / 86400:g}-day horizon"
        if run_s >= horizon_s
        else f"a mean run of {format_duration(run_s)}"
    )
    rolls = (
        f", the job rolled back every {1 / rollback_per_s:.3g} s"
        if 0 < rollback_per_s < per_s
        else ", each rolling the job back"
    )
    raise InvalidSpecError(
        "workers",
        f"{nodes:,} spot nodes x {runs:,} runs would launch about {launches:,.0f} servers "
        f"(a node revoked every {1 / per_s:.3g} s{rolls}; {ends}), beyond the default "
        f"ceiling of {MAX_LAUNCHES:,} (minutes to hours of simulation)",
        fix="lower --workers or --runs (or --steps), checkpoint more often, or pass --allow-large",
    )
