"""Results of a serving simulation: the per-request arrays and the summaries computed from them
(:class:`ServingResult`, :class:`ServerStats`, :func:`latency_summary`), and the result built
from either engine's record (:func:`_result`).

Private part of :mod:`gpucast.simulate.serving`, which re-exports its public names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from gpucast.domain.serving import Deployment
from gpucast.domain.units import usd_per_million
from gpucast.simulate.serving_events import DROP_REASONS, RunRecord

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Percentiles every summary reports.
PERCENTILES = (50.0, 95.0, 99.0)

_A = TypeVar("_A", bound=npt.NDArray[Any])


def _frozen(values: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    """A read-only array of ``values``: copied, unless it already is a read-only array of
    ``dtype`` that owns its memory (what the engines hand over: a 10 M-request result is not
    held twice)."""
    if (
        isinstance(values, np.ndarray)
        and values.dtype == dtype
        and values.base is None
        and not values.flags.writeable
    ):
        return values
    arr: npt.NDArray[np.generic] = np.array(values, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


def _handed_over(arr: _A) -> _A:
    """``arr`` (owned by its creator, never shared) made read-only, so :func:`_frozen`
    keeps it without a copy."""
    if arr.base is not None:
        arr = arr.copy()
    arr.setflags(write=False)
    return arr


def latency_summary(latency_s: FloatArray) -> dict[str, float]:
    """p50 / p95 / p99 / mean / max of a latency sample (NaN when empty)."""
    if latency_s.size == 0:
        nan = math.nan
        return {"p50": nan, "p95": nan, "p99": nan, "mean": nan, "max": nan}
    p = np.percentile(latency_s, PERCENTILES)
    return {
        "p50": float(p[0]),
        "p95": float(p[1]),
        "p99": float(p[2]),
        "mean": float(latency_s.mean()),
        "max": float(latency_s.max()),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStats:
    """One simulated device: what it hosted and how busy it was over ``[0, horizon]``.

    ``stages``: utilisation of each host-path stage it has (``network``, ``host``, ``pcie``):
    the link's and copy engine's busy fraction, the shared host's requests carried over its
    capacity; ``host_utilisation`` is ``stages["host"]`` (None without a host capacity).
    """

    name: str
    group: int
    replica: int
    kind: str
    price_usd_per_hour: float
    requests: int
    batches: int
    busy_fraction: float  # share of the horizon with >= 1 batch running
    instance_utilisation: float  # busy instance-seconds / (instances x horizon)
    mean_batch_size: float | None  # None: no batch ran
    host_utilisation: float | None = None
    stages: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", MappingProxyType(dict(self.stages)))

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "group": self.group,
            "replica": self.replica,
            "kind": self.kind,
            "price_usd_per_hour": self.price_usd_per_hour,
            "requests": self.requests,
            "batches": self.batches,
            "busy_fraction": self.busy_fraction,
            "instance_utilisation": self.instance_utilisation,
            "mean_batch_size": self.mean_batch_size,
            "host_utilisation": self.host_utilisation,
            # each host-path stage's share of the run busy (QA 40 V #9: was "stages", unsuffixed)
            "stage_busy_fractions": dict(self.stages),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingResult:
    """Per-request arrays of one simulation, and the summaries computed from them.

    ``model_index[i]`` indexes ``models``; open-loop arrays are in arrival order per model,
    models concatenated (closed loop: in send order). ``latency_s`` is NaN and
    ``batch_size`` 0 for a dropped request (``drop_reason`` > 0, see :data:`DROP_REASONS`).
    The window is ``[warmup_s, horizon_s]`` (module docstring).
    """

    models: tuple[str, ...]
    arrival_s: FloatArray
    latency_s: FloatArray
    model_index: IntArray
    batch_size: IntArray  # size of the batch each request ran in
    servers: tuple[ServerStats, ...]
    price_usd_per_hour: float
    horizon_s: float
    drop_reason: IntArray | None = None
    slo_s: float | None = None
    warmup_s: float = 0.0
    seed: int | None = None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "arrival_s", _frozen(self.arrival_s, np.float64))
        object.__setattr__(self, "latency_s", _frozen(self.latency_s, np.float64))
        object.__setattr__(self, "model_index", _frozen(self.model_index, np.int64))
        object.__setattr__(self, "batch_size", _frozen(self.batch_size, np.int64))
        reasons = (
            np.zeros(self.arrival_s.size, dtype=np.int64)
            if self.drop_reason is None
            else self.drop_reason
        )
        object.__setattr__(self, "drop_reason", _frozen(reasons, np.int64))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    @property
    def dropped(self) -> npt.NDArray[np.bool_]:
        """Which requests were rejected."""
        assert self.drop_reason is not None
        return np.asarray(self.drop_reason > 0)

    @property
    def window_s(self) -> float:
        return self.horizon_s - self.warmup_s

    def _model(self, model: str | None) -> npt.NDArray[np.bool_]:
        if model is None:
            return np.ones(self.arrival_s.size, dtype=bool)
        return np.asarray(self.model_index == self.models.index(model))

    def _window(self, model: str | None = None) -> npt.NDArray[np.bool_]:
        """Requests arriving in the window (of ``model``)."""
        keep = (self.arrival_s >= self.warmup_s) & (self.arrival_s <= self.horizon_s)
        return keep & self._model(model)

    def latencies(self, model: str | None = None) -> FloatArray:
        """Latencies of the window's requests that ran (dropped ones left out)."""
        return np.asarray(self.latency_s[self._window(model) & ~self.dropped])

    def counts(self, model: str | None = None) -> dict[str, int]:
        """The window's requests: ``requests`` = ``served`` (completed by the horizon) +
        ``dropped`` + ``in_flight`` (still queued or running at the horizon); ``dropped``
        split by reason."""
        win = self._window(model)
        dropped = win & self.dropped
        done = self.arrival_s + np.where(self.dropped, math.inf, self.latency_s)
        served = win & ~self.dropped & (done <= self.horizon_s)
        out = {
            "requests": int(win.sum()),
            "served": int(served.sum()),
            "dropped": int(dropped.sum()),
            "in_flight": int((win & ~self.dropped & (done > self.horizon_s)).sum()),
        }
        assert self.drop_reason is not None
        for code, reason in enumerate(DROP_REASONS):
            if code:
                out[reason] = int((dropped & (self.drop_reason == code)).sum())
        return out

    def offered_rps(self, model: str | None = None) -> float:
        """Arrivals in the window over its length."""
        w = self.window_s
        return float(self._window(model).sum()) / w if w > 0 else math.nan

    def throughput_rps(self, model: str | None = None) -> float:
        """Completions in the window over its length (what the server carried)."""
        w = self.window_s
        if not w > 0:
            return math.nan
        done = self.arrival_s + self.latency_s  # NaN where dropped: never counted
        inside = (done >= self.warmup_s) & (done <= self.horizon_s) & self._model(model)
        return float(inside.sum()) / w

    def slo_attainment(self, model: str | None = None) -> float | None:
        """Share of the window's requests answered within the SLO (dropped ones miss it)."""
        if self.slo_s is None:
            return None
        win = self._window(model)
        if not win.any():
            return math.nan
        lat = np.where(self.dropped, math.inf, self.latency_s)[win]
        return float(np.mean(lat <= self.slo_s))

    @property
    def cost_usd_per_million(self) -> float:
        """US$ per million requests served (completed in the window)."""
        return usd_per_million(self.price_usd_per_hour, self.throughput_rps())

    def timeline(self, bins: int = 60) -> dict[str, list[float]]:
        """Per arrival-time bin: request rate, p50 and p99 latency of the requests that ran,
        and the requests dropped (for plots)."""
        if self.requests == 0:
            return {"t_s": [], "rps": [], "p50_s": [], "p99_s": [], "dropped": []}
        t_end = max(float(self.arrival_s.max()), self.horizon_s)
        edges = np.linspace(0.0, t_end if t_end > 0 else 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, self.arrival_s, side="right") - 1, 0, bins - 1)
        order = np.argsort(which, kind="stable")
        counts = np.bincount(which, minlength=bins)
        lat = self.latency_s[order]
        splits = np.split(lat, np.cumsum(counts)[:-1])
        dropped = np.bincount(which[self.dropped], minlength=bins)
        width = edges[1] - edges[0]

        def pct(s: FloatArray, q: float) -> float:
            ran = s[np.isfinite(s)]
            return float(np.percentile(ran, q)) if ran.size else math.nan

        return {
            "t_s": [float(x) for x in edges[:-1]],
            "rps": [float(c / width) for c in counts],
            "p50_s": [pct(s, 50) for s in splits],
            "p99_s": [pct(s, 99) for s in splits],
            "dropped": [int(c) for c in dropped],
        }

    def to_dict(self, *, timeline_bins: int = 0) -> dict[str, object]:
        """The ``--json`` object of ``gpucast simulate serve``."""
        lat = self.latencies()
        per_model = {
            m: {
                **self.counts(m),
                "latency_s": latency_summary(self.latencies(m)),
                "offered_rps": self.offered_rps(m),
                "throughput_rps": self.throughput_rps(m),
                "slo_attainment": self.slo_attainment(m),
            }
            for m in self.models
        }
        ran = self.batch_size[self._window() & ~self.dropped]
        out: dict[str, object] = {
            **self.counts(),
            "latency_s": latency_summary(lat),
            "offered_rps": self.offered_rps(),
            "throughput_rps": self.throughput_rps(),
            "horizon_s": self.horizon_s,
            "warmup_s": self.warmup_s,
            "slo_s": self.slo_s,
            "slo_attainment": self.slo_attainment(),
            "cost_usd_per_hour": self.price_usd_per_hour,
            "cost_usd_per_million": self.cost_usd_per_million,
            # per batch, as each server's: n requests in batches of sizes b_i make sum(1/b_i)
            # batches (the mean over requests, which counts big batches more, reads higher)
            "mean_batch_size": float(ran.size / np.sum(1.0 / ran)) if ran.size else None,
            "models": per_model,
            "servers": [s.to_dict() for s in self.servers],
            "seed": self.seed,
            "sources": dict(self.sources),
        }
        if timeline_bins:
            out["timeline"] = self.timeline(timeline_bins)
        return out


def _union_length(starts: FloatArray, ends: FloatArray) -> float:
    """Total length of the union of intervals [start, end)."""
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    gap_start = np.concatenate([[s[0]], np.maximum(s[1:], reach[:-1])])
    return float(np.sum(np.maximum(reach - gap_start, 0.0)))


def _result(
    deployment: Deployment,
    record: RunRecord,
    *,
    horizon_s: float,
    slo_s: float | None,
    warmup_s: float,
    seed: int | None,
    sources: Mapping[str, str] | None,
) -> ServingResult:
    """A :class:`ServingResult` from either engine's record."""
    models = deployment.models
    overhead = {
        dep.model: dep.request_overhead_s for g in deployment.groups for dep in g.server.models
    }
    extra = np.asarray([overhead[m] for m in models], dtype=np.float64)
    latency = record.done_s - record.arrival_s  # in place from here: one array per request
    latency += extra[0] if len(models) == 1 else extra[record.model_index]
    latency[record.drop_reason > 0] = math.nan
    h = horizon_s
    stats = []
    for dev in record.devices:
        server = deployment.groups[dev.group].server
        starts = np.asarray(dev.starts, dtype=np.float64)
        ends = np.asarray(dev.ends, dtype=np.float64)
        inside = starts < h
        s_in, e_in = starts[inside], np.minimum(ends[inside], h)
        n_batches = int(starts.size)
        stats.append(
            ServerStats(
                name=server.name,
                group=dev.group,
                replica=dev.replica,
                kind=server.kind,
                price_usd_per_hour=server.price_usd_per_hour,
                requests=dev.requests,
                batches=n_batches,
                busy_fraction=_union_length(s_in, e_in) / h if h > 0 else 0.0,
                instance_utilisation=(
                    float(np.sum(e_in - s_in)) / (server.instances * h) if h > 0 else 0.0
                ),
                mean_batch_size=dev.ran / n_batches if n_batches else None,
                host_utilisation=dev.stage_utilisation.get("host"),
                stages=dev.stage_utilisation,
            )
        )
    return ServingResult(
        models=models,
        arrival_s=record.arrival_s,  # may be the caller's: copied
        latency_s=_handed_over(latency),  # the engines' own arrays: kept, not copied
        model_index=_handed_over(record.model_index),
        batch_size=_handed_over(record.batch_size),
        drop_reason=_handed_over(record.drop_reason),
        servers=tuple(stats),
        price_usd_per_hour=deployment.price_usd_per_hour,
        horizon_s=horizon_s,
        slo_s=slo_s,
        warmup_s=warmup_s,
        seed=seed,
        sources=sources or {},
    )
