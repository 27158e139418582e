"""Synthetic Azure-Functions-like workloads: per-minute invocation counts with the published
characteristics (Shahrad et al., "Serverless in the Wild", USENIX ATC'20), vectorised.

- invocation frequency: 45% of functions invoked once per hour or less on average, 81% once
  per minute or less, the rest up to ~10^4 per minute (the paper's 8 orders of magnitude);
  log-uniform inside each band (:data:`RATE_BANDS`);
- triggers in the paper's shares of functions (:data:`TRIGGER_SHARES`); timer functions are
  periodic (inter-arrival CV 0), the others renewal processes with CV 1 (Poisson, half of
  them) or bursty (CV log-uniform in [1, 4]: gamma inter-arrivals of shape 1/CV^2);
- average execution time log-normal with mu -0.38, sigma 2.36 (seconds), the paper's fit.

Functions invoked at most once a minute get individual arrivals (a ragged flat array of
renewal draws, binned by ``np.bincount``); busier ones get per-minute Poisson counts (a gamma
intensity per minute for the bursty ones). Randomness comes in as a ``numpy`` Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

#: (share of functions, lowest, highest invocations per day), log-uniform inside each band
RATE_BANDS: tuple[tuple[float, float, float], ...] = (
    (0.45, 1.0, 24.0),
    (0.36, 24.0, 1440.0),
    (0.19, 1440.0, 1440.0 * 1e4),
)
#: share of functions per trigger (Shahrad et al. ATC'20, Fig. 3)
TRIGGER_SHARES: dict[str, float] = {
    "http": 0.550,
    "queue": 0.152,
    "event": 0.022,
    "orchestration": 0.069,
    "timer": 0.156,
    "storage": 0.028,
    "others": 0.023,
}
DURATION_LOGNORMAL = (-0.38, 2.36)  # mu, sigma of ln(average execution time in s)
MINUTES_PER_DAY = 1440
#: most functions one synthetic workload may have
MAX_FUNCTIONS = 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class FaasWorkload:
    """``counts[f, m]``: invocations of function ``f`` in minute ``m``; per function its
    trigger, mean rate (per day), inter-arrival CV and average execution time (s)."""

    counts: npt.NDArray[np.int64]
    trigger: npt.NDArray[np.str_]
    rate_per_day: npt.NDArray[np.float64]
    iat_cv: npt.NDArray[np.float64]
    duration_s: npt.NDArray[np.float64]


def generate_faas_workload(
    n_functions: int, rng: np.random.Generator, *, minutes: int = MINUTES_PER_DAY
) -> FaasWorkload:
    """``n_functions`` functions over ``minutes`` minutes (module docstring)."""
    if isinstance(n_functions, bool) or not 1 <= n_functions <= MAX_FUNCTIONS:
        raise InvalidSpecError(
            "synthetic", f"must be an integer in [1, {MAX_FUNCTIONS:,}]", got=n_functions
        )
    if isinstance(minutes, bool) or not 1 <= minutes <= 14 * MINUTES_PER_DAY:
        raise InvalidSpecError("minutes", "must be in [1, 20160] (14 days)", got=minutes)
    shares = np.array([b[0] for b in RATE_BANDS])
    band = rng.choice(len(RATE_BANDS), size=n_functions, p=shares / shares.sum())
    lo = np.log(np.array([b[1] for b in RATE_BANDS]))[band]
    hi = np.log(np.array([b[2] for b in RATE_BANDS]))[band]
    rate_day = np.exp(lo + (hi - lo) * rng.random(n_functions))
    names = np.array(list(TRIGGER_SHARES))
    probs = np.array(list(TRIGGER_SHARES.values()))
    trigger = names[rng.choice(names.size, size=n_functions, p=probs / probs.sum())]
    timer = trigger == "timer"
    bursty = ~timer & (rng.random(n_functions) < 0.5)
    cv = np.where(timer, 0.0, np.where(bursty, np.exp(rng.random(n_functions) * np.log(4)), 1.0))
    duration = rng.lognormal(*DURATION_LOGNORMAL, size=n_functions)

    counts = np.zeros((n_functions, minutes), dtype=np.int64)
    rate_min = rate_day / MINUTES_PER_DAY
    sparse = rate_min <= 1.0
    idx = np.flatnonzero(sparse)
    if idx.size:
        mean_iat = 1.0 / rate_min[idx]
        draws = np.ceil(minutes / mean_iat * 1.5 + 6).astype(np.int64)
        owner = np.repeat(np.arange(idx.size), draws)
        shape = np.repeat(np.where(cv[idx] > 0, 1.0 / np.maximum(cv[idx], 1e-9) ** 2, 0.0), draws)
        scale = np.repeat(mean_iat, draws)
        iat = np.where(
            shape > 0, rng.gamma(np.where(shape > 0, shape, 1.0)) / np.where(shape > 0, shape, 1.0),
            1.0,
        ) * scale  # fmt: skip
        ends = np.cumsum(draws)
        starts = ends - draws
        total = np.cumsum(iat)
        before = np.concatenate([[0.0], total[:-1]])[starts]
        # each function starts at a random phase of its first inter-arrival
        phase = rng.random(idx.size) * mean_iat
        t = total - np.repeat(before, draws) - np.repeat(mean_iat - phase, draws)
        ok = (t >= 0) & (t < minutes)
        cell = idx[owner[ok]] * minutes + t[ok].astype(np.int64)
        counts += np.bincount(cell, minlength=n_functions * minutes).reshape(n_functions, minutes)
    idx = np.flatnonzero(~sparse)
    if idx.size:
        lam = np.broadcast_to(rate_min[idx, None], (idx.size, minutes))
        k = 1.0 / np.maximum(cv[idx], 1.0) ** 2
        intensity = rng.gamma(k[:, None], 1.0 / k[:, None], size=(idx.size, minutes))
        mod = np.where(bursty[idx, None], intensity, 1.0)
        counts[idx] = rng.poisson(lam * mod)
    return FaasWorkload(
        counts=counts, trigger=trigger, rate_per_day=rate_day, iat_cv=cv, duration_s=duration
    )
