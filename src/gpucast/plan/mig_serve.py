"""PARIS and ELSA: heterogeneous MIG layouts for a mix of models, and SLO-aware dispatch.

Pure: numbers in (the models with rates and SLOs, each model's latency curve on each slice
type of one GPU, the GPU's valid layouts and price), numbers out. No files, clock or terminal.

PARIS (Kim et al., "PARIS and ELSA: an elastic scheduling algorithm for reconfigurable
multi-GPU inference servers", DAC 2022) picks the partition from each model's batch/latency
profile per slice size; here:

1. **Profile** (:func:`slice_fit`): on each slice type (a MIG profile, or the whole GPU) a
   model's largest useful batch is the one with the highest throughput ``b / latency(b)``
   whose worst case under dynamic batching -- it waits for the running batch, then runs in
   the next, ``2 x latency(b)`` plus the round trip -- meets the model's SLO and whose
   memory fits the slice; its capacity there is that throughput times ``max_utilisation``
   (queues stay short below it). A slice type with no such batch cannot serve the model.
2. **Choose** (:func:`choose_layouts`): an integer programme over how many GPUs take each
   valid full layout (``gpucast.predict.mig.enumerate_layouts``) and how many slices of each
   type go to each model: the fewest GPUs (one GPU type, so the least cost) such that every
   model's slices carry its rate; then, with that many GPUs, the assignment that maximises
   the smallest capacity-over-rate of any model (the spare capacity is spread evenly). The
   same programme restricted to one layout gives the homogeneous baselines (``7 x 1g``,
   ``2 x 3g``, ``1 x 7g``...) and the whole GPU (no MIG).
3. **Simulate** (:func:`simulate_choice`): every assigned slice is a server of the event
   engine hosting its model (batches up to its fitted batch, no batching delay, the model's
   SLO as its deadline); requests go to a slice by ELSA (the smallest slice predicted to
   meet the SLO given its queue, else the fastest: ``load_balancing="elsa"`` of
   :mod:`gpucast.simulate.serving_events`), least-loaded, or round robin (FIFO per slice).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.gpu_memory import usable_gib
from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.domain.serving_plan import ModelProfile
from gpucast.domain.units import count_of
from gpucast.simulate.serving import simulate_serving

FloatArray = npt.NDArray[np.float64]

#: the slice type of a whole GPU (MIG off)
WHOLE = "whole"
DISPATCHERS: tuple[str, ...] = ("elsa", "least_loaded", "round_robin")


@dataclass(frozen=True, slots=True, kw_only=True)
class MixModel:
    """One model of the mix: its mean rate and its latency SLO (at the plan's percentile)."""

    name: str
    rate_rps: float
    slo_s: float

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("mix", "a model name is empty", fix="e.g. resnet50:400:50")
        for what, value in (("rate", self.rate_rps), ("SLO", self.slo_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise InvalidSpecError(
                    f"mix {self.name}", f"{what} must be a finite number > 0", got=value,
                    fix="write NAME:RATE:SLO_MS, e.g. resnet50:400:50",
                )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceType:
    """A kind of slice one GPU can be cut into: its name, memory and share of the price."""

    name: str  # a MIG profile name, or WHOLE
    memory_gib: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One way to cut a GPU: its slices (type names, in start order) and each one's price."""

    label: str
    slices: tuple[str, ...]
    prices_usd_per_hour: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceFit:
    """PARIS's profile of one model on one slice type: the batch it runs at and the requests/s
    one slice carries within the SLO (0: the slice cannot meet it)."""

    model: str
    slice: str
    batch: int
    capacity_rps: float
    worst_latency_s: float


def slice_fit(
    profile: ModelProfile,
    slice_type: SliceType,
    slo_s: float,
    *,
    max_batch: int,
    max_utilisation: float,
) -> SliceFit:
    """The batch with the most throughput whose worst case (``2 x latency(b)`` plus the round
    trip) meets ``slo_s`` and whose memory fits the slice's usable memory (the one rule,
    :func:`gpucast.domain.gpu_memory.usable_gib`); capacity 0 when none does."""
    curve = profile.curve
    fixed = profile.request_overhead_s + profile.transfer_s
    best_b, best_rps, best_lat = 0, 0.0, math.inf
    for b in range(1, max_batch + 1):
        lat = curve.latency(b)
        worst = 2.0 * lat + fixed
        if worst > slo_s or profile.memory_gib(b) > usable_gib(slice_type.memory_gib):
            continue
        rps = b / lat
        if rps > best_rps:
            best_b, best_rps, best_lat = b, rps, worst
    return SliceFit(
        model=profile.model,
        slice=slice_type.name,
        batch=best_b,
        capacity_rps=best_rps * max_utilisation,
        worst_latency_s=best_lat,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceAssignment:
    """One slice of one GPU of a choice: which model it serves (None: left idle)."""

    gpu: int
    slice: str
    model: str | None
    batch: int
    capacity_rps: float
    price_usd_per_hour: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutChoice:
    """GPUs, the layout of each, and which model every slice serves.

    ``scale`` is the smallest capacity-over-rate of any model (>= 1: every rate is carried
    within its SLO, by the profile); ``capacity_rps`` the mix's total rate times it (the
    analytic throughput at the SLO, each model keeping its share).
    """

    name: str
    gpus: int
    layouts: tuple[str, ...]
    slices: tuple[SliceAssignment, ...]
    scale: float
    cost_usd_per_hour: float
    capacity_rps: float
    model_capacity_rps: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "model_capacity_rps", MappingProxyType(dict(self.model_capacity_rps))
        )

    @property
    def heterogeneous(self) -> bool:
        """Whether the choice uses slices of more than one size."""
        return len({s.slice for s in self.slices}) > 1

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for lay in self.layouts:
            counts[lay] = counts.get(lay, 0) + 1
        return ", ".join(f"{n}x [{lay}]" for lay, n in counts.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gpus": self.gpus,
            "layouts": list(self.layouts),
            "description": self.describe(),
            "heterogeneous": self.heterogeneous,
            "slices": [
                {
                    "gpu": s.gpu,
                    "slice": s.slice,
                    "model": s.model,
                    "batch": s.batch,
                    "capacity_rps": s.capacity_rps,
                    "price_usd_per_hour": s.price_usd_per_hour,
                }
                for s in self.slices
            ],
            "scale": self.scale,
            "cost_usd_per_hour": self.cost_usd_per_hour,
            "capacity_rps": self.capacity_rps,
            "model_capacity_rps": dict(self.model_capacity_rps),
        }


def _milp(
    models: Sequence[MixModel],
    fits: Mapping[tuple[str, str], SliceFit],
    layouts: Sequence[Layout],
    types: Sequence[str],
    *,
    gpus: int | None,
    max_gpus: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], float] | None:
    """(GPUs per layout, slices per model x type, scale) -- fewest GPUs carrying every rate
    (``gpus`` None), then the max-min scale at that many; None when infeasible."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n_l, n_m, n_t = len(layouts), len(models), len(types)
    count = np.array([[lay.slices.count(t) for t in types] for lay in layouts], dtype=float)
    cap = np.array([[fits[(m.name, t)].capacity_rps for t in types] for m in models], dtype=float)
    rate = np.array([m.rate_rps for m in models])
    n_x = n_m * n_t
    n = n_l + n_x + 1  # y (GPUs per layout), x (slices per model and type), z (scale)
    # slices of a type given out <= slices of that type the layouts hold
    a_slices = np.zeros((n_t, n))
    for t in range(n_t):
        a_slices[t, :n_l] = -count[:, t]
        a_slices[t, n_l + t : n_l + n_x : n_t] = 1.0
    # each model's capacity >= z * its rate
    a_cap = np.zeros((n_m, n))
    for m in range(n_m):
        a_cap[m, n_l + m * n_t : n_l + (m + 1) * n_t] = cap[m]
        a_cap[m, -1] = -rate[m]
    a_gpus = np.zeros((1, n))
    a_gpus[0, :n_l] = 1.0
    integrality = np.ones(n)
    integrality[-1] = 0
    x_upper = np.where(cap.reshape(-1) > 0, max_gpus * 7.0, 0.0)
    upper = np.concatenate([np.full(n_l, float(max_gpus)), x_upper, [np.inf]])
    bounds = Bounds(np.zeros(n), upper)
    slices_c = LinearConstraint(a_slices, -np.inf, 0.0)
    if gpus is None:  # stage 1: fewest GPUs with z >= 1
        c = np.zeros(n)
        c[:n_l] = 1.0
        res = milp(
            c,
            constraints=[
                slices_c,
                LinearConstraint(a_cap, 0.0, np.inf),
                LinearConstraint(a_gpus, 0.0, max_gpus),
            ],
            integrality=integrality,
            bounds=Bounds(np.concatenate([np.zeros(n - 1), [1.0]]), upper),
        )
        if res.status != 0 or res.x is None:
            return None
        gpus = round(float(res.x[:n_l].sum()))
    c = np.zeros(n)
    c[-1] = -1.0
    res = milp(
        c,
        constraints=[
            slices_c,
            LinearConstraint(a_cap, 0.0, np.inf),
            LinearConstraint(a_gpus, gpus, gpus),
        ],
        integrality=integrality,
        bounds=bounds,
    )
    if res.status != 0 or res.x is None:
        return None
    y = np.rint(res.x[:n_l]).astype(np.int64)
    x = np.rint(res.x[n_l : n_l + n_x]).astype(np.int64).reshape(n_m, n_t)
    z = float(((x * cap).sum(axis=1) / rate).min())
    return y, x, z


def choose_layouts(
    name: str,
    models: Sequence[MixModel],
    fits: Mapping[tuple[str, str], SliceFit],
    layouts: Sequence[Layout],
    *,
    gpu_price_usd_per_hour: float,
    gpus: int | None = None,
    max_gpus: int = 64,
) -> LayoutChoice | None:
    """The fewest GPUs cut into ``layouts`` (each GPU any one of them) whose slices carry
    every model's rate within its SLO, and which model each slice serves (see the module
    docstring); with ``gpus`` given, the best assignment on exactly that many (its ``scale``
    may then be below 1). None when no such choice exists within ``max_gpus``."""
    if not layouts:
        raise InvalidSpecError("layouts", "none to choose from")
    types = sorted({t for lay in layouts for t in lay.slices})
    solved = _milp(models, fits, layouts, types, gpus=gpus, max_gpus=max_gpus)
    if solved is None:
        return None
    y, x, z = solved
    chosen: list[Layout] = [
        lay for lay, k in zip(layouts, y.tolist(), strict=True) for _ in range(k)
    ]
    chosen.sort(key=lambda lay: lay.label)
    left = {(m.name, t): int(x[i, j]) for i, m in enumerate(models) for j, t in enumerate(types)}
    slices: list[SliceAssignment] = []
    for g, lay in enumerate(chosen):
        for t, price in zip(lay.slices, lay.prices_usd_per_hour, strict=True):
            owner = next((m.name for m in models if left[(m.name, t)] > 0), None)
            fit = None if owner is None else fits[(owner, t)]
            if owner is not None:
                left[(owner, t)] -= 1
            slices.append(
                SliceAssignment(
                    gpu=g,
                    slice=t,
                    model=owner,
                    batch=0 if fit is None else fit.batch,
                    capacity_rps=0.0 if fit is None else fit.capacity_rps,
                    price_usd_per_hour=price,
                )
            )
    per_model = {
        m.name: float(sum(s.capacity_rps for s in slices if s.model == m.name)) for m in models
    }
    total = sum(m.rate_rps for m in models)
    return LayoutChoice(
        name=name,
        gpus=len(chosen),
        layouts=tuple(lay.label for lay in chosen),
        slices=tuple(slices),
        scale=z,
        cost_usd_per_hour=len(chosen) * gpu_price_usd_per_hour,
        capacity_rps=total * z,
        model_capacity_rps=per_model,
    )


# -- simulation -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class MixOutcome:
    """One choice served under one dispatcher: SLO attainment (share of requests within their
    model's SLO), p99 latency, goodput (requests/s within SLO) per model and overall."""

    choice: str
    dispatch: str
    gpus: int
    cost_usd_per_hour: float
    offered_rps: float
    attainment: float
    goodput_rps: float
    p99_latency_s: Mapping[str, float]
    model_attainment: Mapping[str, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "p99_latency_s", MappingProxyType(dict(self.p99_latency_s)))
        object.__setattr__(self, "model_attainment", MappingProxyType(dict(self.model_attainment)))

    @property
    def worst_p99_over_slo(self) -> float:
        return max(self.p99_latency_s.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "choice": self.choice,
            "dispatch": self.dispatch,
            "gpus": self.gpus,
            "cost_usd_per_hour": self.cost_usd_per_hour,
            "offered_rps": self.offered_rps,
            "attainment": self.attainment,
            "goodput_rps": self.goodput_rps,
            "p99_latency_s": dict(self.p99_latency_s),
            "model_attainment": dict(self.model_attainment),
        }


def choice_deployment(
    choice: LayoutChoice,
    models: Sequence[MixModel],
    profiles: Mapping[tuple[str, str], ModelProfile],
    slice_types: Mapping[str, SliceType],
    dispatch: str,
) -> Deployment:
    """The event engine's deployment of ``choice``: every assigned slice one server hosting
    its model (largest batch its fitted one, no batching delay, the SLO as deadline)."""
    if dispatch not in DISPATCHERS:
        raise InvalidSpecError("dispatch", f"must be one of {', '.join(DISPATCHERS)}", got=dispatch)
    slo = {m.name: m.slo_s for m in models}
    groups: list[ServerGroup] = []
    for s in choice.slices:
        if s.model is None:
            continue
        prof = profiles[(s.model, s.slice)]
        dep = ModelDeployment(
            model=s.model,
            latency=prof.curve,
            batching=BatchingPolicy(max_batch_size=s.batch, max_queue_delay_s=0.0),
            memory_gib=prof.memory_gib(s.batch),
            request_overhead_s=prof.request_overhead_s + prof.transfer_s,
            deadline_s=slo[s.model],
        )
        server = ServerSpec(
            name=f"gpu{s.gpu}/{s.slice}",
            kind="gpu" if s.slice == WHOLE else "mig",
            memory_gib=slice_types[s.slice].memory_gib,
            price_usd_per_hour=s.price_usd_per_hour,
            models=(dep,),
        )
        groups.append(ServerGroup(server=server))
    return Deployment(groups=tuple(groups), load_balancing=dispatch)  # type: ignore[arg-type]


def simulate_choice(
    choice: LayoutChoice,
    models: Sequence[MixModel],
    profiles: Mapping[tuple[str, str], ModelProfile],
    slice_types: Mapping[str, SliceType],
    arrivals: Mapping[str, FloatArray],
    *,
    dispatch: str,
    horizon_s: float,
    seed: int = 0,
) -> MixOutcome:
    """Serve ``arrivals`` (sorted seconds per model) on ``choice`` under ``dispatch``."""
    deployment = choice_deployment(choice, models, profiles, slice_types, dispatch)
    missing = [m.name for m in models if m.name not in deployment.models]
    if missing:
        raise InvalidSpecError(
            "layout choice", f"serves no slice to {', '.join(missing)}",
            fix="give the models slices (choose_layouts does)",
        )  # fmt: skip
    result = simulate_serving(deployment, arrivals, seed=seed, horizon_s=horizon_s)
    within = 0
    total = 0
    p99: dict[str, float] = {}
    att: dict[str, float] = {}
    for m in models:
        lat = result.latencies(m.name)
        ok = int(np.sum(lat <= m.slo_s))
        within += ok
        total += lat.size
        att[m.name] = ok / lat.size if lat.size else math.nan
        p99[m.name] = float(np.percentile(lat, 99)) if lat.size else math.nan
    return MixOutcome(
        choice=choice.name,
        dispatch=dispatch,
        gpus=choice.gpus,
        cost_usd_per_hour=choice.cost_usd_per_hour,
        offered_rps=total / horizon_s,
        attainment=within / total if total else math.nan,
        goodput_rps=within / horizon_s,
        p99_latency_s=p99,
        model_attainment=att,
    )


def check_servable(
    models: Sequence[MixModel],
    fits: Mapping[tuple[str, str], SliceFit],
    profiles: Mapping[tuple[str, str], ModelProfile],
    types: Sequence[str],
    *,
    gpu: str,
) -> None:
    """One :class:`NoFeasiblePlanError` for the first model no slice type (nor the whole GPU)
    can serve within its SLO, naming the least worst case it has."""
    for m in models:
        if any(fits[(m.name, t)].capacity_rps > 0 for t in types):
            continue
        floor = min(
            2.0 * profiles[(m.name, t)].curve.latency(1)
            + profiles[(m.name, t)].request_overhead_s
            + profiles[(m.name, t)].transfer_s
            for t in types
        )
        raise NoFeasiblePlanError(
            f"mix {m.name}: SLO {m.slo_s * 1e3:g} ms is below its worst case on every {gpu} "
            f"slice and the whole GPU ({floor * 1e3:.3g} ms at best: a batch of one waits for "
            "one more, 2 x latency(1), plus the round trip; or it does not fit in memory)",
            fix=f"raise {m.name}'s SLO above {floor * 1e3:.3g} ms (NAME:RATE:SLO_MS) or pick "
            "a faster --gpu",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MigMixPlan:
    """PARIS's choice and the baselines, each simulated under dispatchers.

    ``choices[0]`` is PARIS's (heterogeneous layouts allowed), then one per homogeneous
    layout that carries the mix, then whole GPUs; ``outcomes`` are (choice, dispatcher)
    runs; ``recommended`` indexes the cheapest outcome whose attainment reaches
    ``target_attainment`` (ties: the most goodput). ``skipped`` says why a baseline has no
    choice (a slice type that cannot meet some model's SLO, or too many GPUs).
    """

    gpu: str
    models: tuple[MixModel, ...]
    target_attainment: float
    fits: tuple[SliceFit, ...]
    choices: tuple[LayoutChoice, ...]
    outcomes: tuple[MixOutcome, ...]
    recommended: int | None
    skipped: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    notes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))

    @property
    def best(self) -> MixOutcome | None:
        return None if self.recommended is None else self.outcomes[self.recommended]

    def choice(self, name: str) -> LayoutChoice:
        return next(c for c in self.choices if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "mig-serve-plan",
            "gpu": self.gpu,
            "models": [
                {"name": m.name, "rate_rps": m.rate_rps, "slo_s": m.slo_s} for m in self.models
            ],
            "target_attainment": self.target_attainment,
            "fits": [
                {
                    "model": f.model,
                    "slice": f.slice,
                    "batch": f.batch,
                    "capacity_rps": f.capacity_rps,
                    "worst_latency_s": f.worst_latency_s if f.batch else None,
                }
                for f in self.fits
            ],
            "choices": [c.to_dict() for c in self.choices],
            "outcomes": [o.to_dict() for o in self.outcomes],
            "recommended": self.recommended,
            "skipped": dict(self.skipped),
            "notes": dict(self.notes),
        }


PARIS = "paris"


def plan_mig_mix(
    models: Sequence[MixModel],
    *,
    gpu: str,
    slice_types: Mapping[str, SliceType],
    layouts: Sequence[Layout],
    baselines: Sequence[Layout],
    profiles: Mapping[tuple[str, str], ModelProfile],
    gpu_price_usd_per_hour: float,
    arrivals: Mapping[str, FloatArray],
    horizon_s: float,
    max_batch: int = 32,
    max_utilisation: float = 0.8,
    target_attainment: float = 0.99,
    max_gpus: int = 64,
    max_extra_gpus: int = 2,
    baseline_dispatch: Sequence[str] = ("round_robin",),
    seed: int = 0,
) -> MigMixPlan:
    """PARIS's layouts for ``models`` on ``gpu`` (``layouts``: every full layout, plus the
    whole GPU as a one-slice layout where wanted), simulated under ELSA, least-loaded and
    round robin; each of ``baselines`` (homogeneous layouts, the whole GPU) planned alone
    and simulated under ``baseline_dispatch``. ``profiles[(model, slice type)]`` are the
    latency curves. When the simulated ELSA attainment of PARIS's choice is below
    ``target_attainment``, up to ``max_extra_gpus`` more GPUs are tried (the profile's rule
    is a bound, not a guarantee under bursts)."""
    if not models:
        raise InvalidSpecError("mix", "no model given", fix="e.g. --mix resnet50:400:50")
    if not 0.0 < max_utilisation <= 1.0:
        raise InvalidSpecError("max_utilisation", "must be in (0, 1]", got=max_utilisation)
    types = sorted(slice_types)
    fits = {
        (m.name, t): slice_fit(
            profiles[(m.name, t)],
            slice_types[t],
            m.slo_s,
            max_batch=max_batch,
            max_utilisation=max_utilisation,
        )
        for m in models
        for t in types
    }
    check_servable(models, fits, profiles, types, gpu=gpu)
    paris = choose_layouts(
        PARIS, models, fits, layouts, gpu_price_usd_per_hour=gpu_price_usd_per_hour,
        max_gpus=max_gpus,
    )  # fmt: skip
    if paris is None:
        raise NoFeasiblePlanError(
            f"the mix needs more than {max_gpus} {gpu} GPUs within its SLOs",
            fix="lower the rates, loosen the SLOs or raise --max-servers",
        )

    def run(choice: LayoutChoice, dispatch: str) -> MixOutcome:
        return simulate_choice(
            choice, models, profiles, slice_types, arrivals,
            dispatch=dispatch, horizon_s=horizon_s, seed=seed,
        )  # fmt: skip

    notes: dict[str, str] = {
        "profile": f"a slice's batch: the most throughput with 2 x latency(batch) + round trip "
        f"<= SLO and memory fitting; capacity = that throughput x {max_utilisation:g}",
    }
    elsa = run(paris, "elsa")
    first = paris.gpus
    while elsa.attainment < target_attainment and paris.gpus < first + max_extra_gpus:
        more = choose_layouts(
            PARIS, models, fits, layouts, gpu_price_usd_per_hour=gpu_price_usd_per_hour,
            gpus=paris.gpus + 1, max_gpus=max_gpus,
        )  # fmt: skip
        if more is None:
            break
        paris, elsa = more, run(more, "elsa")
    if paris.gpus > first:
        notes["gpus"] = (
            f"the profile's {count_of(first, 'GPU')} attained {target_attainment:.0%} under ELSA "
            "only "
            f"with {paris.gpus}"
        )
    choices = [paris]
    outcomes = [elsa] + [run(paris, d) for d in DISPATCHERS if d != "elsa"]
    skipped: dict[str, str] = {}
    for lay in baselines:
        choice = choose_layouts(
            lay.label, models, fits, [lay], gpu_price_usd_per_hour=gpu_price_usd_per_hour,
            max_gpus=max_gpus,
        )  # fmt: skip
        if choice is None:
            cannot = [
                m.name
                for m in models
                if all(fits[(m.name, t)].capacity_rps == 0 for t in lay.slices)
            ]
            skipped[lay.label] = (
                f"its slices cannot meet the SLO of {', '.join(cannot)}"
                if cannot
                else f"needs more than {max_gpus} GPUs"
            )
            continue
        choices.append(choice)
        outcomes += [run(choice, d) for d in baseline_dispatch]
    meeting = [k for k, o in enumerate(outcomes) if o.attainment >= target_attainment]
    recommended = (
        min(meeting, key=lambda k: (outcomes[k].cost_usd_per_hour, -outcomes[k].goodput_rps))
        if meeting
        else None
    )
    return MigMixPlan(
        gpu=gpu,
        models=tuple(models),
        target_attainment=target_attainment,
        fits=tuple(fits.values()),
        choices=tuple(choices),
        outcomes=tuple(outcomes),
        recommended=recommended,
        skipped=skipped,
        notes=notes,
    )
