"""``gpucast plan serve --mix``: PARIS's heterogeneous MIG layouts and ELSA's dispatch.

The inputs come from the same places as ``plan serve``'s (:mod:`gpucast.inputs.serving`):
the GPU's cheapest offer, its latency curve whole and on every MIG profile with published
placements, the arrivals; the layouts from :mod:`gpucast.predict.mig`; the planning and the
simulations in :func:`gpucast.plan.mig_serve.plan_mig_mix`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucast.plan.mig_serve import MigMixPlan

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.app.serve import PlanServeRequest

#: the GPU ``--mix`` plans on when no ``--gpu`` is given
DEFAULT_MIX_GPU = "A100-40GB"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanMigServeResult:
    """PARIS's layouts and the baselines, simulated; the sources of every input."""

    plan: MigMixPlan
    assumptions: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    validation: Mapping[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Any:
        return self.plan.best

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "assumptions": dict(self.assumptions),
            "validation": dict(self.validation),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per (choice, dispatcher) run."""
        import pandas as pd

        rows = []
        for k, o in enumerate(self.plan.outcomes):
            choice = self.plan.choice(o.choice)
            rows.append(
                {
                    "choice": o.choice,
                    "layouts": choice.describe(),
                    "dispatch": o.dispatch,
                    "gpus": o.gpus,
                    "cost_usd_per_hour": o.cost_usd_per_hour,
                    "capacity_rps": choice.capacity_rps,
                    "offered_rps": o.offered_rps,
                    "attainment": o.attainment,
                    "goodput_rps": o.goodput_rps,
                    "worst_p99_s": o.worst_p99_over_slo,
                    "recommended": k == self.plan.recommended,
                }
            )
        return pd.DataFrame(rows)


def plan_mig_serve(request: PlanServeRequest) -> PlanMigServeResult:
    """``plan serve --mix``: see :mod:`gpucast.plan.mig_serve`."""
    from gpucast.app.serve import serving_validation
    from gpucast.catalog import load_catalog
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving_plan import ModelLoad
    from gpucast.inputs import serving as inputs
    from gpucast.plan.mig_serve import WHOLE, Layout, MixModel, SliceType, plan_mig_mix
    from gpucast.predict.mig import (
        check_layout,
        enumerate_layouts,
        layout_prices_usd_per_hour,
        placeable_profiles,
    )

    catalog = load_catalog()
    gpu_name = request.gpus[0] if request.gpus else DEFAULT_MIX_GPU
    spec = catalog.gpu(gpu_name)
    usable = placeable_profiles(spec)  # one clear error for a GPU without MIG placements
    mix = [MixModel(name=n, rate_rps=r, slo_s=s) for n, r, s in request.mix_models]
    options, targets = inputs.build_server_options(
        gpus=[spec.name],
        no_cpu=True,
        providers=request.providers,
        regions=request.regions,
        spot=request.spot,
        catalog=catalog,
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
                price, [i.profile for i in placed.instances]
            ),
        )

    layouts = [as_layout(list(lay.names)) for lay in enumerate_layouts(spec)] + [whole_layout]
    homogeneous = [
        as_layout([p.name] * p.max_instances, f"{p.max_instances}x {p.name}")
        for p in sorted(usable, key=lambda p: (p.compute_slices, p.memory_gib))
    ]
    traffic: dict[str, Any] = {}
    processes = []
    for k, m in enumerate(mix):
        stream = inputs.arrivals(request.arrivals, m.rate_rps, request.duration_s, request.seed + k)
        traffic[m.name] = stream.times_s
        processes.append(f"{m.name}: {stream.source}")
    percentile = request.slo_percentile if request.slo_percentile is not None else 99.0
    plan = plan_mig_mix(
        mix,
        gpu=spec.name,
        slice_types=slice_types,
        layouts=layouts,
        baselines=[*homogeneous, whole_layout],
        profiles=by_slice,
        gpu_price_usd_per_hour=price,
        arrivals=traffic,
        horizon_s=request.duration_s,
        max_batch=max_batch,
        target_attainment=percentile / 100.0,
        max_gpus=request.max_servers,
        seed=request.seed,
    )
    assumptions = {
        "gpu": f"{spec.name}"
        + ("" if request.gpus else " (the default; --gpu picks another MIG GPU)"),
        "price": f"{price:.4g} US$/h per GPU ({whole.provider} {whole.instance_type}, "
        + ("spot" if request.spot else "on demand")
        + "); a slice costs its layout's share, max(compute/7, memory/8)",
        "layouts": f"{len(layouts) - 1} full MIG layouts of {spec.name} "
        "(gpucast.predict.mig) and the whole GPU",
        "latency": profiles.source,
        "engine": engine.source,
        "arrivals": "; ".join(processes),
        "target": f"p{percentile:g}: a choice meets the mix when {percentile:g}% of the "
        "requests finish within their model's SLO (--slo-percentile)",
        "simulation": f"{request.duration_s:g} s per run in the event engine; slices as "
        "separate servers without the network/PCIe stages (a request's transfer time is "
        "added to its round trip)",
    }
    validation = serving_validation(
        [spec.name], precision, calibrated=False, engine=engine_profile.name
    )
    from gpucast.catalog.validation import validation_for

    validation["MIG slice speed"] = validation_for("mig-slice", [spec.name], precision, 1).text()
    return PlanMigServeResult(plan=plan, assumptions=assumptions, validation=validation)
