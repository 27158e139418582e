"""The work of ``simulate train`` (:func:`simulated_train`): the request's cluster, lifetimes,
start-ups, prices, step times (calibrated as ``plan train`` does, by precision), speed table
(re-planned batches for ``--elastic``), checkpoint interval and GPU variability, run by
:func:`gpucast.simulate.transient.simulate_scenario` -- over the roofline model's strata,
for both lifetime scenarios where the data rests on one, and with ``--move-region`` -- and
the result's notes, assumptions and validation. Called by :mod:`gpucast.app.simulation`.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.app._launches import mean_delay_s
from gpucast.app._memory import check_simulated_memory
from gpucast.app._simulation_checks import _check_finishes, _check_launches, _check_size
from gpucast.app._simulation_inputs import (
    _evaluation_steps,
    _instance,
    _on_cluster,
    _steps_to_target,
    checkpoint_every,
    deadline_seconds,
)
from gpucast.app._simulation_results import _outcome, _validation
from gpucast.app._units import half_units
from gpucast.app.elastic import elastic_speed
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import is_default
from gpucast.domain.provenance import Assumption
from gpucast.domain.workload import (
    AUTO_PRECISION,
    PRECISIONS,
    TF32,
    auto_precision_assumption,
    check_precision_units,
    gpu_compute_precision,
    measured_precision,
    precision_assumption,
    profiled_precision,
)
from gpucast.inputs.spot import notice_assumption
from gpucast.inputs.workload import measured_name

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from gpucast.app.simulation import SimulateTrainRequest
    from gpucast.domain.simulation import SimulationResult


def _given_interval_note(ckpt_s: float, every_steps: int, full_speed: float, *, spot: bool) -> str:
    """What a given ``--checkpoint-every`` costs: both markets take it, and a checkpoint that
    outlasts a tenth of the training between two is said with the way out (QA 41 QS #3: one
    every second of a 3 s checkpoint nearly quadrupled the job without a word)."""
    share = ckpt_s * full_speed / every_steps
    return (
        ("the given checkpoint interval applies to the on-demand runs too: " if spot else "")
        + f"a checkpoint ({ckpt_s:.3g} s) every {every_steps:,} steps "
        f"({every_steps / full_speed:.3g} s of training at full speed) adds {share:.0%} to the "
        "training time"
        + (
            "; drop --checkpoint-every for Young's interval, which weighs the checkpoint's "
            "cost against the work a revocation loses"
            if share >= 0.1
            else ""
        )
    )


def simulated_train(
    request: SimulateTrainRequest, *, db: Path | str | None, now: datetime | None
) -> SimulationResult:
    """:func:`gpucast.app.simulation.simulate_train` on a resolved request."""
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.domain.simulation import ClusterScenario
    from gpucast.inputs import spot as spot_inputs
    from gpucast.inputs import transient as tinputs
    from gpucast.inputs.calibration import (
        step_time_efficiency,
        store_calibration,
        uncalibrated_source,
    )
    from gpucast.inputs.cluster import cluster_model, perf_params
    from gpucast.inputs.clusters import intra_link_gbps, request_cluster, simulation_prices
    from gpucast.inputs.data import published_data_dir
    from gpucast.inputs.variability import gpu_variability, variability_assumption
    from gpucast.inputs.workload import workload_inputs
    from gpucast.plan.risk import window_hazard_per_s, young_interval_s
    from gpucast.plan.uncertainty import strata
    from gpucast.simulate.transient import simulate_scenario
    from gpucast.store.db import default_db_path

    deadline_s = deadline_seconds(request.deadline, now)
    every_steps, every_s = checkpoint_every(request.checkpoint_every)
    offers = offers_file(request.offers_file)
    catalog = load_catalog(offers)
    cluster = request_cluster(request, catalog)
    if cluster is not None:
        request = _on_cluster(request, cluster)
    request, gpn = _instance(request, catalog)
    assert request.gpu is not None and request.region is not None
    ps = request.ps_count
    groups = tinputs.parse_groups(request.gpu, request.workers, request.region, request.spot)
    for g in groups:
        check_precision_units(request.precision, catalog.gpu(g.gpu), catalog)
    if gpn > 1:  # each worker is a node of gpn GPUs: what its billed GPU-time and spread count
        groups = tuple(dataclasses.replace(g, gpus=gpn) for g in groups)
    _check_size(request, groups, ps)
    given_speed = tinputs.parse_speed(request.speed, groups)
    root = published_data_dir(request.data_dir)
    target_notes: tuple[Assumption, ...] = ()
    curve = None
    if request.steps is not None and not request.elastic:
        total_steps = request.steps
    else:
        total_steps, target_notes, curve = _steps_to_target(request, groups, gpn, root, db)
        if request.steps is not None:
            target_notes = tuple(
                dataclasses.replace(a, name=f"{a.name} (--elastic: batches other than this one)")
                for a in target_notes
            )
    intra_gbps = None
    if cluster is None:
        tinputs.check_names(groups, request.region, catalog)
        prices, network = tinputs.prices_and_network(
            request.price_table,
            groups,
            request.region,
            ps,
            request.provider,
            catalog,
            gpus_per_node=gpn,
            instance_type=request.instance,
        )
        tinputs.check_prices(prices, groups, request.region, ps)
    else:
        prices, network = simulation_prices(cluster, catalog, ps_count=ps, spot=request.spot)
        intra_gbps = intra_link_gbps(cluster, catalog)
    store = Path(db) if db is not None else default_db_path()
    lifetimes = spot_inputs.Lifetimes(
        data_dir=root,
        catalog=catalog,
        band=request.interruption_band,
        hazard_per_hour=request.hazard_per_hour,
        method=request.lifetime_method,
        scenario=request.spot_scenario,
        gcp_kind=request.spot_kind,
        named=None
        if request.lifetimes is None
        else spot_inputs.named_lifetimes(store, request.lifetimes),
    )
    dists = [lifetimes(g.gpu, g.region, request.provider or "") if g.spot else None for g in groups]
    where = {request.provider or lifetimes.provider_of(g.region) for g in groups}
    if request.spot_kind == "preemptible" and not where & {"gcp", ""}:  # "": can't tell
        raise InvalidSpecError(  # was silently ignored off GCP (QA 35 E #29)
            "spot-kind",
            "preemptible applies to GCP VMs only (stopped at 24 h); this job runs on "
            + ", ".join(sorted(where)),
            got=request.spot_kind,
            fix="drop --spot-kind, or run on GCP (--provider gcp)",
        )
    startup = spot_inputs.StartupDelays(data_dir=root)
    start_spot = [startup(g.gpu, "spot", g.region) for g in groups]
    start_spot.append(startup("cpu", "spot", request.region))
    penalty = spot_inputs.restart_penalty(root)
    restart_s = penalty.value + max(mean_delay_s(d) for d in start_spot)
    _check_launches(request, groups, dists, restart_s)  # (a lower bound: before the speed table)
    # --precision auto: each GPU type at what practitioners train in on it (one precision:
    # the request's from here on; two: each group's step time at its own)
    by_gpu = {
        g.gpu: gpu_compute_precision(
            request.precision,
            has_bf16=catalog.gpu(g.gpu).bf16_tflops is not None,
            has_tf32=catalog.gpu(g.gpu).tf32_tflops is not None,
        )
        for g in groups
    }
    auto = request.precision in (AUTO_PRECISION, TF32)
    requested = request.precision
    if len(set(by_gpu.values())) == 1 and (one := next(iter(by_gpu.values()))) in PRECISIONS:
        request = dataclasses.replace(request, precision=one)
    assert request.region is not None  # (as above: replace() forgets the narrowing)
    efficiency = step_time_efficiency(request.software).value
    single: dict[str, tinputs.StepTime] = {}
    work = None
    works: dict[str, Any] = {}
    for prec in dict.fromkeys(by_gpu.values()):
        work_p = workload_inputs(
            request.workload, root, profiled_precision(prec), options=dict(request.workload_options)
        )
        works[prec] = work_p
        work = work or work_p  # bytes and tensors: the same at every precision
        at_prec = [g for g in groups if by_gpu[g.gpu] == prec]
        for name in dict.fromkeys(g.gpu for g in at_prec):
            # a GPU type measured itself: its own measurements; else the nearest batch's
            calibration, uncalibrated = None, ""
            if work_p.facts is not None:
                measured = measured_name(work_p.name, request.workload_options)
                calibration = store_calibration(
                    store, measured, measured_precision(prec), work_p.facts, catalog,
                    efficiency=efficiency, batch=request.batch_size,
                    prefer_gpu=catalog.gpu(name).name,
                )  # fmt: skip
                if calibration is None:
                    uncalibrated = uncalibrated_source(
                        store, measured, measured_precision(prec), catalog
                    )
            single.update(
                tinputs.step_times(
                    [g for g in at_prec if g.gpu == name], work_p, given_speed,
                    request.strategy, root, request.batch_size, prec, catalog, calibration,
                    efficiency=efficiency, uncalibrated=uncalibrated, software=request.software,
                )
            )  # fmt: skip
    assert work is not None  # groups is never empty
    # a batch that fits no GPU's memory is refused as plan train and predict train refuse it
    memory_notes = check_simulated_memory(
        request.strategy, work.name,
        {
            name: (works[by_gpu[name]].facts, catalog.gpu(name))
            for name, step in single.items()
            if step.batch_size is not None and works[by_gpu[name]].facts is not None
        },
        request.batch_size, sum(g.count for g in groups) * gpn,
    )  # fmt: skip
    model = cluster_model(root)
    perf = perf_params(root).value
    rdma = (cluster.shape.rdma if cluster is not None else False) or (
        request.instance in perf.rdma_instances
    )
    nvlink = all(catalog.gpu(g.gpu).interconnect_gbps is not None for g in groups)
    if cluster is not None:
        nvlink = cluster.shape.intra_node != "pcie"
    one_node = sum(g.count for g in groups) == 1  # its all-reduce never reaches the NICs

    ps_region = request.region  # narrowed above; a closure does not keep the narrowing

    def speed_table(scale: float = 1.0) -> tuple[Any, str]:
        """The cluster's speed with every worker's step ``scale`` times longer."""
        return tinputs.speed_table(
            groups,
            single,
            model.value,
            work,
            strategy=request.strategy,
            ps_shards=ps,
            ps_region=ps_region,
            network=network,
            rtt_s=request.inter_region_rtt_ms / 1e3,
            catalog=catalog,
            gpus_per_node=gpn,
            intra_node_gbps=intra_gbps,
            collective=perf.collective_for(rdma=rdma, nvlink=nvlink, one_node=one_node),
            step_scale=None if scale == 1.0 else (lambda live: [scale] * len(live)),
        )

    table, speed_src = speed_table()
    base_table = table  # before --elastic re-plans the batches
    synchronous = request.strategy != "ps-async"
    notes: list[str] = list(memory_notes)
    elastic_notes: tuple[Assumption, ...] = ()
    if request.elastic:
        assert curve is not None
        table, elastic_notes, elastic_text = elastic_speed(
            request, groups, gpn, table, curve, works, by_gpu, single, catalog, efficiency,
            lambda scale: tinputs.speed_table(
                groups, single, model.value, work, strategy=request.strategy, ps_shards=ps,
                ps_region=request.region or "", network=network,
                rtt_s=request.inter_region_rtt_ms / 1e3, catalog=catalog, gpus_per_node=gpn,
                intra_node_gbps=intra_gbps,
                collective=perf.collective_for(rdma=rdma, nvlink=nvlink, one_node=one_node),
                step_scale=scale,
            )[0],
        )  # fmt: skip
        notes.append(elastic_text)
    full_speed = float(table.table[tuple(g.count for g in groups)])
    if request.target is not None:
        extra, eval_note = _evaluation_steps(request, groups, gpn, total_steps, full_speed)
        total_steps += extra
        target_notes = (*target_notes, *(() if eval_note is None else (eval_note,)))
    if offers is not None:
        notes.append(f"prices: the built-in catalog plus the offers of {offers}")
    if (dear := tinputs.spot_above_on_demand(prices, groups)) is not None:
        notes.append(dear)
    if request.checkpoint_s is None:
        ckpt = spot_inputs.checkpoint_cost(work.checkpoint_bytes, root)
        ckpt_s, ckpt_src = ckpt.value, ckpt.source
    else:
        ckpt_s = request.checkpoint_s
        ckpt_src = f"--checkpoint-s {request.checkpoint_s:g} s per checkpoint"
    # an interval chosen here for the spot lifetimes (not given) is the spot job's alone
    young = every_s is None and every_steps is None and any(d is not None for d in dists)
    if every_s is not None:
        every_steps = max(1, round(every_s * full_speed))
        if every_steps > total_steps:
            raise InvalidSpecError(
                "checkpoint-every",
                f"is longer than the whole job (~{total_steps / full_speed / 3600:.2g} h at "
                f"{full_speed:.3g} steps/s)",
                got=request.checkpoint_every,
                fix="checkpoint more often, or drop --checkpoint-every",
            )
        notes.append(
            f"--checkpoint-every {request.checkpoint_every} = every {every_steps} steps at the "
            f"full cluster's {full_speed:.3g} steps/s"
        )
    elif young:
        # what rolls the job back: any node (synchronous; each revoked node is replaced
        # alone, its survivors keep their age), else the chief's node -- over the job's run:
        # young nodes go first where the shape is below 1 (QA 37 T #5)
        spot_dists = [(d, g.count) for d, g in zip(dists, groups, strict=True) if d is not None]
        run_s = total_steps / full_speed
        hazard = sum(c * window_hazard_per_s(d, run_s) for d, c in spot_dists)
        if not synchronous or request.elastic:
            hazard = window_hazard_per_s(spot_dists[0][0], run_s)
        tau = young_interval_s(ckpt_s, hazard)
        if math.isfinite(tau):
            every_steps = int(min(max(round(tau * full_speed), 1), total_steps))
            rule = (
                "Young's interval sqrt(2 C / hazard), the hazard the spot lifetimes give "
                "over the job's run"
            ) + (  # QA 39 K #13: the rule's hazard is one node's, said
                ", at one node's hazard (an elastic job rolls back only when every node is down "
                "at once, rarer: this checkpoints more often than it needs)"
                if request.elastic
                else ""
            )
            notes.append(
                f"checkpoint every {every_steps:,} steps ({tau / 60:.0f} min: {rule}; override "
                "with --checkpoint-every); the on-demand runs, never revoked, do not checkpoint"
                if every_steps < total_steps  # the last step saves nothing (QA 37 T #8)
                else f"no checkpoint within the job: {rule}, {tau / 60:.0f} min, is at least "
                f"the job ({total_steps:,} steps, ~{total_steps / full_speed / 60:.0f} min at "
                "full speed); a rollback restarts from step 0 (override with --checkpoint-every)"
            )
    if request.checkpoint_every is not None and every_steps is not None:
        notes.append(_given_interval_note(ckpt_s, every_steps, full_speed, spot=request.spot))
    if every_steps is None:  # what a loss costs without checkpoints (QA 35 E #23)
        ckpt_src += " (not used: no checkpoints; " + (
            "no node is revoked on demand)" if all(d is None for d in dists)
            else "losing any node restarts from step 0)" if synchronous and not request.elastic
            else "losing every node at once restarts from step 0)" if request.elastic
            else "a chief or PS loss restarts from step 0)" if ps
            else "a chief loss restarts from step 0)"
        )  # fmt: skip
    scenario = ClusterScenario(
        workers=groups,
        ps_count=ps,
        steps=total_steps,
        checkpoint_every_steps=every_steps,
        replace_revoked=request.replace,
        deadline_s=deadline_s,
        worker_loss_restarts=synchronous and not request.elastic,
        fallback_after_s=request.fallback_after_s,
        elastic=request.elastic,
        reshard_s=0.0 if not request.elastic else (
            request.reshard_s if request.reshard_s is not None
            else spot_inputs.restart_penalty(root).value
        ),
    )  # fmt: skip
    start_od = [startup(g.gpu, "on-demand", g.region) for g in groups]
    start_od.append(startup("cpu", "on-demand", request.region))
    _check_launches(
        request, groups, dists, restart_s + ckpt_s,
        steps=total_steps, every_steps=every_steps, steps_per_s=full_speed,
    )  # fmt: skip
    if synchronous and not request.elastic:
        notes.append(
            f"{request.strategy} is synchronous: losing any node rolls back to the last checkpoint"
        )
    elif request.elastic:
        notes.append(
            f"--elastic: a lost node only slows the job (no rollback, no wait for its "
            f"replacement) -- unless every node is down at once (back to the last checkpoint); "
            f"every change in ready nodes costs {scenario.reshard_s:.0f} s"
        )
    spread = gpu_variability(request.gpu_variability, store)
    compute_share = 1.0
    if spread.value is not None:
        n_gpus = sum(g.count * g.gpus for g in groups)
        paced = synchronous and not request.balance_batches
        slowdown = spread.value.slowdown(
            [n_gpus], sync=[paced], exclude=request.exclude_slowest,
            gpus_per_node=max(g.gpus for g in groups),
        )[0]  # fmt: skip
        # the share of a slowdown that reaches the step, read at the expected one: the
        # exposed communication does not stretch (plan train slows the compute alone)
        counts = tuple(g.count for g in groups)
        stretched = 1.0 / float(speed_table(float(slowdown))[0].table[counts])
        at_one = 1.0 / float(base_table.table[counts])
        compute_share = (
            min(1.0, max(0.0, (stretched / at_one - 1.0) / (slowdown - 1.0)))
            if slowdown > 1.0 + 1e-9 else 1.0
        )  # fmt: skip
        notes.append(
            "every run draws one speed factor per GPU ("
            + variability_assumption(spread, request.exclude_slowest, request.balance_batches).value
            + f"); expected slowdown x{float(slowdown):.3f} on {n_gpus:,} GPUs (the closed form "
            f"plan train multiplies a step's compute by; {compute_share:.0%} of it reaches the "
            "step, the exposed communication does not stretch)"
        )
    lo = min(s.lower_ratio for s in single.values())
    hi = max(s.upper_ratio for s in single.values())
    factors = strata(lo, hi)
    fastest = full_speed / min(factors) if factors else full_speed
    _check_finishes(
        total_steps, fastest, full_speed, scenario.horizon_s, sum(g.count for g in groups)
    )
    if len(factors) > 1:
        notes.append(
            f"the step time is the roofline model's (interval x{lo:.2f}..x{hi:.2f}): the runs "
            f"are split over {len(factors)} strata of that uncertainty, as plan train does; "
            f"P(miss deadline) counts them (the slowest at the interval's "
            f"{(len(factors) - 0.5) / len(factors):.1%} quantile: plan train's on-demand "
            "P(meet) also counts the tail beyond it, so it can be lower); give --speed "
            "(measured) to drop it"
        )

    def gaps(rule: spot_inputs.Lifetimes) -> list[Any]:
        """Capacity gaps of each group's spot replacements, and none for the PS."""
        out = [rule.capacity_gap(g.gpu, g.region, request.provider or "") for g in groups]
        return [*out, 0.0]

    def moved(rule: spot_inputs.Lifetimes) -> Any:
        """Where a replacement that waited for capacity goes (--move-region): that region's
        lifetimes (by ``rule``), capacity gaps, start-ups and prices; None: it stays."""
        from gpucast.simulate.transient import Move

        if request.move_region is None:
            return None
        there, provider = request.move_region, request.provider or ""
        known = catalog.regions(request.provider)
        if request.price_table is None and there.lower() not in {r.lower() for r in known}:
            from gpucast.domain.errors import UnknownRegionError

            raise UnknownRegionError(  # QA 39 K #4: the field is --move-region, not --region
                there, known, field="move-region", fix="see `gpucast catalog offers` for regions"
            )
        spot_usd, od_usd = [], []
        for g in groups:
            if request.price_table is not None:
                spot_usd.append(prices.price(g.gpu, spot=True, region=there))  # US$/h
                od_usd.append(prices.price(g.gpu, spot=False, region=there))
                continue
            offer = tinputs.gpu_offer(
                catalog, g.gpu, there, request.provider, gpus_per_node=gpn,
                instance_type=request.instance,
            )  # fmt: skip
            if offer is None or offer.spot_usd_per_hour is None:
                raise InvalidSpecError(
                    "move-region",
                    f"the catalog has no spot {catalog.gpu(g.gpu).name} offer in {there}",
                    got=there,
                    fix="pick a region with one (gpucast catalog offers --spot), or pass "
                    "--price-table CSV",
                )
            spot_usd.append(offer.spot_usd_per_hour)
            od_usd.append(offer.on_demand_usd_per_hour)
        return Move(
            region=there,
            after_s=request.move_after_s,
            lifetimes=[rule(g.gpu, there, provider) if g.spot else None for g in groups],
            spot_usd_per_hour=spot_usd,
            on_demand_usd_per_hour=od_usd,
            startup_spot_s=[*(startup(g.gpu, "spot", there) for g in groups), start_spot[-1]],
            capacity_gap_s=[*(rule.capacity_gap(g.gpu, there, provider) for g in groups), 0.0],
        )

    if request.move_region is not None:
        notes.append(
            f"a spot replacement that waited {request.move_after_s / 60:g} min for capacity is "
            f"launched in {request.move_region} (its lifetimes, gaps, start-ups and prices) and "
            "moves back the same way: 'moves' counts them"
        )

    def simulate(
        lifetime_per_group: list[Any],
        gap_per_group: list[Any],
        sources: dict[str, str],
        move: Any = None,
    ) -> SimulationResult:
        return simulate_scenario(
            scenario,
            speed=table,
            prices=prices,
            lifetimes=lifetime_per_group,
            startup_spot_s=start_spot,
            startup_on_demand_s=start_od,
            capacity_gap_s=gap_per_group,
            checkpoint_s=ckpt_s,
            restart_penalty_s=penalty.value,
            runs=request.runs,
            seed=request.seed,
            speed_factors=factors,
            variability=spread.value,
            exclude_slowest=request.exclude_slowest,
            balance_batches=request.balance_batches,
            compute_share=compute_share,
            sources=sources,
            notes=notes,
            move=move,
            # an interval chosen for the spot lifetimes does not apply on demand (QA 35 E #18)
            on_demand_checkpoint_every_steps=None if young else "same",
        )

    result = simulate(
        dists,
        gaps(lifetimes),
        {
            "lifetimes": lifetimes.source(),
            "workload": work.source,
            "speed": speed_src,
            "cluster_model": model.source,
            "startup": startup.source(),
            "checkpoint": ckpt_src,
            "restart_penalty": penalty.source,
            "gpu_variability": spread.source,
        },
        moved(lifetimes),
    )
    scenarios: dict[str, dict[str, float | None]] = {}
    on_scenario = [
        g.spot and lifetimes.rests_on_scenario(g.gpu, g.region, request.provider or "")
        for g in groups
    ]
    if any(on_scenario):
        other = "optimistic" if request.spot_scenario == "pessimistic" else "pessimistic"
        alt = lifetimes.with_scenario(other)
        alt_dists = [
            alt(g.gpu, g.region, request.provider or "") if g.spot else None for g in groups
        ]
        scenarios = {
            request.spot_scenario: _outcome(result),
            other: _outcome(simulate(alt_dists, gaps(alt), {}, moved(alt))),
        }
        named = (  # QA 37 T #11: the hint named --lifetimes to a job that had given it
            f"--lifetimes {lifetimes.named_scope(request.lifetimes)} covers "
            + ("none" if "named" not in lifetimes.kinds_used() else "only some")
            + " of this job's spot nodes; fit the others' data with gpucast fit lifetimes "
            "--provider P --gpu G"
            if request.lifetimes is not None
            else "gpucast fit lifetimes fits your own data; --lifetimes NAME uses it"
        )
        notes.append(
            f"no lifetime data for this provider and GPU: the result is the "
            f"{request.spot_scenario} scenario; the {other} one is beside it ('scenarios' in "
            f"--json) ({named})"
        )
    elif request.lifetimes is not None and request.spot and "named" not in lifetimes.kinds_used():
        notes.append(  # QA 39 K #11: the published fit replaced it without a word
            f"--lifetimes {lifetimes.named_scope(request.lifetimes)} covers none of this job's "
            "spot nodes, so it is not used (the lifetime lines say what each node drew); fit "
            "this job's data with gpucast fit lifetimes --provider P --gpu G"
        )
    gpus = sorted({catalog.gpu(g.gpu).name for g in groups})
    nodes = sum(g.count for g in groups)
    modelled = any(t.lower_ratio < 1.0 or t.upper_ratio > 1.0 for t in single.values())
    assumptions: tuple[Assumption, ...] = (
        Assumption(
            name="spot lifetimes",
            value="not used (on demand)"
            if not request.spot
            else f"{request.hazard_per_hour:g} revocations per node-hour"
            if request.hazard_per_hour is not None
            else "a named model where its scope applies, the published GCE lifetimes for GCP "
            f"GPUs they cover, else the {request.spot_scenario} scenario",
            source=lifetimes.source() if request.spot else "",
            override="--lifetimes NAME (gpucast fit lifetimes), --spot-scenario, "
            "--hazard-per-hour, --interruption-band, --spot-kind, --data-dir",
        ),
        Assumption(
            name="replacement",
            value="revoked nodes are replaced, as plan train assumes"
            if request.replace
            else "revoked nodes are not replaced (the job goes on with fewer)",
            source="default" if request.replace else "given (--no-replace)",
            override="--no-replace" if request.replace else "--replace (the default)",
        ),
        Assumption(
            name="checkpoint interval",
            value="none" if every_steps is None
            else "none within the job" if every_steps >= total_steps
            else f"every {every_steps:,} steps",
            source="given" if request.checkpoint_every else
            ("Young's interval from the lifetimes" if every_steps else "no revocations"),
            override="--checkpoint-every",
        ),
        *((notice_assumption(),) if request.spot else ()),
        auto_precision_assumption(
            {catalog.gpu(g).name: p for g, p in by_gpu.items()},
            requested=requested,
            units=half_units(catalog, gpus, every=True),
        )
        if auto
        else precision_assumption(
            request.precision,
            [(g, catalog.gpu(g).bf16_tflops is not None) for g in gpus],
            given=not is_default(request, "precision"),
            fp16_units="fp16" in half_units(catalog, gpus, every=True),
        ),
        Assumption(name="checkpoint cost", value=f"{ckpt_s:.2f} s", source=ckpt_src,
                   override="--checkpoint-s, --data-dir"),
        Assumption(name="start-up", value="per VM, sampled", source=startup.source(),
                   override="--data-dir"),
        Assumption(name="restart penalty", value=f"{penalty.value:.0f} s",
                   source=penalty.source, override="--data-dir"),
        Assumption(
            name="step time",
            value="roofline model (with its uncertainty)" if modelled else "measured",
            source="; ".join(f"{g}: {s.source}" for g, s in single.items()),
            override="--speed, gpucast measure train (stores a calibration)",
        ),
        Assumption(name="cluster model", value=request.strategy, source=model.source,
                   override="--data-dir"),
        *target_notes,
        *elastic_notes,
    )  # fmt: skip
    if cluster is not None:
        from gpucast.domain.systems import NO_PRICE_NOTE
        from gpucast.inputs.clusters import cluster_assumption

        assumptions = (cluster_assumption(cluster), *assumptions)
        if not cluster.priced:
            notes.append(NO_PRICE_NOTE)
    return dataclasses.replace(
        result,
        notes=tuple(notes),
        assumptions=assumptions,
        validation=_validation(
            request,
            gpus,
            nodes * gpn,
            modelled,
            "+".join(dict.fromkeys(by_gpu.values())),
            lifetimes.few_revocations(named_source=True),
            lifetimes.not_published(),
        ),
        scenarios=scenarios,
    )
