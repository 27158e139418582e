"""``gpucast.fit_lifetimes``: your own preemption data -> a named spot-lifetime model.

Three inputs, in the formats people have (parsed by :mod:`gpucast.store.datasets.preemption`):

* **instance lifetimes** (CSV ``start,end[,reason,region,gpu,provider]``): Weibull (or
  Kaplan-Meier) per GPU and region, censoring respected (``RevocationModel``), or a piecewise
  hazard by node age;
* **node-count traces** (SkyPilot's spot-traces JSON ``{"metadata": {"gap_seconds": g},
  "data": [...]}``): a two-state calm/storm Markov-modulated hazard (bursty, correlated
  revocations; a constant hazard when the data does not support two states) and the
  capacity gaps (how long until a replacement could start) seen in the trace;
* **a hazard** (a number of revocations per node-hour, or a ``start_h,hazard_per_hour`` CSV).

The model is stored in the measurement store under ``name`` with its scope (provider, GPU,
region: the nodes it applies to); ``plan train --lifetimes NAME`` and ``simulate train
--lifetimes NAME`` use it for those nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import documented, option
from gpucast.domain.units import count_of

FORMATS: tuple[str, ...] = ("auto", "lifetimes", "node-counts", "hazard")
MODELS: tuple[str, ...] = ("auto", "weibull", "km", "mmpp", "constant", "piecewise")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitLifetimesRequest:
    """Preemption data to fit a named lifetime model on (``gpucast fit lifetimes``)."""

    VERB: ClassVar[str] = "fit lifetimes"

    trace: str = option(
        help="Instance-lifetimes CSV, SkyPilot node-count JSON, a hazard CSV, or a number "
        "(revocations per node-hour).",
        example="aws-v100.json",
    )
    name: str = option(help="Name to store the model under (for --lifetimes NAME).",
                       example="aws-v100")  # fmt: skip
    format: str = option(
        "auto",
        help=f"{' | '.join(FORMATS)} (auto: .json node counts, a number or start_h column a "
        "hazard, else instance lifetimes).",
        example="node-counts",
    )
    model: str = option(
        "auto",
        help=f"{' | '.join(MODELS)} (auto: mmpp for node counts, weibull for lifetimes).",
        example="mmpp",
    )
    provider: str | None = option(None, help="Scope: the provider the data is from.",
                                  example="aws")  # fmt: skip
    gpu: str | None = option(None, help="Scope: the GPU type the data is for.", example="V100")
    region: str | None = option(None, help="Scope: the region the data is for.",
                                example="us-east-1")  # fmt: skip
    values: str = option(
        "running",
        help="Node-count traces: running (each value counts running instances) or preempted.",
        example="preempted",
    )
    nodes: int | None = option(
        None, help="Node-count traces with values=preempted: nodes asked for.", example="16"
    )
    save: bool = option(True, negative="no-save", help="Store the model (--no-save: only fit).")

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise InvalidSpecError("name", "must not be empty", fix="e.g. --name aws-v100")
        for value, choices, flag in (
            (self.format, FORMATS, "format"),
            (self.model, MODELS, "model"),
            (self.values, ("running", "preempted"), "values"),
        ):
            if value not in choices:
                raise InvalidSpecError(  # the fix names the flag's default, a valid choice
                    flag,
                    f"must be one of {', '.join(choices)}",
                    got=value,
                    fix=f"e.g. --{flag} {choices[0]}",
                )
        if self.provider is not None and self.provider not in ("aws", "gcp", "azure"):
            raise InvalidSpecError(
                "provider",
                "must be aws, gcp or azure",
                got=self.provider,
                fix="e.g. --provider aws",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitLifetimesResult:
    """What was fitted, on what, and the figures a user checks it by."""

    name: str
    model_kind: str
    source: str
    scope: dict[str, str | None]
    revocations_per_node_day: float | None
    median_lifetime_h: float | None
    capacity_gap_median_h: float | None
    parameters: dict[str, Any]
    saved_in: str | None
    #: what the fit cannot vouch for (too few revocations in the data)
    warnings: tuple[str, ...] = ()
    #: what was done with the data on the way (rows sorted by start)
    notes: tuple[str, ...] = ()
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model_kind,
            "source": self.source,
            "scope": dict(self.scope),
            "revocations_per_node_day": self.revocations_per_node_day,
            "median_lifetime_h": self.median_lifetime_h,
            "capacity_gap_median_h": self.capacity_gap_median_h,
            "parameters": dict(self.parameters),
            "saved_in": self.saved_in,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


def _format_of(request: FitLifetimesRequest) -> str:
    if request.format != "auto":
        return request.format
    text = request.trace.strip()
    try:
        float(text)
    except ValueError:
        pass
    else:
        return "hazard"
    path = Path(text)
    if path.suffix.lower() == ".json":
        return "node-counts"
    if path.is_file():
        head = path.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff")[:200]
        if head.split("\n", 1)[0].replace(" ", "").lower().startswith("start_h"):
            return "hazard"
    return "lifetimes"


def fit_lifetimes(
    request: FitLifetimesRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> FitLifetimesResult:
    """Fit a spot-lifetime model on your own preemption data and store it under a name."""
    from gpucast.catalog import load_catalog
    from gpucast.inputs.spot import LIFETIMES_KIND
    from gpucast.store.db import Store, default_db_path, new_store

    request = resolve(FitLifetimesRequest, request, options)
    if request.gpu is not None:
        load_catalog().gpu(request.gpu)  # an unknown GPU fails with close matches, up front
    if request.region is not None:  # and a region no offer is in (of the provider): the
        # model would cover no node (QA 37 T #13: --provider aws --region us-east1 was stored)
        load_catalog().find_offers(provider=request.provider, region=request.region)
    fmt = _format_of(request)
    notes: list[str] = []
    model, dist, gaps, params = _fit(request, fmt, notes)
    scope = {"provider": request.provider, "gpu": request.gpu, "region": request.region}
    median_h = _median_h(dist)
    per_day = _per_node_day(dist)
    gap_h = None if gaps is None else float(gaps.median_s()) / 3600.0
    saved = created = None
    if request.save:
        path = Path(db) if db is not None else default_db_path()
        meta: dict[str, Any] = {
            **scope,
            "source": f"{fmt} {request.trace}: {dist.source}",
            "format": fmt,
            "capacity_gaps": None if gaps is None else gaps.to_dict(),
        }
        with Store(path).open() as store:
            if any(n == request.name.strip() for n, _ in store.named_models(LIFETIMES_KIND)):
                notes.append(  # QA 37 T #16: the earlier fit was replaced without a word
                    f"replaced the lifetimes model stored as {request.name.strip()!r} (its "
                    "earlier fit is gone; --name another keeps both)"
                )
            store.save_named_model(LIFETIMES_KIND, request.name, model.to_dict(), meta)
        saved, created = str(path), new_store(store)
    return FitLifetimesResult(
        name=request.name.strip(),
        model_kind=str(model.kind),
        source=str(dist.source),
        scope=scope,
        revocations_per_node_day=per_day,
        median_lifetime_h=median_h,
        capacity_gap_median_h=gap_h,
        parameters=params,
        saved_in=saved,
        warnings=_fit_warnings(params),
        notes=tuple(notes),
        new_store=created,
    )


#: Revocations below which a fitted lifetime model rests on too little data to trust.
MIN_REVOCATIONS = 10


def _fit_warnings(params: dict[str, Any]) -> tuple[str, ...]:
    seen = params.get("revocations")
    if isinstance(seen, int) and seen < MIN_REVOCATIONS:
        return (
            f"the data holds {count_of(seen, 'revocation')}; a lifetime model needs at least "
            f"{MIN_REVOCATIONS} to say more than its shape assumes: treat it as a rough guess",
        )
    return ()


def _per_node_day(dist: Any) -> float | None:
    """Revocations per node per 24 h: the stationary mean hazard of a bursty model, else the
    cumulative hazard of a fresh node's first 24 h (-ln S(24 h)). Where every node is revoked
    well within 24 h (S(24 h) ~ 0, an unbounded cumulative hazard) it is the count of a node
    replaced at each revocation: 24 h / the mean lifetime."""
    import numpy as np

    hazard = getattr(dist, "mean_hazard_per_hour", None)
    if hazard is not None:
        return float(hazard) * 24.0
    day = 24 * 3600.0
    survival = float(dist.survival([day])[0])
    if survival > 1e-9:
        return max(0.0, -math.log(survival))  # a zero hazard: 0, not -0.00
    t = np.linspace(0.0, day, 20_001)
    mean_s = float(np.trapezoid(np.asarray(dist.survival(t), dtype=np.float64), t))
    return day / mean_s if mean_s > 0 else None


def _median_h(dist: Any) -> float | None:
    import numpy as np

    median = getattr(dist, "median_s", None)
    if callable(median):
        return float(median()) / 3600.0
    t = np.geomspace(1.0, 3650 * 86400.0, 4000)
    surv = np.asarray(dist.survival(t))
    below = np.flatnonzero(surv <= 0.5)
    return None if below.size == 0 else float(t[below[0]]) / 3600.0


def _fit(
    request: FitLifetimesRequest, fmt: str, notes: list[str]
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(estimator to store, the lifetime distribution, capacity gaps or None, parameters);
    what was done with the data on the way is appended to ``notes``."""
    from gpucast.predict import bursty

    if fmt == "hazard":
        from gpucast.store.datasets.preemption import read_hazard_spec

        try:
            spec = read_hazard_spec(request.trace)
        except InvalidSpecError as exc:  # the rate is what --trace gave: named as typed
            if exc.field != "hazard_per_hour":
                raise
            fix = (exc.fix or "").replace("e.g. 0.05", "e.g. --trace 0.05")
            raise InvalidSpecError("trace", exc.detail, fix=fix or None) from None
        model = bursty.PiecewiseHazardModel.from_dict(
            {
                "kind": bursty.PiecewiseHazardModel.kind,
                "schema_version": bursty.PiecewiseHazardModel.schema_version,
                "state": {
                    "breaks_h": list(spec.start_h),
                    "cap_s": None,
                    "hazard_per_hour": list(spec.hazard_per_hour),
                    "source": spec.source,
                },
            }
        )
        params = {"start_h": list(spec.start_h), "hazard_per_hour": list(spec.hazard_per_hour)}
        return model, model.distribution(), None, params
    path = Path(request.trace)
    if not path.is_file():
        raise InvalidSpecError(
            "trace",
            "file not found" if not path.exists() else "is not a file",
            got=str(path),
            fix="give an instance-lifetimes CSV, a SkyPilot node-count JSON or a hazard",
        )
    if fmt == "node-counts":
        return _fit_node_counts(request, path)
    return _fit_instance_lifetimes(request, path, notes)


def _fit_node_counts(
    request: FitLifetimesRequest, path: Path
) -> tuple[Any, Any, Any, dict[str, Any]]:
    from gpucast.predict import bursty
    from gpucast.store.datasets.preemption import read_spot_trace

    trace = read_spot_trace(path, values=request.values, nodes=request.nodes)
    if request.model not in ("auto", "mmpp", "constant", "piecewise"):
        raise InvalidSpecError(
            "model",
            f"{request.model} needs instance lifetimes, not node counts",
            fix="--model mmpp, constant or piecewise for a node-count trace",
        )
    gaps = None
    if trace.capacity_gaps_s.size:
        gaps = bursty.CapacityGaps().fit(trace.capacity_gaps_s, trace.capacity_gap_observed)
    if request.model == "piecewise":
        model: Any = bursty.PiecewiseHazardModel().fit(trace.lifetimes_s, trace.lifetime_observed)
        dist = model.distribution()
        return model, dist, gaps, {"hazard_per_hour": list(model.spec().hazard_per_hour)}
    if request.model == "constant":  # one bin from age 0: events / node-hours
        model = bursty.PiecewiseHazardModel(breaks_h=(0.0,)).fit(
            trace.lifetimes_s, trace.lifetime_observed
        )
        rate = model.spec().hazard_per_hour[0]
        return model, model.distribution(), gaps, {"hazard_per_hour": rate}
    model = bursty.MMPPModel().fit(trace.counts, trace.gap_s)
    dist = model.distribution()
    params = {
        "hazard_calm_per_hour": dist.hazard_calm_per_hour,
        "hazard_storm_per_hour": dist.hazard_storm_per_hour,
        "calm_mean_h": dist.calm_mean_h,
        "storm_mean_h": dist.storm_mean_h,
        # True where two states explain the trace no better (BIC): a constant hazard is stored
        "one_state": bool(model.result.constant),
        "revocations": int(trace.revocations.sum()),
        "exposure_node_h": float(trace.exposure_node_h),
    }
    return model, dist, gaps, params


def _fit_instance_lifetimes(
    request: FitLifetimesRequest, path: Path, notes: list[str]
) -> tuple[Any, Any, Any, dict[str, Any]]:
    import numpy as np

    from gpucast.predict import bursty
    from gpucast.store.datasets.preemption import read_instance_lifetimes

    lifetimes = read_instance_lifetimes(path)
    records = lifetimes.records
    notes.extend(n for n in (lifetimes.order_note(), lifetimes.zero_length_note()) if n)
    if request.model in ("mmpp", "constant"):
        raise InvalidSpecError(
            "model",
            f"{request.model} needs a node-count trace (SkyPilot JSON)",
            fix="--model weibull, km or piecewise for instance lifetimes",
        )
    durations = np.array([r.duration_s for r in records])
    observed = np.array([r.observed for r in records])
    params = {"lifetimes": len(records), "revocations": int(observed.sum())}
    if request.model == "piecewise":
        model: Any = bursty.PiecewiseHazardModel().fit(durations, observed)
        return model, model.distribution(), None, params
    from gpucast.inputs.spot import lifetime_distribution

    method = "km" if request.model == "km" else "weibull"
    model = bursty.fit_lifetimes(records, method=method)
    dist = lifetime_distribution(model, {"gpu": request.gpu, "region": request.region})
    return model, dist, None, params
