"""`plan serve`: the cheapest deployments that serve some models within a latency SLO.

Pure: numbers in (a :class:`ServeRequest`, the server options with prices, each model's
latency curve on each option), numbers out (a :class:`ServePlan`). No files, clock or terminal.

The search
----------
A *unit* is one way to run one model on one server type: (model, server option, max batch
``b``, max queue delay ``d``, instances ``i``) for ``placement="dedicated"``, or every model
at once on each server with the same ``(b, d, i)`` for ``placement="shared"`` (co-location;
the device work of concurrent batches is shared, with the option's measured slowdown table
when it has one). Units are pruned analytically before anything is simulated:

* **latency**: a batch of one plus the request overhead above the SLO -> infeasible;
* **memory**: ``i`` instances of every model at batch ``b`` do not fit in the device;
* **capacity**: the fewest servers ``n_min`` with utilisation < 1, of the device (device
  work per request ``device_s(k) / k * slowdown(N) / N`` at the best batch ``k <= b``), of
  the instances (``latency(k) / (i * k)``) and of each host-path stage the option has (the
  network link and PCIe copy: a request's bytes over their bandwidth; the shared host:
  requests / ``host_capacity_rps``); ``n_min > max_servers`` -> infeasible.

``n_min * price`` is a lower bound on a unit's cost. Units are simulated (fast
discrete-event simulator, the same arrivals for every candidate) in order of that bound,
with ``n_min``, ``n_min + 1``, ... servers until the SLO holds, adding a server stops
helping, or ``max_extra_servers`` are added; the search stops once the next bound is no
cheaper than the cheapest deployment found. The cheapest deployment in that space is thus
exact (unless ``max_simulations`` cuts the search, which the plan notes), so a looser SLO or a
bigger budget never makes the recommendation dearer. A few more units (the cheapest of each
server type not yet tried) are simulated for the Pareto front of cost vs tail latency.

The recommended deployment's peak throughput is then *measured*: a saturation search
(:func:`gpucast.simulate.serving.find_saturation`) offers it the same traffic time-scaled to
ever higher rates and reports the highest it holds; its headroom is that peak over the
offered load (the other candidates keep the analytic bound).

With dedicated placement servers share nothing, so each model is planned on its own and a
deployment is one unit per model (the cheapest mix may use different server types).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.domain.serving_plan import (
    ModelChoice,
    ModelProfile,
    ServeCandidate,
    ServePlan,
    ServeRequest,
    ServerGroupChoice,
    ServerOption,
)
from gpucast.domain.units import usd_per_million
from gpucast.plan.pareto import pareto_front_2d, tie_note
from gpucast.simulate import arrivals as arrival_gen
from gpucast.simulate.serving import (
    Saturation,
    ServingResult,
    find_saturation,
    simulate_serving,
)

FloatArray = npt.NDArray[np.float64]

#: How the pick is chosen among deployments at the same cost (two offers at one price), as
#: the output states it: the candidates' order after their cost.
TIE_BREAK = "lower tail latency, then fewer servers (GPUs or MIG slices)"
REASON_LATENCY = "single-request latency above SLO"
REASON_MEMORY = "models do not fit in device memory"
REASON_SERVERS = "needs more than max servers"
REASON_SLO = "SLO missed in simulation"
REASON_BUDGET = "over budget"
REASON_NO_CURVE = "no latency curve for this server"
REASON_CUT = "not simulated: cannot beat the cheapest"


def slowdown_at(option: ServerOption, n: int) -> float:
    """How much slower each of ``n`` concurrent batches runs on ``option``'s device."""
    table = option.colocation_slowdown
    if not table:
        return float(n)
    return table[min(n, len(table)) - 1]


@dataclass(frozen=True, slots=True)
class _Capacity:
    device_rps: float  # requests/s one server's device sustains for this model alone
    instance_rps: float  # requests/s its instances sustain
    link_rps: float = math.inf  # requests/s its network link and PCIe copy carry (the slower)


def link_rps(profile: ModelProfile, option: ServerOption) -> float:
    """Requests/s of ``profile``'s model the option's network link and PCIe copy carry."""
    out = math.inf
    if profile.input_bytes > 0:
        if option.network_gbps:
            out = min(out, option.network_gbps * 1e9 / (8.0 * profile.input_bytes))
        if option.pcie_gbps:
            out = min(out, option.pcie_gbps * 1e9 / profile.input_bytes)
    return out


def capacity(profile: ModelProfile, option: ServerOption, max_batch: int, instances: int,
             total_instances: int) -> _Capacity:  # fmt: skip
    """Analytic throughput bounds of one model on one server (see the module docstring)."""
    curve = profile.curve
    slow = slowdown_at(option, total_instances) / total_instances
    best_dev = math.inf
    best_lat = math.inf
    for k in range(1, max_batch + 1):
        best_dev = min(best_dev, curve.device_s(k) / k)
        best_lat = min(best_lat, curve.latency(k) / k)
    dev = best_dev * slow if total_instances > 1 else best_lat
    return _Capacity(
        device_rps=math.inf if dev <= 0 else 1.0 / dev,
        instance_rps=instances / best_lat,
        link_rps=link_rps(profile, option),
    )


@dataclass(slots=True)
class _Unit:
    """A configuration before its server count is chosen."""

    placement: str
    option: ServerOption
    models: tuple[str, ...]
    max_batch: int
    delay_s: float
    instances: int
    n_min: int
    lb_cost: float
    caps: dict[str, _Capacity] = field(default_factory=dict)

    def key(self) -> tuple[object, ...]:
        return (self.lb_cost, self.option.name, self.delay_s, self.max_batch, self.instances)


@dataclass(slots=True)
class _Eval:
    """One simulated (unit, count)."""

    unit: _Unit
    count: int
    cost: float
    tail_s: float
    latency: dict[str, dict[str, float]]
    attainment: dict[str, float]
    utilisation: float
    meets: bool
    requests_in: int
    requests_out: int
    served_rps: float  # requests completed in the measuring window over its length


def _host_load(request: ServeRequest, unit_models: Sequence[str], option: ServerOption) -> float:
    """Offered requests/s over the option's host capacity (0 when unlimited)."""
    if option.host_capacity_rps is None:
        return 0.0
    rates = {m.name: m.rate_rps for m in request.models}
    return sum(rates[m] for m in unit_models) / option.host_capacity_rps


def _servers_needed(
    request: ServeRequest,
    unit_models: Sequence[str],
    caps: Mapping[str, _Capacity],
    option: ServerOption,
) -> int:
    """Fewest servers with device, instance and host-path utilisation strictly below 1."""
    rates = {m.name: m.rate_rps for m in request.models}
    device_load = sum(rates[m] / caps[m].device_rps for m in unit_models)
    inst_load = max(rates[m] / caps[m].instance_rps for m in unit_models)
    link_load = sum(rates[m] / caps[m].link_rps for m in unit_models)
    need = max(device_load, inst_load, link_load, _host_load(request, unit_models, option))
    return max(1, math.floor(need) + 1)


def _utilisation(request: ServeRequest, unit: _Unit, count: int) -> float:
    rates = {m.name: m.rate_rps for m in request.models}
    device = sum(rates[m] / count / unit.caps[m].device_rps for m in unit.models)
    inst = max(rates[m] / count / unit.caps[m].instance_rps for m in unit.models)
    link = sum(rates[m] / count / unit.caps[m].link_rps for m in unit.models)
    return max(device, inst, link, _host_load(request, unit.models, unit.option) / count)


class _Planner:
    def __init__(
        self,
        request: ServeRequest,
        options: Sequence[ServerOption],
        profiles: Mapping[tuple[str, str], ModelProfile],
        arrivals: Mapping[str, FloatArray],
    ) -> None:
        self.request = request
        self.options = list(options)
        self.profiles = profiles
        self.arrivals = arrivals
        self.reasons: Counter[str] = Counter()
        self.simulated = 0
        self.evaluated = 0
        self.cut_by_cap = False
        self.horizon_s = max(
            [request.duration_s, *(float(a[-1]) for a in arrivals.values() if len(a))]
        )

    # -- units ------------------------------------------------------------------------------
    def units(self, placement: str, models: tuple[str, ...]) -> list[_Unit]:
        req = self.request
        out: list[_Unit] = []
        for option in self.options:
            profs = [self.profiles.get((m, option.name)) for m in models]
            grid = len(req.max_batch_sizes) * len(req.max_delays_s) * len(req.instances)
            if any(p is None for p in profs):
                self.reasons[REASON_NO_CURVE] += grid
                self.evaluated += grid
                continue
            ready = [p for p in profs if p is not None]
            if any(p.single_request_s() > req.slo_s for p in ready):
                self.reasons[REASON_LATENCY] += grid
                self.evaluated += grid
                continue
            for b in req.max_batch_sizes:
                for i in req.instances:
                    self.evaluated += len(req.max_delays_s)
                    need = sum(i * p.memory_gib(b) for p in ready)
                    if need > option.room_gib:  # a GPU's usable memory (the one rule)
                        self.reasons[REASON_MEMORY] += len(req.max_delays_s)
                        continue
                    total = i * len(models)
                    caps = {p.model: capacity(p, option, b, i, total) for p in ready}
                    n_min = _servers_needed(req, models, caps, option)
                    if n_min > req.max_servers:
                        self.reasons[REASON_SERVERS] += len(req.max_delays_s)
                        continue
                    for d in req.max_delays_s:
                        out.append(
                            _Unit(
                                placement=placement,
                                option=option,
                                models=models,
                                max_batch=b,
                                delay_s=d,
                                instances=i,
                                n_min=n_min,
                                lb_cost=option.cost_usd_per_hour(n_min),
                                caps=caps,
                            )
                        )
        out.sort(key=_Unit.key)
        return out

    # -- simulation -------------------------------------------------------------------------
    def deployment(self, unit: _Unit, count: int) -> Deployment:
        """The deployment of ``count`` servers of ``unit``, host path included."""
        deps = []
        for m in unit.models:
            prof = self.profiles[(m, unit.option.name)]
            deps.append(
                ModelDeployment(
                    model=m,
                    latency=prof.curve,
                    batching=BatchingPolicy(
                        max_batch_size=unit.max_batch, max_queue_delay_s=unit.delay_s
                    ),
                    instances=unit.instances,
                    memory_gib=prof.memory_gib(unit.max_batch),
                    request_overhead_s=prof.request_overhead_s,
                    input_bytes=prof.input_bytes,
                )
            )
        option = unit.option
        server = ServerSpec(
            name=option.name,
            kind=option.kind,  # type: ignore[arg-type]
            memory_gib=option.memory_gib,
            price_usd_per_hour=option.price_usd_per_hour,
            models=tuple(deps),
            colocation_slowdown=option.colocation_slowdown,
            host_capacity_rps=option.host_capacity_rps,
            host_s=option.host_s,
            host_concurrency=option.host_concurrency,
            network_gbps=option.network_gbps,
            pcie_gbps=option.pcie_gbps,
        )
        return Deployment(groups=(ServerGroup(server=server, count=count),))

    def simulate(self, unit: _Unit, count: int) -> _Eval:
        req = self.request
        deployment = self.deployment(unit, count)
        result = simulate_serving(
            deployment,
            {m: self.arrivals[m] for m in unit.models},
            seed=req.seed,
            horizon_s=self.horizon_s,
        )
        self.simulated += 1
        return self._evaluate(unit, count, result)

    def _evaluate(self, unit: _Unit, count: int, result: ServingResult) -> _Eval:
        req = self.request
        latency: dict[str, dict[str, float]] = {}
        attainment: dict[str, float] = {}
        tail = 0.0
        out = 0
        for m in unit.models:
            lat = result.latencies(m)
            out += int(np.isfinite(lat).sum())
            p50, p95, p99, pslo = (
                float(v) for v in np.percentile(lat, [50, 95, 99, req.slo_percentile])
            )
            latency[m] = {"p50": p50, "p95": p95, "p99": p99, "slo_percentile": pslo}
            attainment[m] = float(np.mean(lat <= req.slo_s))
            tail = max(tail, pslo)
        busy = [s.busy_fraction for s in result.servers]
        return _Eval(
            unit=unit,
            count=count,
            cost=unit.option.cost_usd_per_hour(count),
            tail_s=tail,
            latency=latency,
            attainment=attainment,
            utilisation=float(np.mean(busy)) if busy else math.nan,
            meets=tail <= req.slo_s,
            requests_in=int(sum(self.arrivals[m].size for m in unit.models)),
            requests_out=out,
            served_rps=result.throughput_rps(),
        )

    def search(self, units: list[_Unit], best_cost: float) -> tuple[list[_Eval], float]:
        """Simulate units in lower-bound order until none can beat ``best_cost``."""
        req = self.request
        evals: list[_Eval] = []
        for k, unit in enumerate(units):
            if unit.lb_cost >= best_cost:
                self.reasons[REASON_CUT] += len(units) - k
                break
            if self.simulated >= req.max_simulations:
                self.cut_by_cap = True
                self.reasons[REASON_CUT] += len(units) - k
                break
            previous = math.inf
            met = priced_out = False
            for count in range(unit.n_min, unit.n_min + req.max_extra_servers + 1):
                cost = unit.option.cost_usd_per_hour(count)
                if cost >= best_cost:
                    priced_out = True
                    break
                if count > req.max_servers:
                    break
                ev = self.simulate(unit, count)
                evals.append(ev)
                if ev.meets:
                    best_cost = min(best_cost, ev.cost)
                    met = True
                    break
                if ev.tail_s > previous * 0.99:
                    break  # another server no longer helps: batching or latency bound
                previous = ev.tail_s
            if not met and not priced_out:
                self.reasons[REASON_SLO] += 1
        return evals, best_cost

    def pareto_extras(self, units: list[_Unit], done: set[int]) -> list[_Eval]:
        """The cheapest not-yet-simulated unit of each server type (lowest delay first), and
        one more server on the best ones: points for the cost vs latency front."""
        extras: list[_Eval] = []
        seen: set[str] = set()
        budget = self.request.pareto_extra
        for unit in sorted(units, key=lambda u: (u.lb_cost, u.delay_s, u.max_batch)):
            if budget <= 0 or self.simulated >= self.request.max_simulations:
                break
            if id(unit) in done or unit.option.name in seen:
                continue
            seen.add(unit.option.name)
            for count in range(unit.n_min, unit.n_min + self.request.max_extra_servers + 1):
                if count > self.request.max_servers:
                    break
                ev = self.simulate(unit, count)
                extras.append(ev)
                budget -= 1
                if ev.meets:
                    if count + 1 <= self.request.max_servers and budget > 0:
                        extras.append(self.simulate(unit, count + 1))
                        budget -= 1
                    break
        return extras


def _choice(ev: _Eval, model: str) -> ModelChoice:
    u = ev.unit
    cap = u.caps[model]
    return ModelChoice(
        model=model,
        max_batch_size=u.max_batch,
        max_queue_delay_s=u.delay_s,
        instances=u.instances,
        latency_s=ev.latency[model],
        slo_attainment=ev.attainment[model],
        capacity_rps=ev.count * min(cap.device_rps, cap.instance_rps),
    )


def _candidate(request: ServeRequest, placement: str, evals: Sequence[_Eval]) -> ServeCandidate:
    groups = tuple(
        ServerGroupChoice(
            server=ev.unit.option,
            count=ev.count,
            models=tuple(_choice(ev, m) for m in ev.unit.models),
            utilisation=ev.utilisation,
        )
        for ev in evals
    )
    cost = sum(ev.cost for ev in evals)
    tail = max(ev.tail_s for ev in evals)
    latency = {m: ev.latency[m]["slo_percentile"] for ev in evals for m in ev.unit.models}
    util = max(_utilisation(request, ev.unit, ev.count) for ev in evals)
    bound = "latency" if any(ev.count > ev.unit.n_min for ev in evals) else "capacity"
    return ServeCandidate(
        placement=placement,
        groups=groups,
        cost_usd_per_hour=cost,
        cost_usd_per_million=usd_per_million(cost, sum(ev.served_rps for ev in evals)),
        tail_latency_s=tail,
        latency_s=latency,
        meets_slo=all(ev.meets for ev in evals),
        headroom=(1.0 / util - 1.0) if util > 0 else math.inf,
        latency_headroom=request.slo_s / tail - 1.0 if tail > 0 else math.inf,
        requests_in=sum(ev.requests_in for ev in evals),
        requests_out=sum(ev.requests_out for ev in evals),
        bound=bound,
    )


def _saturation(planner: _Planner, evals: Sequence[_Eval], duration_s: float) -> Saturation:
    """Peak throughput of the deployment ``evals`` make up, offered the planning traffic
    time-scaled (each model keeping its share of the total)."""
    request = planner.request
    groups = tuple(g for ev in evals for g in planner.deployment(ev.unit, ev.count).groups)
    deployment = Deployment(groups=groups)
    rates = {m.name: m.rate_rps for m in request.models}
    total = sum(rates.values())
    models = [m for ev in evals for m in ev.unit.models]

    def at(rate: float, span: float) -> dict[str, FloatArray]:
        return {
            m: arrival_gen.rescaled(planner.arrivals[m], rate * rates[m] / total, span)
            for m in models
        }

    util = max(_utilisation(request, ev.unit, ev.count) for ev in evals)
    start = total / util if util > 0 else 2.0 * total  # the analytic capacity
    return find_saturation(
        deployment, at, duration_s=duration_s, start_rps=max(start, total), seed=request.seed
    )


def default_arrivals(request: ServeRequest) -> dict[str, FloatArray]:
    """Poisson arrivals at each model's rate over ``duration_s`` (seeded per model)."""
    out: dict[str, FloatArray] = {}
    for k, m in enumerate(request.models):
        rng = np.random.default_rng([request.seed, k])
        out[m.name] = arrival_gen.poisson(m.rate_rps, request.duration_s, rng)
    return out


def _check_reachable(
    request: ServeRequest,
    options: Sequence[ServerOption],
    profiles: Mapping[tuple[str, str], ModelProfile],
) -> None:
    """SLO below every server's single-request latency -> one clear error."""
    for m in request.models:
        mine = [profiles[(m.name, o.name)] for o in options if (m.name, o.name) in profiles]
        if not mine:
            raise InvalidSpecError(
                f"model {m.name}",
                "has no latency curve on any server option",
                fix="profile it or give --latency-table",
            )
        fastest = min(mine, key=lambda p: p.single_request_s())
        t = fastest.single_request_s()
        if t > request.slo_s:
            raise NoFeasiblePlanError(
                f"SLO {request.slo_s * 1e3:g} ms is below the single-request latency of "
                f"{m.name} on every server (fastest: {fastest.server}, {t * 1e3:.1f} ms)",
                fix=f"raise the SLO above {t * 1e3:.1f} ms, or add faster servers / a "
                "measured --latency-table",
            )


def plan_serving(
    request: ServeRequest,
    options: Sequence[ServerOption],
    profiles: Mapping[tuple[str, str], ModelProfile],
    *,
    arrivals: Mapping[str, FloatArray] | None = None,
    assumptions: Mapping[str, str] | None = None,
    saturation_s: float = 30.0,
) -> ServePlan:
    """The cheapest deployments of ``request.models`` on ``options`` meeting the SLO.

    ``profiles[(model, option.name)]`` is a model's latency curve on a server option (absent:
    the option cannot run it). ``arrivals`` (sorted seconds per model; default Poisson at
    each rate) are the traffic every candidate is simulated with; the recommended one is then
    searched for its peak throughput over ``saturation_s`` runs (0: skip). Raises
    :class:`NoFeasiblePlanError` when the SLO is below every server's single-request latency
    or no deployment meets it.
    """
    if not options:
        raise InvalidSpecError("servers", "no server option to plan on", fix="relax the filters")
    names = [o.name for o in options]
    if len(set(names)) != len(names):
        raise InvalidSpecError("server options", "have duplicate names")
    _check_reachable(request, options, profiles)
    traffic = dict(arrivals) if arrivals is not None else default_arrivals(request)
    for m in request.models:
        if m.name not in traffic or traffic[m.name].size == 0:
            raise InvalidSpecError(
                f"arrivals of {m.name}", "are empty", fix="give a longer trace or --duration-s"
            )
    planner = _Planner(request, options, profiles, traffic)
    model_names = tuple(m.name for m in request.models)
    candidates: list[ServeCandidate] = []
    evals_of: dict[int, Sequence[_Eval]] = {}

    def add(placement: str, evals: Sequence[_Eval]) -> None:
        candidate = _candidate(request, placement, evals)
        evals_of[id(candidate)] = evals
        candidates.append(candidate)

    # -- dedicated: each model on its own servers -------------------------------------------
    best_dedicated = math.inf
    if "dedicated" in request.placements or len(model_names) == 1:
        per_model: dict[str, list[_Eval]] = {}
        for name in model_names:
            units = planner.units("dedicated", (name,))
            evals, _best = planner.search(units, math.inf)
            done = {id(ev.unit) for ev in evals}
            evals += planner.pareto_extras(units, done)
            per_model[name] = [ev for ev in evals if ev.meets]
        if all(per_model.values()):
            if len(model_names) == 1:
                for ev in per_model[model_names[0]]:
                    add("dedicated", [ev])
            else:
                combos: list[list[_Eval]] = [
                    [min(per_model[m], key=lambda e: (e.cost, e.tail_s)) for m in model_names],
                    [min(per_model[m], key=lambda e: (e.tail_s, e.cost)) for m in model_names],
                ]
                for option in options:
                    on = [[e for e in per_model[m] if e.unit.option is option] for m in model_names]
                    if all(on):
                        combos.append([min(e, key=lambda x: (x.cost, x.tail_s)) for e in on])
                for combo in combos:
                    add("dedicated", combo)
            best_dedicated = min(c.cost_usd_per_hour for c in candidates)

    # -- shared: every model co-located on each server --------------------------------------
    if len(model_names) > 1 and "shared" in request.placements:
        units = planner.units("shared", model_names)
        evals, _best = planner.search(units, best_dedicated)
        done = {id(ev.unit) for ev in evals}
        evals += planner.pareto_extras(units, done)
        for ev in evals:
            if ev.meets:
                add("shared", [ev])

    # -- budget, dedupe, order, front -------------------------------------------------------
    if request.budget_usd_per_hour is not None:
        over = [c for c in candidates if c.cost_usd_per_hour > request.budget_usd_per_hour]
        planner.reasons[REASON_BUDGET] += len(over)
        candidates = [c for c in candidates if c.cost_usd_per_hour <= request.budget_usd_per_hour]
    unique: dict[str, ServeCandidate] = {}
    for c in candidates:
        unique.setdefault(c.describe(), c)
    # cheapest first; at one cost (equal prices) TIE_BREAK, then the description
    ordered = sorted(
        unique.values(),
        key=lambda c: (c.cost_usd_per_hour, c.tail_latency_s, c.servers, c.describe()),
    )
    if not ordered:
        if REASON_BUDGET in planner.reasons and not planner.cut_by_cap:
            # those cut cost more than a deployment found to meet the SLO, which the budget
            # then refused: over budget too, with no cheapest left to beat (QA 40 V #14)
            planner.reasons[REASON_BUDGET] += planner.reasons.pop(REASON_CUT, 0)
        detail = ", ".join(f"{k}: {v}" for k, v in planner.reasons.most_common())
        fix = (
            "raise --budget-usd-per-hour"
            if REASON_BUDGET in planner.reasons
            else "loosen the SLO, raise --max-servers, or allow more server types"
        )
        raise NoFeasiblePlanError(
            f"no deployment meets p{request.slo_percentile:g} <= {request.slo_s * 1e3:g} ms "
            f"(configurations by reason, most first: {detail or 'nothing to evaluate'})",
            fix=fix,
        )
    front = pareto_front_2d(
        [c.cost_usd_per_hour for c in ordered], [c.tail_latency_s for c in ordered]
    )
    notes = dict(assumptions or {})
    tie = tie_note([c.cost_usd_per_hour for c in ordered], 0, TIE_BREAK)
    if tie is not None:
        notes["pick"] = tie
    if saturation_s > 0:
        best = ordered[0]
        sat = _saturation(planner, evals_of[id(best)], saturation_s)
        peak = sat.peak_throughput_rps
        ordered[0] = dataclasses.replace(
            best,
            saturation_rps=sat.saturation_rps,
            peak_throughput_rps=peak,
            headroom=peak / request.total_rate_rps - 1.0 if peak > 0 else best.headroom,
        )
        notes["saturation"] = (
            f"recommended deployment holds {sat.saturation_rps:.1f} req/s (the lesser of "
            "offered and served at the highest rate held; the same traffic time-scaled; "
            f"{sat.criterion}); peak throughput {peak:.1f} req/s served{sat.edge_note}"
        )
    if planner.cut_by_cap:
        notes["search"] = (
            f"stopped at {request.max_simulations} simulations: the cheapest shown may not be "
            "the cheapest possible (raise max_simulations)"
        )
    return ServePlan(
        request=request,
        candidates=tuple(ordered),
        pareto=tuple(int(i) for i in sorted(front.tolist())),
        recommended=0,
        infeasible=dict(planner.reasons),
        evaluated=planner.evaluated,
        simulated=planner.simulated,
        assumptions=notes,
    )
