"""PARIS's layout choice (heterogeneous MIG layouts for a mix) and its simulation under ELSA."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.serving import LatencyCurve
from gpucast.domain.serving_plan import ModelProfile
from gpucast.plan.mig_serve import (
    WHOLE,
    Layout,
    MigMixPlan,
    MixModel,
    SliceFit,
    SliceType,
    choose_layouts,
    plan_mig_mix,
    slice_fit,
)
from gpucast.predict.mig import check_layout, enumerate_layouts, layout_prices_usd_per_hour
from gpucast.simulate import arrivals as arr

PRICE = 7.0
#: per model: (fixed s, per-sample s) of a batch on the whole GPU; a slice of c compute slices
#: runs 7 / c times slower. "light" meets its SLO on any slice; "heavy" only on >= 3g.
WORK = {"light": (0.001, 0.0005), "heavy": (0.012, 0.004)}


def _setup() -> tuple[
    dict[str, SliceType], list[Layout], list[Layout], dict[tuple[str, str], ModelProfile]
]:
    spec = load_catalog().gpu("A100-40GB")
    profiles = [p for p in spec.mig_profiles if p.placements and p.memory_slices]
    types = {WHOLE: SliceType(name=WHOLE, memory_gib=spec.memory_gib)}
    types |= {p.name: SliceType(name=p.name, memory_gib=p.memory_gib) for p in profiles}
    compute = {p.name: p.compute_slices for p in profiles} | {WHOLE: 7}

    def layout(names: list[str], label: str | None = None) -> Layout:
        placed = check_layout(spec, names)
        prices = layout_prices_usd_per_hour(PRICE, [i.profile for i in placed.instances])
        return Layout(
            label=label or " + ".join(placed.names), slices=placed.names, prices_usd_per_hour=prices
        )

    whole = Layout(label="whole GPU", slices=(WHOLE,), prices_usd_per_hour=(PRICE,))
    layouts = [layout(list(lay.names)) for lay in enumerate_layouts(spec)] + [whole]
    homogeneous = [
        layout([p.name] * p.max_instances, f"{p.max_instances}x {p.name}") for p in profiles
    ] + [whole]
    curves = {}
    for model, (a, c) in WORK.items():
        for t, k in compute.items():
            slow = 7.0 / k
            curves[(model, t)] = ModelProfile(
                model=model,
                server=t,
                curve=LatencyCurve.affine(a * slow, c * slow, max_batch=32),
                memory_fixed_gib=1.0,
                memory_per_sample_gib=0.01,
            )
    return types, layouts, homogeneous, curves


def _fits(
    models: list[MixModel],
    types: dict[str, SliceType],
    curves: dict[tuple[str, str], ModelProfile],
) -> dict[tuple[str, str], SliceFit]:
    return {
        (m.name, t): slice_fit(
            curves[(m.name, t)], types[t], m.slo_s, max_batch=32, max_utilisation=0.8
        )
        for m in models
        for t in types
    }


MIX = [
    MixModel(name="light", rate_rps=400.0, slo_s=0.050),
    MixModel(name="heavy", rate_rps=30.0, slo_s=0.100),
]


def test_slice_fit_takes_the_best_batch_within_the_slo() -> None:
    types, _, _, curves = _setup()
    fit = slice_fit(
        curves[("heavy", "3g.20gb")], types["3g.20gb"], 0.100, max_batch=32, max_utilisation=1.0
    )
    lat = curves[("heavy", "3g.20gb")].curve.latency
    assert 2 * lat(fit.batch) <= 0.100 < 2 * lat(fit.batch + 1)
    assert fit.capacity_rps == pytest.approx(fit.batch / lat(fit.batch))
    # heavy's batch of one on a 1g slice: 2 x 7 x 16 ms > 100 ms -> it cannot serve there
    assert (
        slice_fit(
            curves[("heavy", "1g.5gb")], types["1g.5gb"], 0.100, max_batch=32, max_utilisation=0.8
        ).capacity_rps
        == 0
    )


def test_a_mix_that_needs_two_slice_sizes_gets_a_heterogeneous_layout() -> None:
    types, layouts, _, curves = _setup()
    fits = _fits(MIX, types, curves)
    choice = choose_layouts("paris", MIX, fits, layouts, gpu_price_usd_per_hour=PRICE)
    assert choice is not None
    assert choice.gpus == 1 and choice.heterogeneous
    served = {s.slice for s in choice.slices if s.model == "heavy"}
    assert served and all(t in ("3g.20gb", "4g.20gb", "7g.40gb", WHOLE) for t in served)
    assert choice.scale >= 1.0
    for m in MIX:
        assert choice.model_capacity_rps[m.name] >= m.rate_rps
    assert sum(s.price_usd_per_hour for s in choice.slices) == pytest.approx(PRICE)
    # 7 x 1g alone cannot serve heavy at all
    seven = next(lay for lay in _setup()[2] if lay.label == "7x 1g.5gb")
    assert choose_layouts("1g", MIX, fits, [seven], gpu_price_usd_per_hour=PRICE) is None


def test_fewest_gpus_grow_with_the_rate() -> None:
    types, layouts, _, curves = _setup()
    gpus = []
    for scale in (1.0, 3.0, 6.0):
        mix = [MixModel(name=m.name, rate_rps=m.rate_rps * scale, slo_s=m.slo_s) for m in MIX]
        choice = choose_layouts(
            "p", mix, _fits(mix, types, curves), layouts, gpu_price_usd_per_hour=PRICE
        )
        assert choice is not None
        assert all(choice.model_capacity_rps[m.name] >= m.rate_rps for m in mix)
        gpus.append(choice.gpus)
    assert gpus == sorted(gpus) and gpus[-1] > gpus[0]


def _plan(mix: list[MixModel], seconds: float = 4.0) -> MigMixPlan:
    types, layouts, homogeneous, curves = _setup()
    traffic = {
        m.name: arr.poisson(m.rate_rps, seconds, np.random.default_rng(k))
        for k, m in enumerate(mix)
    }
    return plan_mig_mix(
        mix,
        gpu="A100-40GB",
        slice_types=types,
        layouts=layouts,
        baselines=homogeneous,
        profiles=curves,
        gpu_price_usd_per_hour=PRICE,
        arrivals=traffic,
        horizon_s=seconds,
    )


def test_plan_simulates_paris_under_every_dispatcher_and_the_baselines() -> None:
    plan = _plan(MIX)
    assert plan.choices[0].name == "paris"
    runs = {(o.choice, o.dispatch): o for o in plan.outcomes}
    assert {d for c, d in runs if c == "paris"} == {"elsa", "least_loaded", "round_robin"}
    assert runs[("paris", "elsa")].attainment >= runs[("paris", "round_robin")].attainment
    assert "7x 1g.5gb" in plan.skipped and "heavy" in plan.skipped["7x 1g.5gb"]
    best = plan.best
    assert best is not None and best.attainment >= 0.99
    assert best.cost_usd_per_hour == min(
        o.cost_usd_per_hour for o in plan.outcomes if o.attainment >= 0.99
    )
    d = plan.to_dict()
    assert d["kind"] == "mig-serve-plan" and len(d["outcomes"]) == len(plan.outcomes)


def test_an_slo_no_slice_can_meet_is_one_clear_error() -> None:
    mix = [MixModel(name="heavy", rate_rps=10.0, slo_s=0.005)]
    with pytest.raises(
        NoFeasiblePlanError, match=r"mix heavy: SLO 5 ms is below .*\(32 ms at best"
    ):
        _plan(mix)


def test_mix_model_rejects_bad_numbers() -> None:
    with pytest.raises(InvalidSpecError, match="rate must be a finite number > 0"):
        MixModel(name="x", rate_rps=-1.0, slo_s=0.05)
    with pytest.raises(InvalidSpecError, match="SLO must be a finite number > 0"):
        MixModel(name="x", rate_rps=1.0, slo_s=float("nan"))
