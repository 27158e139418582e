"""``gpucast.plan_train``: the cheapest (or fastest) cluster for a training job, explained.

Gathers the planner's inputs through :mod:`gpucast.inputs` -- the workload's profile (or a
stored one: ``workload="run:ID"``), a stored measurement that calibrates the step time,
spot lifetimes, start-up delays, the restart penalty, the checkpoint cost and the PS
constants, each with its source -- runs :func:`gpucast.plan.train.plan_training` and returns
the :class:`~gpucast.domain.plan.TrainPlan` with every assumption (and the flag that changes
it) and every model's validated error *in the regime of each candidate*.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast._version import __version__
from gpucast.app._request import resolve
from gpucast.app._stored_run import stored_profile, with_stored_run
from gpucast.app._units import gpus_with_units, half_units, skipped_assumption
from gpucast.app._workers import usable_cpus, worker_failures, worker_pool
from gpucast.domain.catalog import OWN_UNIT_PRECISIONS
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.offload import optimizer_state_note
from gpucast.domain.options import is_default
from gpucast.domain.plan import ModelInfo, PlanCandidate, TrainPlan, TrainRequest
from gpucast.domain.provenance import Assumption
from gpucast.domain.workload import (
    AUTO_PRECISION,
    FP8,
    TF32,
    TRAIN_PRECISION_CHOICES,
    auto_precision_assumption,
    gpu_compute_precision,
    measured_precision,
    precision_assumption,
    profiled_precision,
)
from gpucast.inputs.workload import measured_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpucast.domain.provenance import Sourced
    from gpucast.domain.systems import ClusterSpec
    from gpucast.inputs.spot import Lifetimes
    from gpucast.plan.inputs import GpuPrecision, PerfParams, RiskInputs, WorkloadFacts
    from gpucast.predict.convergence import ConvergenceCurve
    from gpucast.predict.roofline import Calibration, RooflineEfficiency


def plan_train(
    request: TrainRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    config: Path | str | None = None,
    **options: Any,
) -> TrainPlan:
    """Plan a training job (see :class:`~gpucast.domain.plan.TrainRequest` for the options).

    ``db`` is the measurement store (default: ``$GPUCAST_DB`` or the user store): stored
    training measurements of the workload calibrate the step time, and ``workload="run:ID"``
    plans from a stored profile or measurement.
    """
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.domain.convergence import parse_target
    from gpucast.inputs.calibration import step_time_efficiency, store_calibration
    from gpucast.inputs.cluster import perf_params
    from gpucast.inputs.clusters import grid_intensities, node_link_gbps, request_cluster
    from gpucast.inputs.convergence import target_evaluations
    from gpucast.inputs.data import published_data_dir
    from gpucast.inputs.energy import plan_power
    from gpucast.inputs.offload import cpu_adam, extrapolation_warning
    from gpucast.inputs.spot import spot_risk_inputs
    from gpucast.inputs.variability import gpu_variability, variability_assumption
    from gpucast.inputs.workload import (
        check_workload_name,
        profile_origin,
        workload_facts,
        workload_profile,
    )
    from gpucast.plan.inputs import GpuPrecision, OffloadSetting
    from gpucast.plan.train import PlanContext, plan_training, planned_gpus
    from gpucast.store.db import default_db_path

    request = resolve(TrainRequest, request, options, config)
    store = Path(db) if db is not None else default_db_path()
    run = with_stored_run(request, store)  # run:ID: its profile or measurement
    request, stored, stored_precision = run
    if stored is None and request.profile_file is None:
        check_workload_name(request.workload, profile_option=True)
    request, work_assumptions = _with_work_defaults(request)
    offers = offers_file(request.offers_file)
    catalog = load_catalog(offers)
    cluster = request_cluster(request, catalog)
    grid, grid_source = grid_intensities(cluster)
    data_dir = published_data_dir(request.data_dir)
    # --precision auto: each GPU type the search evaluates trains in what practitioners use
    # on it (tf32: TF32 where it has the units); the workload is profiled once per precision
    # that needs (cached)
    by_gpu: dict[str, str] = {}
    units_skipped: tuple[str, ...] = ()
    if request.precision in OWN_UNIT_PRECISIONS:  # the GPU types with its units
        request, units_skipped = gpus_with_units(
            request, catalog, cluster, request.precision, choices=TRAIN_PRECISION_CHOICES
        )
    if request.precision == FP8:  # each at fp8
        by_gpu = dict.fromkeys(planned_gpus(request, catalog, cluster), FP8)
    elif request.precision in (AUTO_PRECISION, TF32):
        by_gpu = {
            name: gpu_compute_precision(
                request.precision,
                has_bf16=catalog.gpu(name).bf16_tflops is not None,
                has_tf32=catalog.gpu(name).tf32_tflops is not None,
            )
            for name in planned_gpus(request, catalog, cluster)
        }
    profiled = sorted(
        {profiled_precision(p) for p in by_gpu.values()} or {profiled_precision(request.precision)},
        key=lambda p: p != "fp32",  # fp32 first: the facts of a plan with any fp32 GPU
    )
    if stored is not None and stored.profile is not None and request.profile_file is None:
        prof = stored_profile(stored, profiled_precision(request.precision), request.precision)
        profiles = {prof.precision: prof}
    else:
        profiles = {
            p: workload_profile(
                request.workload,
                p,
                request.profile_file,
                options=dict(request.workload_options),
            )
            for p in (profiled[:1] if request.profile_file is not None else profiled)
        }
        prof = next(iter(profiles.values()))
    kept = None  # why --precision auto kept one precision everywhere
    need = {TF32: "an fp32", FP8: "a bf16"}.get(request.precision)  # a profile at it
    if need is not None and prof.precision != profiled_precision(request.precision):
        raise InvalidSpecError(
            "precision",
            f"{request.precision} trains {need} profile; --profile {request.profile_file} is "
            f"{prof.precision}",
            got=request.precision,
            fix=f"drop --precision or give --precision {prof.precision}",
        )
    if request.precision == AUTO_PRECISION and request.profile_file is not None:
        kept = f"the precision of --profile {request.profile_file}"
        request = dataclasses.replace(request, precision=prof.precision)
        by_gpu = {name: prof.precision for name in by_gpu}
    facts_by = {p: workload_facts(q) for p, q in profiles.items()}
    facts = facts_by[prof.precision]
    efficiency = step_time_efficiency(request.software)
    # an fp8 step is calibrated by no bf16 measurement (domain.workload.measured_precision)
    measured_at = measured_precision(FP8) if request.precision == FP8 else None
    measured = measured_name(request.workload, request.workload_options)
    calibrations = {
        p: store_calibration(
            store,
            measured,
            measured_at or p,
            f,
            catalog,
            prefer_run=None if stored is None else stored.measurement_run,
            efficiency=efficiency.value,
            batch=request.batch_size,  # a fixed per-worker batch: the nearest measurement
        )
        for p, f in facts_by.items()
    }
    calibration = calibrations[prof.precision]
    per_gpu = {
        name: GpuPrecision(
            precision=p,
            facts=facts_by[profiled_precision(p)],
            calibration=None if (cal := calibrations[profiled_precision(p)]) is None else cal.value,
        )
        for name, p in by_gpu.items()
        if kept is None
    }
    own: dict[str, tuple[GpuPrecision, str]] = {}
    if stored is None or stored.measurement_run is None:  # a measured GPU type: its own
        own = _own_gpu_calibrations(
            store, request, catalog, facts_by, by_gpu if kept is None else {},
            prof.precision, efficiency.value,
        )  # fmt: skip
        per_gpu.update({name: choice for name, (choice, _) in own.items()})
    request, curve, efficiency_notes = _work_curve(request, store, data_dir)
    evaluation, eval_note = (
        (None, None) if request.target is None else target_evaluations(parse_target(request.target))
    )
    risk, lifetimes, startup = spot_risk_inputs(
        data_dir=data_dir, catalog=catalog, store=store, band=request.interruption_band,
        hazard_per_hour=request.hazard_per_hour, scenario=request.spot_scenario,
        lifetimes=request.lifetimes, fallback_after_s=request.fallback_after_s,
        move_region=request.move_region, move_after_s=request.move_after_s,
        checkpoint_bytes=facts.weights_bytes + facts.optimizer_bytes,
    )  # fmt: skip
    perf = perf_params(data_dir)
    spread = gpu_variability(request.gpu_variability, store)
    power, power_note = plan_power(
        request, catalog, facts, efficiency.value, planned_gpus(request, catalog, cluster)
    )
    adam = cpu_adam(store)
    # (a one-GPU row's host steps all the parameters: fp32 weights, 4 B each)
    adam_warning = extrapolation_warning(adam.value, facts.weights_bytes / 4.0)
    perf = dataclasses.replace(
        perf,
        value=dataclasses.replace(
            perf.value,
            variability=spread.value,
            exclude_slowest=request.exclude_slowest,
            balance_batches=request.balance_batches,
            power=power.value,
            offload=OffloadSetting(
                cpu_adam=adam.value, source=adam.source, nvme_gbps=request.nvme_gbps
            ),
        ),
    )
    assumptions = (
        Assumption(
            name="catalog",
            value=f"built-in offers, snapshot {catalog.snapshot_date.isoformat()}"
            + ("" if offers is None else f", plus the offers of {offers}"),
            source="gpucast/catalog/data/offers.csv (a source URL and date per row)"
            + ("" if offers is None else f"; {offers}"),
            override="--offers FILE or $GPUCAST_OFFERS (gpucast catalog import-skypilot)",
        ),
        *work_assumptions,
        *efficiency_notes,
        *(() if eval_note is None else (eval_note,)),
        Assumption(
            name="workload profile",
            value=f"{prof.workload} profiled at batch {prof.batch_size}, "
            f"{' and '.join(profiles)}; FLOPs, bytes and activations scaled linearly with "
            f"the batch; {optimizer_state_note(prof.memory.optimizer, measured)}",
            source=(profile_origin(prof) or "profiler")
            if stored is None
            else f"store run #{stored.run_id}",
            override="--profile",
        ),
        Assumption(
            name="step-time model",
            value=f"roofline, {request.software} software stack",
            source=efficiency.source,
            override="--software, gpucast fit steptime",
        ),
        _calibration_assumption(
            calibrations,
            measured_name(request.workload, request.workload_options),
            store,
            catalog,
            {n: src for n, (_, src) in own.items()},
            measured_at=measured_at,
        ),
        _deadline_assumption(request),
        Assumption(
            name="start-up",
            value=f"{risk.startup_mean_s:.0f} s mean per VM",
            source=startup.source(),
            override="--data-dir",
        ),
        Assumption(
            name="parameter server",
            value="asynchronous; PS shards are on-demand CPU servers (>= 4 vCPUs) of the same "
            "region; gradient staleness is not modelled",
        ),
        *_spot_assumptions(request, risk, facts, lifetimes),
        Assumption(
            name="performance constants",
            value=_perf_text(perf.value),
            source=perf.source,
            override="--data-dir",
        ),
        variability_assumption(spread, request.exclude_slowest, request.balance_batches),
        Assumption(
            name="offload",
            value="a DDP/FSDP candidate that fits no GPU memory otherwise keeps its optimizer "
            "state in host memory (ZeRO-Offload, partitioned over the GPUs): gradients down "
            "and weights up over PCIe x16, the optimizer step on the host CPU (at the CPU Adam "
            "model's bandwidth), no delayed "
            "parameter update; host memory per GPU = instance memory / GPUs"
            + (
                "; no NVMe tier"
                if request.nvme_gbps is None
                else f"; where host memory is short, master weights and optimizer state on "
                f"the node's NVMe at {request.nvme_gbps:g} GB/s shared by its GPUs, read "
                "and written each step (ZeRO-Infinity; its capacity is not checked)"
            )
            + (f"; on one GPU {adam_warning}" if adam_warning else ""),
            source=adam.source,
            override="gpucast measure optimizer (on the training host), --nvme-gbps",
        ),
        Assumption(
            name="power and energy",
            value=power_note,
            source=power.source,
            override="--power-limit W|auto, --eta, --pue, gpucast fit power",
        ),
        Assumption(
            name="grid carbon intensity",
            value="per region (gCO2e/kWh): Google's own figures for GCP, US EPA eGRID "
            "subregions for AWS/Azure in the US, Ember national averages elsewhere"
            if cluster is None or cluster.grid_gco2e_per_kwh is None
            else grid_source,
            source=grid_source,
            override="grid_gco2e_per_kwh in a --cluster file",
        ),
    )
    ctx = PlanContext(
        grid_gco2e_per_kwh=grid,
        pue=request.pue,
        catalog=catalog,
        facts=facts,
        perf=perf.value,
        risk=risk,
        calibration=None if calibration is None else calibration.value,
        efficiency=efficiency.value,
        assumptions=assumptions if cluster is None else _on_cluster(assumptions, cluster),
        cluster=cluster,
        work_curve=curve,
        evaluation=evaluation,
        per_gpu=per_gpu,
        node_link_gbps=node_link_gbps(catalog, cluster),
    )
    jobs = request.jobs or usable_cpus()
    with worker_failures():
        plan = plan_training(request, ctx, executor=worker_pool(jobs), workers=jobs)
    candidates = tuple(
        _with_validation(c, c.precision or request.precision, lifetimes) for c in plan.candidates
    )
    best = None if plan.recommended is None else candidates[plan.recommended]
    best_precision = request.precision if best is None else best.precision or request.precision
    best_calibration = calibrations.get(
        profiled_precision(best_precision), calibration
    )  # a mixed-precision pick: its first precision's (facts) calibration
    models = (
        *_models(
            best,
            best_precision,
            calibrated=None if best_calibration is None else best_calibration.source,
            lifetimes=lifetimes,
            perf=perf.value,
            risk=risk,
        ),
        _efficiency_model(curve, efficiency_notes, best_precision),
    )
    # what the Monte Carlo actually drew is known only now
    late = {
        "start-up": startup.source(),
        "spot lifetimes": lifetimes.source()
        + ("" if (thin := lifetimes.few_revocations()) is None else f"; {thin}"),
    }
    assumed = tuple(
        dataclasses.replace(a, source=late[a.name]) if a.name in late else a
        for a in plan.assumptions
    )
    if by_gpu:
        units = half_units(catalog, list(by_gpu), every=False)
        assumed += (
            auto_precision_assumption(by_gpu, fixed=kept, requested=request.precision, units=units),
        )
        slow = _fp32_path_priced(by_gpu, profiles, catalog, efficiency.value)
        if slow is not None:
            assumed += (slow,)
    elif stored is not None and stored_precision:
        planned = planned_gpus(request, catalog, cluster)
        assumed += (
            auto_precision_assumption(
                {g: request.precision for g in planned},
                fixed=f"store run #{stored.run_id} was profiled at {request.precision}",
                units=half_units(catalog, list(planned), every=False),
            ),
        )
    else:
        names = sorted({g for c in candidates for g in c.gpu.split("+")})
        assumed += (
            precision_assumption(
                request.precision,
                [(g, catalog.gpu(g).bf16_tflops is not None) for g in names],
                given=True,
                fp16_units="fp16" in half_units(catalog, names, every=False),
            ),
        )
    if units_skipped:
        assumed += (skipped_assumption(request.precision, units_skipped),)
    return dataclasses.replace(plan, candidates=candidates, models=models, assumptions=assumed)


def _fp32_path_priced(
    by_gpu: Mapping[str, str],
    profiles: Mapping[str, Any],
    catalog: Any,
    efficiency: RooflineEfficiency,
) -> Assumption | None:
    """The GPUs ``--precision auto`` trains in half precision whose matrix work is priced on
    their FP32 units, the fitted tensor-core path being slower there (``predict train`` notes
    each), or None."""
    from gpucast.predict.roofline import RooflineWorkload, fp32_path_priced

    slow = []
    for name, precision in sorted(by_gpu.items()):
        profile = profiles.get(profiled_precision(precision))
        if profile is None:
            continue
        work = RooflineWorkload.from_profile(profile)
        ratio = fp32_path_priced(work, catalog.gpu(name), precision, efficiency)
        if ratio is not None:
            slow.append(f"{name} ({precision}: tensor-core path x{ratio:.2f})")
    if not slow:
        return None
    return Assumption(
        name="half precision at FP32 rate",
        value=f"on {', '.join(slow)} the matrix work is priced on the GPU's FP32 units, as "
        "cuDNN/cuBLAS keep the faster kernel: the tensor-core efficiencies are fitted on "
        "systems whose half-precision peak is 4-15x the FP32 one, and would price it slower; "
        "only the halved memory traffic is gained",
        source=efficiency.source,
        override="a measurement: gpucast measure train --precision bf16",
    )


def _own_gpu_calibrations(
    store: Path,
    request: TrainRequest,
    catalog: Any,
    facts_by: Mapping[str, WorkloadFacts],
    by_gpu: Mapping[str, str],
    precision: str,
    efficiency: RooflineEfficiency,
) -> dict[str, tuple[GpuPrecision, str]]:
    """Per catalog GPU type with stored measurements of the workload on it: its own
    calibration and where it comes from (the plan's default calibration may come from another
    GPU's measurement)."""
    from gpucast.domain.errors import UnknownGpuError
    from gpucast.inputs.calibration import measured_gpus, store_calibration
    from gpucast.plan.inputs import GpuPrecision

    out: dict[str, tuple[GpuPrecision, str]] = {}
    measured = measured_name(request.workload, request.workload_options)
    for p in dict.fromkeys([precision, *(profiled_precision(q) for q in by_gpu.values())]):
        for name in measured_gpus(store, measured, p):
            try:
                spec = catalog.gpu(name)
            except UnknownGpuError:
                continue
            wanted = by_gpu.get(spec.name, precision)
            if measured_precision(wanted) != p or spec.name in out:
                continue
            cal = store_calibration(
                store, measured, p, facts_by[p], catalog,
                efficiency=efficiency, batch=request.batch_size, gpu=spec.name,
            )  # fmt: skip
            if cal is not None:
                choice = GpuPrecision(precision=wanted, facts=facts_by[p], calibration=cal.value)
                out[spec.name] = (choice, cal.source)
    return out


def _calibration_assumption(
    calibrations: Mapping[str, Sourced[Calibration] | None],
    workload: str,
    store: Path,
    catalog: Any,
    own: Mapping[str, str] | None = None,
    *,
    measured_at: str | None = None,
) -> Assumption:
    """Which stored measurement calibrates the step time, per precision profiled (and per GPU
    type measured itself: ``own``, its source); where none does, why (a CPU's calibrates no
    GPU: :func:`gpucast.inputs.calibration.uncalibrated_source`). ``measured_at``: the
    precision the measurements were looked up at, where not the profiled one (fp8)."""
    from gpucast.inputs.calibration import uncalibrated_source

    mine = "".join(f"; {name}: its own, {src}" for name, src in (own or {}).items())

    def said(cal: Sourced[Calibration] | None) -> str:
        if cal is None:
            return "none (the fitted roofline alone)"
        if cal.value.batch_size is None:
            return "calibrated"
        return (
            f"calibrated at batch {cal.value.batch_size}; each candidate's interval is the one "
            "validated for its batch's distance from it (wider beyond 2x)"
        )

    if len(calibrations) == 1:
        ((precision, cal),) = calibrations.items()
        return Assumption(
            name="step-time calibration",
            value=said(cal),
            source=(
                cal.source
                if cal is not None
                else uncalibrated_source(store, workload, measured_at or precision, catalog)
            )
            + mine,
            override="gpucast measure train (stores one)",
        )
    value = "; ".join(f"{p}: {said(c)}" for p, c in calibrations.items())
    source = "; ".join(
        f"{p}: {c.source}"
        if c is not None
        else f"{p}: {uncalibrated_source(store, workload, p, catalog)}"
        for p, c in calibrations.items()
    )
    return Assumption(
        name="step-time calibration",
        value=value,
        source=source + mine,
        override="gpucast measure train --precision P (stores one)",
    )


def _with_work_defaults(request: TrainRequest) -> tuple[TrainRequest, tuple[Assumption, ...]]:
    """Epochs and dataset size from the workload family where the request has neither."""
    from gpucast.domain.convergence import parse_target
    from gpucast.plan.efficiency import workload_family

    fam = workload_family(request.workload)
    spec = None if request.target is None else parse_target(request.target)
    changes: dict[str, Any] = {}
    notes: list[Assumption] = []
    if spec is None and request.epochs is None and request.steps is None:
        if fam.default_epochs is None:
            raise InvalidSpecError(
                "epochs",
                f"has no default for {request.workload} (no convergence data or target given)",
                fix="give --target mlperf:NAME|zeus:NAME|90epochs@256, or --epochs N "
                "--dataset-size M (or --steps N)",
            )
        changes["epochs"] = fam.default_epochs
        notes.append(
            Assumption(
                name="epochs",
                value=f"{fam.default_epochs:g} at the reference batch",
                source=f"{fam.family} family default ({fam.source})",
                override="--target, --epochs or --steps",
            )
        )
    in_epochs = (spec is None and (request.epochs is not None or "epochs" in changes)) or (
        spec is not None and spec.kind == "epochs"
    )
    if in_epochs and request.dataset_size is None:
        if fam.default_dataset_size is None:
            raise InvalidSpecError(
                "dataset-size",
                f"has no default for {request.workload}",
                fix="e.g. --dataset-size 1000000",
            )
        changes["dataset_size"] = fam.default_dataset_size
        notes.append(
            Assumption(
                name="dataset size",
                value=f"{fam.default_dataset_size:,} samples per epoch",
                source=f"{fam.family} family default",
                override="--dataset-size",
            )
        )
    if spec is None:
        notes.append(
            Assumption(
                name="reference batch",
                value=f"{request.reference_batch or fam.reference_batch}: the batch the "
                + (
                    f"--steps {request.steps:,} are steps of ({request.steps:,} x "
                    f"{request.reference_batch or fam.reference_batch:,} samples)"
                    if request.steps is not None
                    else "epochs were tuned for"
                )
                + "; other global batches need the samples the statistical efficiency below "
                "gives",
                source="given"
                if request.reference_batch
                else f"{fam.family} family ({fam.source})",
                override="--reference-batch, --target",
            )
        )
    return dataclasses.replace(request, **changes), tuple(notes)


def _work_curve(
    request: TrainRequest, store: Path, data_dir: Path | None
) -> tuple[TrainRequest, ConvergenceCurve, tuple[Assumption, ...]]:
    """Samples to target at every global batch (:func:`gpucast.inputs.convergence.work_curve`),
    with the samples per epoch a convergence table brings when the request has none."""
    from gpucast.domain.convergence import TargetSpec, parse_target
    from gpucast.inputs.convergence import stored_noise_scale, work_curve
    from gpucast.plan.efficiency import workload_family

    fam = workload_family(request.workload)
    ref = request.reference_batch or fam.reference_batch
    if request.target is not None:
        spec = parse_target(request.target)
    elif request.steps is not None:
        spec = TargetSpec(
            kind="samples",
            text=f"{request.steps} steps at {ref}",
            amount=float(request.steps) * ref,
            batch=ref,
        )
    else:
        assert request.epochs is not None  # _with_work_defaults gave one
        spec = TargetSpec(
            kind="epochs", text=f"{request.epochs:g} epochs", amount=request.epochs, batch=ref
        )
    noise = None
    if not spec.table and request.critical_batch is None:
        noise = stored_noise_scale(store, request.workload)
    curve, epoch, notes = work_curve(
        spec=spec,
        workload_family=fam.family,
        family_critical_batch=fam.critical_batch,
        family_source=fam.source,
        critical_batch=request.critical_batch,
        dataset_size=request.dataset_size,
        data_dir=data_dir,
        noise=noise,
        workload=request.workload,
    )
    if request.dataset_size is None and epoch is not None:
        request = dataclasses.replace(request, dataset_size=round(epoch))
    if len(curve.knot_batch) > 1:
        notes = tuple(
            dataclasses.replace(
                a,
                value=f"{a.value}; the per-run spread widens each plan's time interval and "
                "P(meet deadline)",
            )
            for a in notes
        )
    if request.lr_rule is not None:
        curve, rule_note = lr_rule_curve(curve, request.lr_rule, request.optimizer, fam)
        notes = (*notes, rule_note)
    return request, curve, notes


def lr_rule_curve(
    curve: ConvergenceCurve,
    rule: str,
    optimizer: str | None,
    fam: Any,
    tuned_batch: float | None = None,
) -> tuple[ConvergenceCurve, Assumption]:
    """``curve`` under learning-rate ``rule`` (:mod:`gpucast.predict.lr_scaling`), the step
    tuned at ``tuned_batch`` (default: the curve's reference batch), and the assumption that
    says so; a curve measured under its own fixed rule (Zeus) keeps it."""
    from gpucast.predict.lr_scaling import SOURCE, optimizer_family

    own = curve.lr
    if own is not None and own.baseline != "tuned":
        if rule not in ("auto", own.baseline):
            raise InvalidSpecError(
                "lr-rule",
                f"the target's seeds were measured with {own.optimizer} at the {own.baseline} "
                "learning-rate rule, and where its step was tuned is not identifiable from "
                f"them: {rule} cannot be priced from this curve",
                fix="drop --lr-rule, or give the work as --target Nepochs@B at the batch your "
                "learning rate was tuned for",
            )
        return curve, Assumption(
            name="learning rate",
            value=f"the data's own: {own.optimizer}, {own.baseline} rule (--lr-rule {rule})",
            source=curve.source,
            override="--target",
        )
    family = optimizer_family(optimizer or fam.optimizer)
    out = curve.with_lr_rule(rule, family, tuned_batch)
    assert out.lr is not None
    what = {
        "auto": f"auto: the {family} optimizer's own rule "
        f"({'linear' if family == 'sgd' else 'sqrt'}) while it costs at most 1% more samples "
        "than a tuned run, AdaScale beyond",
        "tuned": "re-tuned at every batch (the curve as it is)",
        "adascale": "AdaScale's gain ratio (the noise-scale law itself)",
    }.get(rule, f"the {rule} rule from the step tuned at global batch {out.lr.tuned_batch:,.0f}")
    return out, Assumption(
        name="learning rate",
        value=f"{what}; {family} optimizer"
        + ("" if optimizer else f" ({fam.family} family default)"),
        source=SOURCE,
        # the batch the step was tuned at: --reference-batch is refused beside --target (QA
        # 39 Y #9), where the batch after @ is it
        override="--lr-rule, --optimizer, the tuned batch (--target Nepochs@B's B, or "
        "--reference-batch with --epochs)",
    )


def _spot_assumptions(
    request: TrainRequest, risk: RiskInputs, facts: WorkloadFacts, lifetimes: Lifetimes
) -> tuple[Assumption, ...]:
    """What spot servers alone rest on; an on-demand plan (``--no-spot``) lists none of it
    (QA 41 S: it listed lifetimes, recovery and checkpoints it never used)."""
    from gpucast.inputs.spot import notice_assumption

    if not request.allow_spot:
        return ()
    return (
        Assumption(
            name="restart penalty",
            value=f"{risk.restart_penalty_s:.0f} s",
            source=risk.sources["restart"],
            override="--data-dir",
        ),
        Assumption(
            name="checkpoint",
            value=f"{risk.checkpoint_s(facts):.1f} s per checkpoint; interval by Young's formula",
            source=risk.sources["checkpoint"],
            override="--data-dir",
        ),
        notice_assumption(),
        Assumption(
            name="DDP/FSDP on spot",
            value="losing any node rolls the job back to its last checkpoint",
        ),
        Assumption(
            name="spot lifetimes",
            value=f"{request.hazard_per_hour:g} revocations per node-hour"
            if request.hazard_per_hour is not None
            else (
                f"the named model {lifetimes.named_scope(request.lifetimes)} where it applies"
                if request.lifetimes is not None
                else "a named model where its scope applies"
            )
            + ", the published GCE lifetimes for GCP "
            f"GPUs they cover, else the {request.spot_scenario} scenario (plans rank by it "
            "and show the other)"
            + (
                f"; a replacement that waits {request.fallback_after_s / 60:g} min for spot "
                "capacity launches on demand (--fallback-after)"
                if request.fallback_after_s is not None
                else ""
            ),
            source=lifetimes.fitted_on,
            override="--lifetimes NAME (gpucast fit lifetimes), --spot-scenario, "
            "--hazard-per-hour, --interruption-band, --data-dir",
        ),
        Assumption(
            name="managed recovery",
            value="replacements stay in their region"
            if request.move_region is None
            else f"a spot replacement that waited {request.move_after_s / 60:g} min for "
            "capacity is launched in "
            + (
                "the region of its provider with the cheapest spot price for the same instance type"
                if request.move_region.strip().lower() == "auto"
                else request.move_region
            )
            + " (its lifetimes, gaps, start-ups and prices) and moves back the same way; "
            "clusters of two instance types stay",
            source="SkyPilot managed spot jobs (failover across regions)",
            override="--move-region auto|REGION, --move-after",
        ),
    )


def _deadline_assumption(request: TrainRequest) -> Assumption:
    if request.deadline_s is None:
        return Assumption(name="deadline", value="none", source="given", override="--deadline")
    default = is_default(request, "deadline_s")
    return Assumption(
        name="deadline",
        value=f"{request.deadline_s / 3600:g} h",
        source="default" if default else "given",
        override="--deadline (e.g. 12h, or none)",
    )


def _perf_text(perf: PerfParams) -> str:
    """The collective constants a plan's communication rests on, priors named as priors."""
    rdma, tcp = perf.collective_rdma, perf.collective_tcp
    return (
        f"all-reduce on RDMA networks at nominal link bandwidth ({rdma.algorithm}; "
        f"{rdma.hop_latency_s * 1e6:g} us a hop), inside a node over NVLink at its datasheet "
        "rate and over PCIe at NCCL's figure for the group (catalog pcie_allreduce.csv; "
        "NVLink-bridged cards beyond a pair too), on TCP at "
        f"{tcp.network_efficiency:.0%} of "
        f"nominal with {tcp.latency_s * 1e3:.3g} ms a step (fitted on Pollux T4 runs); "
        f"{perf.overlap_fraction:.0%} of a data-parallel step's communication hidden behind "
        "its backward pass (an uncalibrated prior, not measured); parameter servers as fitted "
        "on CM-DARE"
    )


def _regime(c: PlanCandidate) -> tuple[list[str], int]:
    gpus = [p.gpu for p in c.parts] or c.gpu.split("+")
    return gpus, c.gpus


def _validations(
    c: PlanCandidate, precision: str, lifetimes: Lifetimes | None = None
) -> dict[str, str]:
    from gpucast.catalog.validation import validation_for

    gpus, n = _regime(c)
    comm = {"ddp": "allreduce", "fsdp": "fsdp", "ps": "ps-cluster", "ps-sync": "ps-cluster"}
    out = {
        "step time (roofline)": validation_for("roofline-step", gpus, precision, 1).text(),
        f"scaling ({c.strategy})": validation_for(
            comm.get(c.strategy, c.strategy), gpus, precision, n
        ).text(),
    }
    if c.market == "spot":
        # in GPUs, as simulate train and the scaling line count them (an 8-GPU node: 8)
        spot = validation_for("spot-training", gpus, precision, n)
        other = None
        if spot.validated and lifetimes is not None:  # validated on the published lifetimes
            other = lifetimes.not_published([lifetimes.kind(g, c.region, c.provider) for g in gpus])
        out["spot simulation"] = "; ".join(filter(None, [spot.text(), other]))
    if c.energy_kwh is not None:
        # the board power behind kWh and kg CO2e, per GPU as predict energy states it
        out["power model (energy)"] = validation_for("power-model", gpus, precision, 1).text()
    if "offload" in c.memory_plan:
        # the host's Adam step (the offload's own model); PCIe and overlap are not validated
        out["offload: CPU Adam step"] = validation_for("cpu-adam", ["cpu"], "fp32").text()
    return out


def _with_validation(
    c: PlanCandidate, precision: str, lifetimes: Lifetimes | None = None
) -> PlanCandidate:
    return dataclasses.replace(c, validation=_validations(c, precision, lifetimes))


def _models(
    best: PlanCandidate | None,
    precision: str,
    *,
    calibrated: str | None,
    lifetimes: Lifetimes,
    perf: PerfParams,
    risk: RiskInputs,
) -> tuple[ModelInfo, ...]:
    """The models behind the plan, validated in the regime of the recommended plan."""
    from gpucast.catalog.validation import validation_for

    gpus, n = ([], 1) if best is None else _regime(best)
    nodes = 1 if best is None else best.nodes

    def info(name: str, key: str, fitted_on: str, workers: int) -> ModelInfo:
        return ModelInfo(
            name=name,
            version=__version__,
            fitted_on=fitted_on,
            validation=validation_for(key, gpus, precision, workers),
        )

    return (
        info(
            "roofline step time (predict.roofline)",
            "roofline-step",
            calibrated or "catalog specs only (uncalibrated; no measurement in the store)",
            1,
        ),
        info("async parameter server, MVA (predict.cluster)", "ps-cluster", perf.source, n),
        info(
            "ring all-reduce / FSDP (predict.comm)",
            "allreduce",
            "not fitted: physics with the catalog's link speeds and "
            f"{perf.overlap_fraction:.0%} overlap",
            n,
        ),
        info("checkpoint cost (predict.overheads)", "checkpoint", risk.sources["checkpoint"], 1),
        info("spot lifetimes (predict.revocation)", "spot-training", lifetimes.source(), nodes),
        info(
            "transient Monte Carlo (simulate.transient)",
            "spot-training",
            f"start-up: {risk.sources['startup']}; restart: {risk.sources['restart']}",
            nodes,
        ),
    )


def _efficiency_model(
    curve: ConvergenceCurve, notes: tuple[Assumption, ...], precision: str
) -> ModelInfo:
    """The statistical-efficiency model behind the samples to target, with its validated
    error: fitted on a convergence table, or one figure and a critical batch."""
    from gpucast.catalog.validation import validation_for

    table = len(curve.knot_batch) > 1
    key = "statistical-efficiency-table" if table else "statistical-efficiency-prior"
    return ModelInfo(
        name="statistical efficiency (predict.convergence)",
        version=__version__,
        fitted_on=notes[0].source if notes else "",
        validation=validation_for(key, [], precision, 1),
    )


def _on_cluster(
    assumptions: tuple[Assumption, ...], cluster: ClusterSpec
) -> tuple[Assumption, ...]:
    """A plan on a user's cluster rests on it instead of the catalog's offers; its PS shards
    run on the cluster's own hosts."""
    from gpucast.inputs.clusters import cluster_assumption

    ps = Assumption(
        name="parameter server",
        value="asynchronous; PS shards run on the cluster's host CPUs at no extra cost, over "
        "its inter-node network (one node without one: over PCIe); gradient staleness is not "
        "modelled",
    )
    swap = {"catalog": cluster_assumption(cluster), "parameter server": ps}
    return tuple(swap.get(a.name, a) for a in assumptions)
