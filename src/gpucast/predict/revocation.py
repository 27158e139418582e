"""How long transient (spot / preemptible) servers live, and what losing one costs.

Pure: numbers in, numbers out. The file parsing lives in :mod:`gpucast.store.datasets.transient`.

* :class:`RevocationModel` (kind ``"revocation"``) fits server lifetimes per GPU type and region
  with survival analysis (lifelines' Kaplan–Meier and Weibull fitters), respecting censoring:
  GCE preemptible VMs are stopped after 24 h, so a lifetime within ``cap_tolerance_s`` of the
  cap is the forced stop, not a revocation (right-censored). A region with fewer than
  ``min_events`` observed revocations falls back to the GPU's pooled fit; an unknown GPU falls
  back to a hazard band given by the caller. Every distribution says which one was used.
* For providers without lifetime data: :func:`hazard_from_interruption_band` (AWS Spot
  Advisor's monthly interruption-frequency bands) and :class:`ExponentialLifetime` (a
  user-given hazard in revocations per hour).
* :func:`estimate_restart_penalty` turns CM-DARE's chief-rejoining runs into the seconds a
  restart costs beyond the steps lost since the last checkpoint.

Lifetime distributions share one small interface: ``sample(rng, n)`` (seconds, vectorised
inverse-CDF), ``survival(t_s)`` and ``source``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, GpucastError, InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.domain.preemption import UNKNOWN
from gpucast.domain.spot import (
    GCP_PREEMPTIBLE_CAP_S,
    EvalSeries,
    zone_to_region,
)
from gpucast.predict.base import Estimator, register

if TYPE_CHECKING:
    import pandas as pd

FloatArray = npt.NDArray[np.float64]

#: Lifetimes are recorded to the minute; a "0 minute" life is given this many seconds.
MIN_LIFETIME_S = 30.0
HOURS_PER_MONTH = 730.0


# -- lifetime distributions ----------------------------------------------------------------


class LifetimeDistribution(Protocol):
    """What the simulator needs from a server's lifetime (seconds from its creation)."""

    @property
    def source(self) -> str: ...

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray: ...

    def survival(self, t_s: npt.ArrayLike) -> FloatArray: ...


@runtime_checkable
class CorrelatedLifetime(LifetimeDistribution, Protocol):
    """A lifetime whose hazard follows a state shared by every node of one market (a zone and
    GPU type) within one simulated run, so revocations come in bursts (e.g. a two-state
    calm/storm Markov-modulated hazard fitted on a node-count trace).

    ``sample``/``survival`` give the stationary marginal (nodes taken one at a time);
    ``environment(rng, runs, horizon_s)`` draws one state path per run (an opaque value);
    ``sample_at(rng, start_s, run, env)`` draws the lifetime of a node requested at
    ``start_s`` (s from the run's start) in run ``run`` (indices into ``env``), given the
    path: nodes of one run that share a path are revoked together when a storm comes.
    """

    def environment(self, rng: np.random.Generator, runs: int, horizon_s: float) -> Any: ...

    def sample_at(
        self,
        rng: np.random.Generator,
        start_s: FloatArray,
        run: npt.NDArray[np.int64],
        env: Any,
    ) -> FloatArray: ...


def _apply_cap(t: FloatArray, cap_s: float | None) -> FloatArray:
    return t if cap_s is None else np.minimum(t, cap_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialLifetime:
    """Constant hazard ``hazard_per_hour`` (revocations per server-hour); 0 never revokes."""

    hazard_per_hour: float
    cap_s: float | None = None
    source: str = "user-given hazard"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.hazard_per_hour) and self.hazard_per_hour >= 0):
            raise InvalidSpecError(
                "hazard",
                "must be a revocation rate >= 0 per hour",
                got=self.hazard_per_hour,
                fix="e.g. --hazard-per-hour 0.05",
            )

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        if self.hazard_per_hour == 0:
            return _apply_cap(np.full(n, np.inf), self.cap_s)
        mean_s = 3600.0 / self.hazard_per_hour
        return _apply_cap(rng.exponential(mean_s, size=n), self.cap_s)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        t = np.asarray(t_s, dtype=np.float64)
        s = np.exp(-self.hazard_per_hour * t / 3600.0)
        if self.cap_s is not None:
            s = np.where(t >= self.cap_s, 0.0, s)
        return np.asarray(s, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class WeibullLifetime:
    """S(t) = exp(-(t / scale_s) ** shape), forced to end at ``cap_s``."""

    scale_s: float
    shape: float
    cap_s: float | None = GCP_PREEMPTIBLE_CAP_S
    source: str = "weibull"
    #: the observed revocations it was fitted on (``None``: not a fit of observations)
    revocations: int | None = None

    def __post_init__(self) -> None:
        for name in ("scale_s", "shape"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InvalidSpecError(f"weibull.{name}", "must be > 0", got=v)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        u = rng.random(n)
        # inverse CDF of S: t = scale * (-ln U)^(1/shape); 1 - random() is in (0, 1]
        t = self.scale_s * (-np.log1p(-u)) ** (1.0 / self.shape)
        return _apply_cap(t, self.cap_s)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        t = np.maximum(np.asarray(t_s, dtype=np.float64), 0.0)
        s = np.exp(-((t / self.scale_s) ** self.shape))
        if self.cap_s is not None:
            s = np.where(t >= self.cap_s, 0.0, s)
        return np.asarray(s, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmpiricalLifetime:
    """A Kaplan–Meier step function: S = ``survival_after[i]`` from ``times_s[i]`` on.

    Beyond the last revocation the survival stays flat; sampled lifetimes landing there end at
    ``cap_s`` (the forced stop) or never (``inf``) without a cap.
    """

    times_s: tuple[float, ...]
    survival_after: tuple[float, ...]
    cap_s: float | None = GCP_PREEMPTIBLE_CAP_S
    source: str = "kaplan-meier"
    #: the observed revocations it was fitted on (``None``: not a fit of observations)
    revocations: int | None = None

    def __post_init__(self) -> None:
        t = np.asarray(self.times_s, dtype=np.float64)
        s = np.asarray(self.survival_after, dtype=np.float64)
        if t.shape != s.shape:
            raise InvalidSpecError("km table", "times and survival must have equal length")
        if t.size and (np.any(np.diff(t) < 0) or np.any(np.diff(s) > 1e-12)):
            raise InvalidSpecError("km table", "times must increase and survival not increase")
        if s.size and (s.min() < 0 or s.max() > 1):
            raise InvalidSpecError("km table", "survival must lie in [0, 1]")

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        u = rng.random(n)
        t = np.asarray(self.times_s, dtype=np.float64)
        cdf = 1.0 - np.asarray(self.survival_after, dtype=np.float64)
        tail = math.inf if self.cap_s is None else self.cap_s
        if t.size == 0:
            return np.full(n, tail)
        # smallest event time whose CDF reaches u (inverse of the step CDF)
        idx = np.searchsorted(cdf, u, side="left")
        out = np.full(n, tail)
        inside = idx < t.size
        out[inside] = t[idx[inside]]
        return _apply_cap(out, self.cap_s)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        t_eval = np.asarray(t_s, dtype=np.float64)
        t = np.asarray(self.times_s, dtype=np.float64)
        s = np.concatenate([[1.0], np.asarray(self.survival_after, dtype=np.float64)])
        out = s[np.searchsorted(t, t_eval, side="right")]
        if self.cap_s is not None:
            out = np.where(t_eval >= self.cap_s, 0.0, out)
        return np.asarray(out, dtype=np.float64)


#: Fewer observed revocations than this under a fitted lifetime distribution are said beside
#: the Monte Carlo's validated error (a Weibull or Kaplan-Meier fit on 5 events is a guess)
FEW_REVOCATIONS = 20


def few_revocations_note(dists: Iterable[LifetimeDistribution | None]) -> str | None:
    """Which of ``dists`` rest on fewer than :data:`FEW_REVOCATIONS` observed revocations:
    each fitted group once (``pooled: V100 all regions``), with its count; ``None``: none."""
    thin: dict[str, int] = {}
    for d in dists:
        count = getattr(d, "revocations", None)
        if d is not None and count is not None and count < FEW_REVOCATIONS:
            thin[d.source.split(" (n=")[0]] = count  # the group, not why a region pooled
    if not thin:
        return None
    return f"lifetimes fitted on fewer than {FEW_REVOCATIONS} observed revocations: " + ", ".join(
        f"{group} ({count})" for group, count in thin.items()
    )


# -- published interruption bands ---------------------------------------------------------

#: AWS Spot Advisor's "frequency of interruption" bands (share of instances interrupted per
#: month) -> (lower, representative, upper). The open band ">20%" is represented by 30%.
AWS_INTERRUPTION_BANDS: dict[str, tuple[float, float, float]] = {
    "<5%": (0.0, 0.025, 0.05),
    "5-10%": (0.05, 0.075, 0.10),
    "10-15%": (0.10, 0.125, 0.15),
    "15-20%": (0.15, 0.175, 0.20),
    ">20%": (0.20, 0.30, 1.0),
}


def monthly_fraction_to_hazard_per_hour(fraction: float) -> float:
    """Constant hazard h with P(revoked within a month of 730 h) = ``fraction``.

    ``1 - exp(-h * 730) = f``  =>  ``h = -ln(1 - f) / 730``.
    """
    if not 0 <= fraction < 1:
        raise InvalidSpecError("interruption frequency", "must be in [0, 1)", got=fraction)
    return -math.log1p(-fraction) / HOURS_PER_MONTH


def hazard_from_interruption_band(band: str, *, which: str = "mid") -> ExponentialLifetime:
    """A constant-hazard lifetime from an AWS Spot Advisor band such as ``"5-10%"``.

    The band is read as the probability that an instance is interrupted within a month (730 h)
    and converted with :func:`monthly_fraction_to_hazard_per_hour`; ``which`` picks the band's
    ``lower``, ``mid`` (default; 30% for ">20%") or ``upper`` edge.
    """
    key = band.replace(" ", "").replace("–", "-")
    if key not in AWS_INTERRUPTION_BANDS:
        raise InvalidSpecError(
            "interruption-band",
            f"must be one of {', '.join(AWS_INTERRUPTION_BANDS)}",
            got=band,
            fix="copy the band shown by AWS Spot Instance Advisor, e.g. --interruption-band 5-10%",
        )
    positions = {"lower": 0, "mid": 1, "upper": 2}
    if which not in positions:
        raise InvalidSpecError("which", "must be lower, mid or upper", got=which)
    fraction = min(AWS_INTERRUPTION_BANDS[key][positions[which]], 0.99)
    hazard = monthly_fraction_to_hazard_per_hour(fraction)
    return ExponentialLifetime(
        hazard_per_hour=hazard,
        source=(
            f"hazard band: AWS Spot Advisor {key}/month ({which} {fraction:.1%}) "
            f"-> {hazard:.2e} revocations/h"
        ),
    )


# -- the fitted model -----------------------------------------------------------------------

_REQUIRED = ("gpu", "region", "duration_s", "observed")
_POOLED = "*"


def _lifelines() -> tuple[Any, Any]:
    try:
        from lifelines import KaplanMeierFitter, WeibullFitter
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise GpucastError(
            "fitting server lifetimes needs the survival-analysis library lifelines",
            fix="pip install 'gpucast[survival]'",
        ) from None
    return KaplanMeierFitter, WeibullFitter


def _fit_group(durations: FloatArray, observed: npt.NDArray[np.bool_]) -> dict[str, Any]:
    kmf_cls, wf_cls = _lifelines()
    d = np.maximum(durations, MIN_LIFETIME_S)
    e = observed.astype(bool)
    km = kmf_cls().fit(d, event_observed=e)
    table = km.survival_function_.iloc[:, 0]
    event_times = np.unique(d[e])
    surv = table.reindex(event_times).to_numpy(dtype=np.float64)
    group: dict[str, Any] = {
        "n": int(d.size),
        "events": int(e.sum()),
        "exposure_h": float(d.sum() / 3600.0),
        "km_times_s": [float(x) for x in event_times],
        "km_survival": [float(x) for x in np.minimum.accumulate(surv)] if surv.size else [],
        "weibull_scale_s": None,
        "weibull_shape": None,
    }
    if e.sum() >= 2:
        wf = wf_cls().fit(d, event_observed=e)
        group["weibull_scale_s"] = float(wf.lambda_)
        group["weibull_shape"] = float(wf.rho_)
    return group


def _group_label(gpu: str, where: str) -> str:
    """A group of lifetimes in a source line (``K80 us-east-1``); records without a GPU
    (:data:`~gpucast.domain.preemption.UNKNOWN`) say so, not ``UNKNOWN``."""
    return f"rows without a GPU, {where}" if gpu.lower() == UNKNOWN else f"{gpu} {where}"


@register
class RevocationModel(Estimator):
    """Lifetimes of transient servers per GPU type and region, from censored observations.

    ``method`` picks what :meth:`distribution` samples: ``"weibull"`` (smooth; default) or
    ``"km"`` (the Kaplan–Meier step function itself). Both are fitted and saved.
    """

    kind = "revocation"
    schema_version = 1

    def __init__(
        self,
        *,
        method: str = "weibull",
        min_events: int = 3,
        cap_s: float | None = GCP_PREEMPTIBLE_CAP_S,
    ) -> None:
        if method not in ("weibull", "km"):
            raise InvalidSpecError("method", "must be 'weibull' or 'km'", got=method)
        if min_events < 1:
            raise InvalidSpecError("min_events", "must be >= 1", got=min_events)
        self.method = method
        self.min_events = min_events
        self.cap_s = cap_s
        self._groups: dict[str, dict[str, Any]] | None = None

    @property
    def is_fitted(self) -> bool:
        return self._groups is not None

    # -- fitting ----------------------------------------------------------------------------
    def fit(self, lifetimes: pd.DataFrame) -> Self:
        """Fit from a frame with columns ``gpu``, ``region``, ``duration_s``, ``observed``."""
        import pandas as pd

        missing = [c for c in _REQUIRED if c not in lifetimes.columns]
        if missing:
            raise DataFormatError(
                "lifetimes",
                f"missing column(s) {', '.join(missing)}",
                fix=f"pass a frame with columns {', '.join(_REQUIRED)}",
            )
        frame = lifetimes.loc[:, list(_REQUIRED)].copy()
        duration = pd.to_numeric(frame["duration_s"], errors="coerce").to_numpy(np.float64)
        if frame.empty or not np.all(np.isfinite(duration)) or np.any(duration < 0):
            raise DataFormatError(
                "lifetimes",
                "duration_s must be finite numbers >= 0 (and at least one row)",
                column="duration_s",
            )
        frame["duration_s"] = duration
        frame["observed"] = frame["observed"].astype(bool)
        frame["gpu"] = frame["gpu"].astype(str)
        frame["region"] = frame["region"].astype(str).map(zone_to_region)
        groups: dict[str, dict[str, Any]] = {}
        for gpu, by_gpu in frame.groupby("gpu", sort=True):
            groups[self._key(str(gpu), _POOLED)] = _fit_group(
                by_gpu["duration_s"].to_numpy(np.float64), by_gpu["observed"].to_numpy(bool)
            )
            for region, sub in by_gpu.groupby("region", sort=True):
                groups[self._key(str(gpu), str(region))] = _fit_group(
                    sub["duration_s"].to_numpy(np.float64), sub["observed"].to_numpy(bool)
                )
        self._groups = groups
        return self

    @staticmethod
    def _key(gpu: str, region: str) -> str:
        return f"{gpu.lower()}|{region.lower()}"

    # -- queries ----------------------------------------------------------------------------
    def gpus(self) -> tuple[str, ...]:
        self._require_fitted()
        assert self._groups is not None
        return tuple(sorted({k.split("|")[0] for k in self._groups}))

    def regions(self, gpu: str) -> tuple[str, ...]:
        self._require_fitted()
        assert self._groups is not None
        prefix = gpu.lower() + "|"
        return tuple(
            sorted(
                k.split("|")[1]
                for k in self._groups
                if k.startswith(prefix) and not k.endswith("|" + _POOLED)
            )
        )

    def group_stats(self, gpu: str, region: str | None = None) -> dict[str, Any]:
        """n, events, exposure and fitted parameters of one group (``None``: GPU pooled)."""
        self._require_fitted()
        assert self._groups is not None
        key = self._key(gpu, _POOLED if region is None else zone_to_region(region))
        if key not in self._groups:
            raise InvalidSpecError("group", f"no lifetimes for {gpu} {region or ''}".strip())
        return dict(self._groups[key])

    def _build(self, group: dict[str, Any], label: str, why: str) -> LifetimeDistribution:
        n, events = group["n"], group["events"]
        detail = f"{label} (n={n}, {events} revocations{why})"
        if self.method == "weibull" and group["weibull_scale_s"] is not None:
            return WeibullLifetime(
                scale_s=group["weibull_scale_s"],
                shape=group["weibull_shape"],
                cap_s=self.cap_s,
                source=f"{detail}, weibull shape {group['weibull_shape']:.2f} "
                f"scale {group['weibull_scale_s'] / 3600:.1f} h",
                revocations=int(events),
            )
        return EmpiricalLifetime(
            times_s=tuple(group["km_times_s"]),
            survival_after=tuple(group["km_survival"]),
            cap_s=self.cap_s,
            source=f"{detail}, kaplan-meier",
            revocations=int(events),
        )

    def distribution(
        self, gpu: str, region: str | None, *, fallback: LifetimeDistribution | None = None
    ) -> LifetimeDistribution:
        """The lifetime distribution used for ``gpu`` in ``region``, with its ``source``.

        Order: the region's own fit when it saw >= ``min_events`` revocations; else the GPU's
        pooled fit over all regions when it saw a revocation (or no ``fallback`` is given: a
        log without revocations fits none); else ``fallback`` (e.g. a hazard band); else an
        error (the GPU is not in the data).
        ``region=None`` asks for the pooled fit itself (no region in the scope).
        """
        self._require_fitted()
        assert self._groups is not None
        pooled = self._groups.get(self._key(gpu, _POOLED))
        if region is None:
            if pooled is not None:
                return self._build(pooled, f"fitted: {_group_label(gpu, 'all regions')}", "")
            region = _POOLED
        region = zone_to_region(region)
        own = self._groups.get(self._key(gpu, region))
        if own is not None and own["events"] >= self.min_events:
            return self._build(own, f"fitted: {_group_label(gpu, region)}", "")
        if pooled is not None and (pooled["events"] >= 1 or fallback is None):
            # (no fallback: the data is all there is, even with no revocation in it)
            why = (
                f"; {region} alone has {own['events']} of n={own['n']}, < {self.min_events}"
                if own is not None
                else f"; no lifetimes in {region}"
            )
            return self._build(pooled, f"pooled: {_group_label(gpu, 'all regions')}", why)
        if fallback is not None:
            return fallback
        raise InvalidSpecError(
            "revocation data",
            f"no fitted lifetimes for {gpu} (fitted: {', '.join(self.gpus())})",
            fix="give a hazard (--hazard-per-hour) or a band (--interruption-band 5-10%)",
        )

    def source(self, gpu: str, region: str) -> str:
        return self.distribution(gpu, region).source

    def survival(self, t_s: npt.ArrayLike, gpu: str, region: str) -> FloatArray:
        """P(a server of ``gpu`` in ``region`` is still alive ``t_s`` seconds after creation)."""
        return self.distribution(gpu, region).survival(t_s)

    def sample_lifetimes(
        self, rng: np.random.Generator, n: int, gpu: str, region: str
    ) -> FloatArray:
        """``n`` lifetimes in seconds (inverse-CDF; the 24 h cap ends the rest)."""
        return self.distribution(gpu, region).sample(rng, n)

    def km_table(self, gpu: str, region: str | None = None) -> tuple[FloatArray, FloatArray]:
        """Kaplan–Meier (event times in s, survival just after each) of one group."""
        group = self.group_stats(gpu, region)
        return (
            np.asarray(group["km_times_s"], dtype=np.float64),
            np.asarray(group["km_survival"], dtype=np.float64),
        )

    # -- persistence ------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        assert self._groups is not None
        return {
            "method": self.method,
            "min_events": self.min_events,
            "cap_s": self.cap_s,
            "groups": {k: dict(v) for k, v in self._groups.items()},
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                method=state["method"], min_events=int(state["min_events"]), cap_s=state["cap_s"]
            )
            groups = {str(k): dict(v) for k, v in state["groups"].items()}
        except (KeyError, TypeError, AttributeError) as exc:
            raise DataFormatError("revocation model", f"bad state: {exc}", fix="refit it") from None
        model._groups = groups
        return model


# -- restart penalty (CM-DARE chief rejoining) ----------------------------------------------


def restart_penalties_s(
    runs: Sequence[EvalSeries], *, checkpoint_every_steps: int = 4000
) -> dict[str, float]:
    """Per run where the chief left: seconds lost beyond redoing the steps since the checkpoint.

    For the eval interval containing the chief's departure at step N:
    ``penalty = interval - median(the run's other intervals) - (N - last checkpoint) * t_step``
    with ``t_step`` the run's fastest seconds per step (its undisturbed speed), floored at 0.
    """
    out: dict[str, float] = {}
    for run in runs:
        n = run.chief_left_at_step
        if n is None:
            continue
        steps = np.asarray(run.steps, dtype=np.float64)
        wall = np.asarray(run.wall_s, dtype=np.float64)
        if steps.size < 3:
            continue
        dt = np.diff(wall)
        ds = np.diff(steps)
        ok = ds > 0
        hit = np.flatnonzero((steps[:-1] < n) & (steps[1:] >= n))
        if hit.size == 0 or not ok.all():
            continue
        i = int(hit[0])
        others = np.delete(dt, i)
        t_step = float(np.min(np.delete(dt / ds, i)))
        lost_steps = n - (n // checkpoint_every_steps) * checkpoint_every_steps
        out[run.name] = max(0.0, float(dt[i] - np.median(others) - lost_steps * t_step))
    return out


def estimate_restart_penalty(
    runs: Sequence[EvalSeries], *, checkpoint_every_steps: int = 4000
) -> Estimate:
    """The restart penalty (s): median over runs, with their min..max as the interval."""
    per_run = restart_penalties_s(runs, checkpoint_every_steps=checkpoint_every_steps)
    if not per_run:
        raise InvalidSpecError(
            "chief rejoining runs",
            "need at least one run with a known chief departure step",
            fix="pass files named exp-<step>[-k].csv",
        )
    values = np.array(list(per_run.values()))
    return Estimate(
        value=float(np.median(values)),
        lower=float(values.min()),
        upper=float(values.max()),
        unit="s",
        bottleneck="restart",
        source=f"fitted: cmdare chief_rejoining (n={values.size})",
        breakdown={name: v for name, v in sorted(per_run.items())},
        notes=(
            "eval times are quantised to ~60 s, so single runs are +-60 s",
            "excludes redoing the steps since the last checkpoint (the simulator adds those)",
        ),
    )
