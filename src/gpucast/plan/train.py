"""`plan train`: the cheapest (or fastest) cluster that meets the constraints, explained.

:func:`plan_training` runs the whole search:

1. filter the catalog's offers (provider, region, GPU; unknown names fail with close matches),
   or, for a user's cluster (``PlanContext.cluster``), take its offers
   (:func:`~gpucast.plan.space.cluster_offers`: 1..k GPUs of a node, whole nodes up to its
   node count, its own links and price; on demand only unless it has a spot price);
2. build every candidate row (:mod:`.space`) and evaluate all of them at once (:mod:`.evaluate`);
3. drop the infeasible ones, counting each by the first constraint it breaks (spot market,
   global batch, PS server, memory, deadline, budget);
4. P(meet deadline) folds in the step-time model's own uncertainty (:mod:`.uncertainty`):
   on-demand plans get it in closed form and must reach ``min_p_meet`` (as well as meet the
   deadline with the model's central value); spot candidates: a first-order revocation
   estimate ranks them, the Pareto front of (estimated time, estimated cost) survives pruning
   (at most ``max_simulated``, spread along the front) and each survivor gets ``mc_runs``
   Monte Carlo runs over strata of the speed factor (:mod:`.risk`); the budget and
   ``min_p_meet`` are then checked on the simulated mean cost and P(meet deadline);
5. the Pareto front of (time, cost, risk) over the feasible plans, the pick for each
   objective, and "what would help" for every shown candidate (:mod:`.explain`).

No feasible plan raises :class:`NoFeasiblePlanError` naming the constraint that excludes the
plans -- the deadline, the budget or the two together, with the deadline or budget that admits
one (:mod:`.infeasible`) -- else the constraint that cut the most candidates, and how to relax
it. Pure: the catalog, workload facts and risk inputs come in as
values; nothing here reads files, the clock or the terminal.

The public names are here (``__all__``); the code lives in private parts: the context, the
reasons a row is cut and the search's result (``_train_context``), the offers a search covers
(``_train_offers``), what the search keeps of the passing rows (``_train_pruning``), the
search (``_train_search``), the error when no plan is feasible (``_train_no_plan``) and one
shown candidate (``_train_candidate``); :func:`plan_training` and its picks stay here.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from dataclasses import replace

import numpy as np

from gpucast.domain.catalog import estimated_prices_note
from gpucast.domain.plan import BatchOption, LearnerOption, TrainPlan, TrainRequest
from gpucast.domain.provenance import Assumption
from gpucast.domain.systems import NO_PRICE_NOTE
from gpucast.plan._train_candidate import _candidate, _od_twins, _other_scenario, _probe_gpus
from gpucast.plan._train_context import (
    R_BATCH,
    R_BUDGET,
    R_CPU,
    R_DEADLINE,
    R_HOST_MEMORY,
    R_MEMORY,
    R_RISK,
    R_SPOT,
    R_UNFINISHED,
    RELAX,
    FloatArray,
    IntArray,
    PlanContext,
    SearchResult,
    Unkept,
)
from gpucast.plan._train_no_plan import (
    _no_plan,
    binding_error,
    budget_fix,
    deadline_fix,
    no_plan_error,
)
from gpucast.plan._train_offers import (
    OfferFilters,
    filtered_offers,
    planned_gpus,
    with_cluster,
    within_cluster,
)
from gpucast.plan._train_pruning import _cost_or_gpu_hours, _Pruning, _spot_estimates
from gpucast.plan._train_search import make_work, search
from gpucast.plan.efficiency import at_batch_note, workload_family
from gpucast.plan.energy import OBJECTIVE_TIE, no_figure_error, ungridded_note
from gpucast.plan.goodput import batch_choice, batch_why, efficiency_and_goodput
from gpucast.plan.learners import learner_choice
from gpucast.plan.pareto import nondominated, pareto_front_2d, spread
from gpucast.plan.risk import SpotOutcome
from gpucast.plan.space import PS, PS_SYNC
from gpucast.plan.spot_rows import part_offers, simulate_rows
from gpucast.plan.uncertainty import SPOT_STRATA
from gpucast.predict.roofline import RooflineEfficiency
from gpucast.predict.variability import PROBE_S

__all__ = [
    "MAX_SHOWN_FRONT",
    "RELAX",
    "R_BATCH",
    "R_BUDGET",
    "R_CPU",
    "R_DEADLINE",
    "R_HOST_MEMORY",
    "R_MEMORY",
    "R_RISK",
    "R_SPOT",
    "R_UNFINISHED",
    "OfferFilters",
    "PlanContext",
    "SearchResult",
    "Unkept",
    "binding_error",
    "budget_fix",
    "deadline_fix",
    "filtered_offers",
    "make_work",
    "no_plan_error",
    "plan_training",
    "planned_gpus",
    "search",
    "with_cluster",
    "within_cluster",
]


#: How many shown candidates at most (the front is thinned evenly beyond this).
MAX_SHOWN_FRONT = 24


def plan_training(
    request: TrainRequest,
    ctx: PlanContext,
    *,
    executor: Executor | None = None,
    workers: int = 1,
) -> TrainPlan:
    """Search, simulate the surviving spot plans, pick and explain (module docstring);
    ``executor`` (``workers`` worker processes) searches a large space side by side."""
    ctx = with_cluster(ctx)
    res = search(request, ctx, compact=True, executor=executor, workers=workers)
    space, ev, reason = res.space, res.evaluation, res.reason
    counts: dict[str, int] = dict(res.dropped)
    lifetimes: dict[tuple[str, str, str], object] = {}

    # the search kept every passing row a plan can show or simulate (and counted them all)
    od_ok = np.flatnonzero(res.ok & ~space.spot)
    spot_pre = np.flatnonzero(res.ok & space.spot)
    spot_out: dict[int, SpotOutcome] = {}
    pruned = 0
    if spot_pre.size:
        approx_t, approx_c = _spot_estimates(
            space, ev, ctx, spot_pre, _Pruning(lifetimes=lifetimes), elastic=request.elastic
        )
        front = pareto_front_2d(approx_t, approx_c)
        chosen = spot_pre[spread(front, request.max_simulated)]
        pruned = int(res.passed_spot - chosen.size)
        spot_out = simulate_rows(res, ctx, request, chosen.tolist(), lifetimes)

    # feasibility of the simulated spot plans
    spot_ok: list[int] = []
    for i, out in spot_out.items():
        if not math.isfinite(out.time_mean_s) and request.deadline_s is None:
            why = R_UNFINISHED
        elif (
            request.deadline_s is not None
            and out.p_meet_deadline is not None
            and out.p_meet_deadline < request.min_p_meet
        ):
            why = R_RISK
        elif request.budget_usd is not None and out.cost_mean_usd > request.budget_usd:
            why = R_BUDGET
        elif not math.isfinite(out.time_mean_s) and request.min_p_meet > 0:
            why = R_UNFINISHED
        else:
            spot_ok.append(i)
            continue
        reason[i] = why
        counts[why] = counts.get(why, 0) + 1
    for why, k in res.marked.items():
        counts[why] = counts.get(why, 0) + k

    feasible = int(res.passed_on_demand + len(spot_ok))
    if feasible == 0:
        raise _no_plan(request, ctx, res, counts, spot_out)

    # time / cost / risk of every feasible plan
    rows = np.concatenate([od_ok, np.asarray(spot_ok, dtype=np.int64)])
    t = ev.time_s[rows].copy()
    c = ev.cost_usd[rows].copy()
    risk = np.nan_to_num(1.0 - res.p_model[rows], nan=0.0)
    # GPU-seconds billed (on demand: the whole run, and the probe nodes' start-up and minute)
    gpu_s = ev.workers[rows] * t + _probe_gpus(ctx, res, rows) * (ctx.risk.startup_mean_s + PROBE_S)
    for j, i in enumerate(spot_ok, start=od_ok.size):
        out = spot_out[i]
        t[j], c[j] = out.time_mean_s, out.cost_mean_usd
        risk[j] = 0.0 if out.p_meet_deadline is None else 1.0 - out.p_meet_deadline
        # spot: what the Monte Carlo billed (not the capacity gaps, when no node runs)
        gpu_s[j] = ev.workers[i] * t[j] if out.gpu_hours_mean is None else out.gpu_hours_mean * 3600
    c = _cost_or_gpu_hours(ctx, c, gpu_s)
    cheapest = int(np.lexsort((t, c))[0])
    fastest = int(np.lexsort((c, t))[0])
    kwh, co2 = _energy(ctx, res, rows, gpu_s)
    ungridded = _ungridded(res, rows, kwh, co2)
    greenest = {
        name: _least(values, c, t, request.objective == name, then=other, ungridded=ungridded)
        for name, values, other in (("energy", kwh, co2), ("carbon", co2, kwh))
    }
    efficiency, good = efficiency_and_goodput(res, rows)
    most_goodput = int(np.lexsort((c, t, -good))[0])

    # what to show: the (time, cost) front of on-demand plans (thinned), every feasible
    # simulated spot plan, the picks, and the cheapest plan of each GPU type and market
    od_front = pareto_front_2d(t[: od_ok.size], c[: od_ok.size])
    shown = set(spread(od_front, MAX_SHOWN_FRONT).tolist())
    shown |= set(range(od_ok.size, rows.size))
    shown |= {cheapest, fastest, most_goodput}
    shown |= {j for j in greenest.values() if j is not None}
    # one key per GPU type; every mixed cluster shares the key -1 (its cheapest is shown)
    gpu_of = np.where(space.mixed[rows], -1, space.offers.gpu[space.offer[rows]])
    mkt = space.spot[rows]
    for g in np.unique(gpu_of):
        for m in (False, True):
            sel = np.flatnonzero((gpu_of == g) & (mkt == m))
            if sel.size:
                shown.add(int(sel[np.argmin(c[sel])]))
    order = sorted(shown, key=lambda j: (c[j], t[j]))
    objectives = np.stack([t[order], c[order], risk[order]], axis=1)
    pareto = tuple(int(k) for k in nondominated(objectives))

    twins = _od_twins(res, [int(rows[j]) for j in order])
    # spot twins of the two picks (a few more simulations, only for "spot saves ..."; they
    # do not join the candidates, so what is feasible never depends on which were picked)
    pick_rows = sorted({int(rows[cheapest]), int(rows[fastest])})
    extra = []
    for r in pick_rows:
        tw = twins.get(r)
        if tw is not None and tw not in spot_out and ev.has_market[tw] and ev.fits[tw]:
            extra.append(tw)
    twin_out = dict(spot_out)
    if extra:
        twin_out.update(simulate_rows(res, ctx, request, extra, lifetimes))

    scenario_out = _other_scenario(res, ctx, request, [int(rows[j]) for j in order], spot_out)
    candidates = []
    for j in order:
        i = int(rows[j])
        c = _candidate(res, ctx, request, i, spot_out.get(i), twins, twin_out)
        c = replace(
            c,
            energy_kwh=_finite_or_none(kwh[j]),
            co2e_kg=_finite_or_none(co2[j]),
            gpu_power_w=_finite_or_none(ev.gpu_power_w[i]),
            power_limit_w=_finite_or_none(ev.power_limit_w[i]),
            statistical_efficiency=float(efficiency[j]),
            goodput_samples_per_s=float(good[j]),
        )
        if i in scenario_out:
            c = replace(c, scenarios=scenario_out[i])
        candidates.append(c)
    picks: dict[str, int | None] = {
        "cheapest": order.index(cheapest),
        "fastest": order.index(fastest),
        "goodput": order.index(most_goodput),
    }
    for name, pick in greenest.items():
        picks[name] = None if pick is None else order.index(pick)
    fam = workload_family(request.workload)
    assumptions = list(ctx.assumptions)

    def assume(name: str, value: str, source: str = "", override: str = "") -> None:
        if all(a.name != name for a in assumptions):
            assumptions.append(Assumption(name=name, value=value, source=source, override=override))

    assume(
        "statistical efficiency",
        f"epochs(B) = E0 (1 + B/{res.work.critical_batch:g}) / (1 + "
        f"{res.work.reference_batch:g}/{res.work.critical_batch:g})",
        fam.source,
        "--critical-batch, --reference-batch",
    )
    pick = picks[request.objective]
    choice: tuple[BatchOption, ...] = ()
    learners: tuple[LearnerOption, ...] = ()
    learners_text = ""
    if pick is not None:
        row = int(rows[order[pick]])
        spec = ctx.catalog.gpu(res.gpus.names[int(res.space.offers.gpu[res.space.offer[row]])])
        eff = ctx.efficiency or RooflineEfficiency()
        learners, learners_text = learner_choice(
            res, row, ctx.facts, spec.memory_bandwidth_gbps * 1e9 * eff.bandwidth_efficiency
        )
        choice = batch_choice(res, int(rows[order[pick]]))
        chosen_batch = float(ev.global_batch[rows[order[pick]]])
        curve = res.work.curve_or_rule()
        note = at_batch_note(curve, chosen_batch, res.work.dataset_size)
        if request.steps is not None:  # --steps count the reference batch's (issue #22)
            steps = math.ceil(float(curve.samples([chosen_batch])[0]) / chosen_batch)
            note += (
                f": {steps:,} steps of {chosen_batch:,.0f} samples, for --steps "
                f"{request.steps:,} of {res.work.reference_batch:,.0f}"
            )
        if curve.lr is not None and curve.lr.rule != curve.lr.baseline:
            note += "; " + curve.lr.text(chosen_batch, curve.noise_batch)
        assumptions = [
            replace(a, value=f"{a.value}; {note}") if a.name == "statistical efficiency" else a
            for a in assumptions
        ]
    assume(
        "risk",
        "P(meet deadline) covers the step-time model's own uncertainty and, for spot, "
        "revocations: each plan's time interval is read as the 10th-90th percentile of a "
        "per-run speed factor (two-piece lognormal, median = the model's value; the interval "
        "is the band of cross-validated errors in the prediction's regime that covered 80% "
        "of held-out GPUs and workloads). "
        "On demand: P(start-up + training x factor <= deadline) in closed form; spot: the "
        f"Monte Carlo runs are split evenly over {SPOT_STRATA} strata "
        "of the factor (revocations, restarts, start-up delays simulated in each). "
        "--min-p-meet applies to both markets; on-demand plans must also meet the deadline "
        "with the model's central value",
        "",
        "--min-p-meet",
    )
    if request.allow_mixed:
        assume(
            "mixed GPU types",
            "pairs of GPU types in one provider/region, each on its smallest instance, "
            "1/2/4/8 nodes per type; DDP and synchronous PS split the global batch in "
            "proportion to each worker's speed (equal compute per step, whole samples); "
            "asynchronous PS: every worker at the same batch, rates add up to the PS bound "
            "(exact MVA with an equivalent think time)",
        )
    if request.elastic:
        assume(
            "elastic",
            "spot candidates of synchronous strategies go on with the ready nodes instead of "
            "waiting for revoked nodes' replacements: at each count the better of the planned "
            "global batch split over them (where it fits) and the planned per-GPU batch, each "
            "at its samples to target (plan.elastic, Pollux-style); each change in ready nodes "
            "costs the restart penalty; losing every node rolls back to the checkpoint",
            "",
            "drop --elastic",
        )
    if request.allow_spot:  # an on-demand plan simulates none (QA 41 S)
        assume(
            "spot simulation",
            f"{request.mc_runs} Monte Carlo runs per spot plan that survived pruning "
            f"({len(spot_out)} simulated, {pruned} pruned as dominated)",
            "",
            "--runs, --max-simulated, --seed",
        )
    return TrainPlan(
        request=request,
        candidates=tuple(candidates),
        pareto=pareto,
        recommended=picks[request.objective],
        picks=picks,
        infeasible=counts,
        evaluated=res.evaluated + sum(res.dropped.values()),
        feasible=feasible,
        simulated=len(spot_out),
        pruned=pruned,
        catalog_snapshot=ctx.catalog.snapshot_date,
        workload_family=fam.family,
        critical_batch=res.work.critical_batch,
        reference_batch=int(res.work.reference_batch),
        assumptions=tuple(assumptions),
        models=ctx.models,
        notes=(
            (NO_PRICE_NOTE + "; 'cheapest' ranks by GPU-hours",)
            if ctx.cluster is not None and not ctx.cluster.priced
            else ()
        )
        + _estimated_prices(res, [int(rows[j]) for j in order], picks[request.objective])
        + (ungridded_note(ungridded) if request.objective == "carbon" else ()),
        batch_choice=choice,
        batch_why=batch_why(choice, request.objective),
        learner_choice=learners,
        learners_why=learners_text,
    )


def _estimated_prices(res: SearchResult, shown: list[int], pick: int | None) -> tuple[str, ...]:
    """A note naming the offers of the ``shown`` rows whose prices are estimates, not read from
    a source (``pick``: the recommended row's position in ``shown``), or none."""
    space = res.space
    off = space.offers
    if off.price_estimated is None or off.cpu_price_estimated is None:
        return ()
    named: dict[str, bool] = {}
    for k, i in enumerate(shown):
        offers = [f"{off.provider[o]}/{off.region[o]} {off.instance_type[o]}"
                  for o, _ in part_offers(space, i) if off.price_estimated[o]]  # fmt: skip
        o = int(space.offer[i])
        if space.strategy[i] in (PS, PS_SYNC) and off.cpu_price_estimated[o]:
            offers.append(f"{off.provider[o]}/{off.region[o]} {off.cpu_instance[o]} (PS)")
        for name in offers:
            named[name] = named.get(name, False) or k == pick
    note = estimated_prices_note(f"{n}{' (the pick)' if mine else ''}" for n, mine in named.items())
    return (f"estimated prices: {note}",) if note else ()


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(float(value)) else None


def _energy(
    ctx: PlanContext, res: SearchResult, rows: IntArray, gpu_s: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(kWh, kg CO2e) of the feasible ``rows`` from their billed GPU-seconds: every GPU at its
    average board power for that time less the first start-up, times the PUE (a spot run's
    replacement start-ups and waits count at that power: an upper bound); NaN where a GPU has
    no power facts or a region no grid figure."""
    ev, space = res.evaluation, res.space
    startup = ev.time_s[rows] - ev.train_s[rows]
    # the probe nodes start beside the first start-up (QA 40 E #13)
    started = ev.workers[rows] + _probe_gpus(ctx, res, rows)
    busy_gpu_s = np.maximum(gpu_s - started * startup, 0.0)
    kwh = ev.gpu_power_w[rows] * busy_gpu_s * ctx.pue / 3.6e6
    off = space.offers
    o = space.offer[rows]
    intensity = np.array(
        [ctx.grid_gco2e_per_kwh.get((off.provider[k], off.region[k]), np.nan) for k in o.tolist()],
        dtype=np.float64,
    )
    return kwh, kwh * intensity / 1000.0


def _ungridded(res: SearchResult, rows: IntArray, kwh: FloatArray, co2: FloatArray) -> list[str]:
    """The regions (provider/region) of feasible plans with an energy figure but no grid
    carbon figure: their plans have no kg CO2e and are not ranked by carbon."""
    off, o = res.space.offers, res.space.offer[rows]
    lost = np.flatnonzero(np.isfinite(kwh) & ~np.isfinite(co2))
    return sorted({f"{off.provider[k]}/{off.region[k]}" for k in o[lost].tolist()})


def _least(
    values: FloatArray,
    cost: FloatArray,
    time_s: FloatArray,
    wanted: bool,
    *,
    then: FloatArray,
    ungridded: list[str],
) -> int | None:
    """The feasible plan with the least ``values``, plans within :data:`OBJECTIVE_TIE` of it
    counting as tied (the cheapest of them, then the fastest, then the least ``then``: the
    same offer in a cleaner region wins an energy tie); None when no plan has a figure -- an
    error when the request ranks by it, naming what is missing (``ungridded``: the regions
    whose plans have energy but no grid figure)."""
    known = np.flatnonzero(np.isfinite(values))
    if not known.size:
        if wanted:
            raise no_figure_error(ungridded)
        return None
    tied = known[values[known] <= np.min(values[known]) * (1.0 + OBJECTIVE_TIE)]
    order = np.lexsort((then[tied], time_s[tied], cost[tied]))
    return int(tied[order[0]])
