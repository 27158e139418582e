"""``plan serve --mix``: the inputs PARIS + ELSA plan with (:func:`mig_mix_inputs`: the
GPU, its price, slice types, layouts, baselines and latency curves) and the run of
:func:`gpucast.plan.mig_serve.plan_mig_mix` on them (:func:`plan_mig_serve`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucast.app._serve_options import _check_units
from gpucast.app._serve_simulate import serving_validation

if TYPE_CHECKING:
    from gpucast.app.mig_serve import MigMixInputs, PlanMigServeResult
    from gpucast.app.serve import PlanServeRequest


def mig_mix_inputs(request: PlanServeRequest) -> MigMixInputs:
    """What ``plan serve --mix`` plans with: the GPU, its price, the slice types, every full
    layout (and the whole GPU), the homogeneous baselines and each model's latency curve per
    slice type (see :mod:`gpucast.plan.mig_serve`)."""
    from gpucast.app.mig_serve import DEFAULT_MIX_GPU, MigMixInputs
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving_plan import ModelLoad
    from gpucast.inputs import serving as inputs
    from gpucast.plan.mig_serve import WHOLE, Layout, MixModel, SliceType
    from gpucast.predict.mig import (
        check_layout,
        enumerate_layouts,
        layout_prices_usd_per_hour,
        placeable_profiles,
    )

    catalog = load_catalog(offers_file(request.offers_file))
    gpu_name = request.gpus[0] if request.gpus else DEFAULT_MIX_GPU
    spec = catalog.gpu(gpu_name)
    precision = request.precision or serving_engine(request.engine).default_precision
    _check_units(precision, spec, catalog)
    # one error without placements, naming --gpu where the user gave it
    usable = placeable_profiles(
        spec, catalog.mig_gpu_names(), field="gpu" if request.gpus else "mig layout"
    )
    mix = [MixModel(name=n, rate_rps=r, slo_s=s) for n, r, s in request.mix_models]
    options, targets = inputs.build_server_options(
        gpus=[spec.name],
        no_cpu=True,
        providers=request.providers,
        regions=request.regions,
        spot=request.spot,
        catalog=catalog,
        price_usd_per_gpu_hour=request.price,
    )
    whole = next(o for o in options if o.kind == "gpu")
    price = whole.price_usd_per_hour
    keep = {p.name for p in usable}
    kept = [o for o in options if o.kind == "gpu" or o.mig_profile in keep]
    engine_profile = serving_engine(request.engine)
    precision = request.precision or engine_profile.default_precision
    engine = inputs.serving_efficiency(request.engine, precision)
    max_batch = max(request.max_batch_sizes)
    loads = [ModelLoad(name=m.name, rate_rps=m.rate_rps) for m in mix]
    profiles = inputs.model_profiles(
        loads, kept, targets, precision=precision, max_batch=max_batch,
        measured=inputs.read_latency_tables(request.latency_tables), engine=engine.value,
        workload_options=dict(request.workload_options),
    )  # fmt: skip
    by_slice = {
        (model, WHOLE if o.kind == "gpu" else str(o.mig_profile)): prof
        for (model, name), prof in profiles.value.items()
        for o in kept
        if o.name == name
    }
    slice_types = {WHOLE: SliceType(name=WHOLE, memory_gib=spec.memory_gib)}
    slice_types |= {p.name: SliceType(name=p.name, memory_gib=p.memory_gib) for p in usable}
    whole_layout = Layout(label="whole GPU", slices=(WHOLE,), prices_usd_per_hour=(price,))

    def as_layout(names: list[str], label: str | None = None) -> Layout:
        placed = check_layout(spec, names)
        return Layout(
            label=label or " + ".join(placed.names),
            slices=placed.names,
            prices_usd_per_hour=layout_prices_usd_per_hour(
                price, [i.profile for i in placed.instances], slices=spec.mig_slices
            ),
        )

    layouts = [as_layout(list(lay.names)) for lay in enumerate_layouts(spec)] + [whole_layout]
    homogeneous = [
        as_layout([p.name] * p.max_instances, f"{p.max_instances}x {p.name}")
        for p in sorted(usable, key=lambda p: (p.compute_slices, p.memory_gib))
    ]
    return MigMixInputs(
        gpu=spec.name,
        gpu_given=bool(request.gpus),
        price_usd_per_hour=price,
        offer=f"{whole.provider} {whole.instance_type}",
        mix=tuple(mix),
        slice_types=slice_types,
        layouts=tuple(layouts),
        baselines=(*homogeneous, whole_layout),
        profiles=by_slice,
        latency_source=profiles.source,
        engine_source=engine.source,
        engine=engine_profile.name,
        precision=precision,
        max_batch=max_batch,
    )


def plan_mig_serve(request: PlanServeRequest) -> PlanMigServeResult:
    """``plan serve --mix``: see :mod:`gpucast.plan.mig_serve`."""
    from gpucast.app.mig_serve import PlanMigServeResult
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs import serving as inputs
    from gpucast.plan.mig_serve import plan_mig_mix

    m_in = mig_mix_inputs(request)
    mix = m_in.mix
    traffic: dict[str, Any] = {}
    processes = []
    for k, m in enumerate(mix):
        stream = inputs.arrivals(request.arrivals, m.rate_rps, request.run_s, request.seed + k)
        traffic[m.name] = stream.times_s
        processes.append(f"{m.name}: {stream.source}")
    percentile = request.slo_percentile if request.slo_percentile is not None else 99.0
    plan = plan_mig_mix(
        mix,
        gpu=m_in.gpu,
        slice_types=m_in.slice_types,
        layouts=m_in.layouts,
        baselines=m_in.baselines,
        profiles=m_in.profiles,
        gpu_price_usd_per_hour=m_in.price_usd_per_hour,
        arrivals=traffic,
        horizon_s=request.run_s,
        max_batch=m_in.max_batch,
        target_attainment=percentile / 100.0,
        max_gpus=request.max_servers,
        seed=request.seed,
    )
    assumptions = {
        "gpu": f"{m_in.gpu}"
        + ("" if m_in.gpu_given else " (the default; --gpu picks another MIG GPU)"),
        "price": f"{m_in.price_usd_per_hour:.4g} US$/h per GPU ({m_in.offer}, "
        + ("spot" if request.spot else "on demand")
        + "); a slice costs its layout's share, max(compute/7, memory/8)",
        "layouts": f"{len(m_in.layouts) - 1} full MIG layouts of {m_in.gpu} "
        "(gpucast.predict.mig) and the whole GPU",
        "latency": m_in.latency_source,
        "engine": m_in.engine_source,
        "arrivals": "; ".join(processes),
        "target": f"p{percentile:g}: a choice meets the mix when {percentile:g}% of the "
        "requests finish within their model's SLO (--slo-percentile)",
        "simulation": f"{request.run_s:g} s per run in the event engine; slices as "
        "separate servers without the network/PCIe stages (a request's transfer time is "
        "added to its round trip)",
    }
    validation = serving_validation(
        [m_in.gpu], m_in.precision, calibrated=False, engine=m_in.engine, mig=True
    )
    validation["PARIS + ELSA vs homogeneous layouts"] = validation_for(
        "mig-paris-elsa", [m_in.gpu], m_in.precision, 1
    ).text()
    return PlanMigServeResult(plan=plan, assumptions=assumptions, validation=validation)
