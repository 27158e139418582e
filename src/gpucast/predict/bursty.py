"""Spot markets as they are: revocations that come in storms, and the waits for capacity.

Pure: numbers in, numbers out (numpy and scipy). The files are parsed by
:mod:`gpucast.store.datasets.preemption`; the records they give live in
:mod:`gpucast.domain.preemption`.

* :class:`MarkovModulatedLifetime` — a two-state (calm/storm) Markov-modulated hazard, a
  :class:`~gpucast.predict.revocation.CorrelatedLifetime`: every node of one market shares the
  state path within a simulated run, so nodes die together when a storm comes. One node on
  its own (``sample``/``survival``) has the stationary marginal, computed exactly: the
  survival ``pi exp((Q - Lambda) t) 1`` of a reversible two-state chain is a mixture of two
  exponentials with positive weights (the symmetrised generator's spectrum).
* :func:`fit_mmpp` / :class:`MMPPModel` (kind ``"mmpp"``) — a two-state Poisson hidden Markov
  model on the revocations per tick of a node-count trace, with exposure (node-hours at risk)
  per tick, fitted by Baum–Welch from several seeded starts. A trace without revocations, or
  one that a single state explains as well (BIC), falls back to a constant hazard and says so.
* :class:`CapacityGaps` (kind ``"capacity-gaps"``) — how long a revoked node's market stays
  short of capacity: Kaplan–Meier on the trace's gaps (a gap still open at the trace's end is
  right-censored) with an exponential tail beyond the last observed recovery.
* :class:`PiecewiseHazardLifetime` — a user-given piecewise-constant hazard (a
  :class:`~gpucast.domain.preemption.HazardSpec`), on the node's age or on the run's clock,
  sampled by inverting the cumulative hazard; :class:`PiecewiseHazardModel` (kind
  ``"piecewise-hazard"``) fits one on censored lifetimes (events / exposure per age bin).
* :func:`fit_lifetimes` — instance-lifetime records into the existing
  :class:`~gpucast.predict.revocation.RevocationModel` (Weibull / Kaplan–Meier per GPU and
  region).

The public names are here (``__all__``) with :func:`fit_lifetimes`; the code lives in private
parts: the checks every part shares (``_bursty_checks``), the Markov-modulated hazard
(``_bursty_markov``), the hidden Markov model's forward-backward scans (``_bursty_scans``) and
its fit (``_bursty_mmpp``), the capacity gaps (``_bursty_gaps``) and the piecewise-constant
hazards (``_bursty_piecewise``).

Randomness comes only from the ``numpy.random.Generator`` passed in: same seed, same draws.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.preemption import InstanceLifetime, instance_lifetimes_frame
from gpucast.predict._bursty_gaps import CapacityGaps
from gpucast.predict._bursty_markov import MarkovModulatedLifetime, MMPPPath
from gpucast.predict._bursty_mmpp import (
    MMPPFit,
    MMPPModel,
    fit_mmpp,
    fit_mmpp_events,
    storm_probability,
)
from gpucast.predict._bursty_piecewise import CLOCKS, PiecewiseHazardLifetime, PiecewiseHazardModel
from gpucast.predict.revocation import RevocationModel

__all__ = [
    "CLOCKS",
    "CapacityGaps",
    "MMPPFit",
    "MMPPModel",
    "MMPPPath",
    "MarkovModulatedLifetime",
    "PiecewiseHazardLifetime",
    "PiecewiseHazardModel",
    "fit_lifetimes",
    "fit_mmpp",
    "fit_mmpp_events",
    "storm_probability",
]


def fit_lifetimes(
    records: Iterable[InstanceLifetime],
    *,
    method: str = "weibull",
    min_events: int = 3,
    cap_s: float | None = None,
) -> RevocationModel:
    """A :class:`~gpucast.predict.revocation.RevocationModel` (Weibull and Kaplan–Meier per GPU
    and region, censoring respected) fitted on instance-lifetime records; a record without a
    GPU or region counts as ``unknown``. ``cap_s``: a forced end of every lifetime, if the
    provider has one (GCE preemptible: 86400); default none."""
    frame = instance_lifetimes_frame(records)
    if frame.empty:
        raise InvalidSpecError(
            "lifetimes", "need at least one record", fix="pass the rows of a lifetimes CSV"
        )
    return RevocationModel(method=method, min_events=min_events, cap_s=cap_s).fit(frame)
