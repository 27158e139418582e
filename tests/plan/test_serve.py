"""`plan serve` core: pruning, search, Pareto front, monotonicity, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.serving import LatencyCurve
from gpucast.domain.serving_plan import ModelLoad, ModelProfile, ServeRequest, ServerOption
from gpucast.plan.serve import (
    REASON_LATENCY,
    REASON_MEMORY,
    TIE_BREAK,
    capacity,
    plan_serving,
)

OPTIONS = (
    ServerOption(name="big", kind="gpu", memory_gib=16, price_usd_per_hour=2.0),
    ServerOption(name="small", kind="gpu", memory_gib=4, price_usd_per_hour=0.6),
    ServerOption(name="big/1g", kind="mig", memory_gib=4, price_usd_per_hour=2.0 / 7, per_unit=7),
    ServerOption(name="cpu", kind="cpu", memory_gib=16, price_usd_per_hour=0.2),
)
CURVES = {
    "big": LatencyCurve.affine(0.004, 0.001, host_s=0.002),
    "small": LatencyCurve.affine(0.008, 0.003, host_s=0.003),
    "big/1g": LatencyCurve.affine(0.006, 0.006, host_s=0.002),
    "cpu": LatencyCurve.affine(0.030, 0.020),
}


def profiles(models: tuple[str, ...], per_sample_gib: float = 0.05) -> dict:
    return {
        (m, o.name): ModelProfile(
            model=m,
            server=o.name,
            curve=CURVES[o.name],
            memory_fixed_gib=1.0,
            memory_per_sample_gib=per_sample_gib,
            request_overhead_s=0.0005,
        )
        for m in models
        for o in OPTIONS
    }


def request(rates: dict[str, float], slo_ms: float, **kw: object) -> ServeRequest:
    defaults: dict[str, object] = {
        "duration_s": 10.0,
        "max_batch_sizes": (1, 4, 16),
        "max_delays_s": (0.0, 0.005),
    }
    defaults.update(kw)
    return ServeRequest(
        models=tuple(ModelLoad(name=m, rate_rps=r) for m, r in rates.items()),
        slo_s=slo_ms / 1e3,
        **defaults,  # type: ignore[arg-type]
    )


def test_single_model_plan_is_cheapest_feasible_and_explained() -> None:
    plan = plan_serving(request({"a": 300}, 50), OPTIONS, profiles(("a",)))
    best = plan.best
    assert best is not None and best.meets_slo
    costs = [c.cost_usd_per_hour for c in plan.candidates]
    assert best.cost_usd_per_hour == min(costs)
    assert all(c.tail_latency_s <= 0.050 for c in plan.candidates)
    # the CPU at 30 ms + 20 ms per sample can still serve batch 1 within 50 ms
    assert plan.simulated < plan.evaluated
    assert best.requests_in == best.requests_out > 0
    assert best.headroom > 0
    d = plan.to_dict()
    assert d["recommended"] == 0 and d["pareto"] and isinstance(d["infeasible"], dict)


def test_analytic_pruning_reasons() -> None:
    # 20 ms SLO: the CPU's 50 ms single request is pruned before any simulation
    plan = plan_serving(request({"a": 100}, 20), OPTIONS, profiles(("a",), per_sample_gib=0.5))
    assert plan.infeasible[REASON_LATENCY] > 0
    # 4 GiB devices cannot hold 2 instances at batch 16 with 0.5 GiB per sample
    assert plan.infeasible[REASON_MEMORY] > 0
    assert all("cpu" not in c.describe() for c in plan.candidates)


def test_capacity_counts_shared_device() -> None:
    prof = profiles(("a",))[("a", "big")]
    solo = capacity(prof, OPTIONS[0], 8, 1, 1)
    assert solo.device_rps == pytest.approx(8 / CURVES["big"].latency(8))
    two = capacity(prof, OPTIONS[0], 8, 2, 2)
    assert two.device_rps == pytest.approx(8 / CURVES["big"].device_s(8))
    assert two.instance_rps == pytest.approx(2 * 8 / CURVES["big"].latency(8))


def test_two_models_consider_colocation() -> None:
    plan = plan_serving(request({"a": 150, "b": 40}, 60), OPTIONS, profiles(("a", "b")))
    placements = {c.placement for c in plan.candidates}
    assert "shared" in placements or "dedicated" in placements
    for c in plan.candidates:
        served = {m.model for g in c.groups for m in g.models}
        assert served == {"a", "b"}
        assert c.requests_in == c.requests_out


def test_mig_cost_rounds_up_to_whole_gpus() -> None:
    mig = OPTIONS[2]
    assert mig.cost_usd_per_hour(1) == pytest.approx(2.0)
    assert mig.cost_usd_per_hour(7) == pytest.approx(2.0)
    assert mig.cost_usd_per_hour(8) == pytest.approx(4.0)


def test_slo_below_every_single_request_latency_is_one_clear_error() -> None:
    with pytest.raises(NoFeasiblePlanError, match=r"fastest: big, 5\.5 ms"):
        plan_serving(request({"a": 10}, 3), OPTIONS, profiles(("a",)))


def test_bad_requests() -> None:
    with pytest.raises(InvalidSpecError, match="model: the rate in a:"):
        ModelLoad(name="a", rate_rps=0)
    with pytest.raises(InvalidSpecError, match="model: the rate in a:"):
        ModelLoad(name="a", rate_rps=-5)
    with pytest.raises(InvalidSpecError, match="slo"):
        request({"a": 1}, 0)
    with pytest.raises(NoFeasiblePlanError, match="budget"):
        plan_serving(request({"a": 300}, 50, budget_usd_per_hour=0.01), OPTIONS, profiles(("a",)))


def test_same_seed_same_plan() -> None:
    one = plan_serving(request({"a": 200}, 40), OPTIONS, profiles(("a",))).to_dict()
    two = plan_serving(request({"a": 200}, 40), OPTIONS, profiles(("a",))).to_dict()
    assert one == two


# The properties below are of the pick and the front; the saturation search only reports the
# pick's peak throughput, so they skip it (saturation_s=0).
FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(rate=st.floats(20, 400), slo_ms=st.floats(8, 80))
def test_pareto_front_is_non_dominated(rate: float, slo_ms: float) -> None:
    plan = plan_serving(request({"a": rate}, slo_ms), OPTIONS, profiles(("a",)), saturation_s=0)
    pts = [(c.cost_usd_per_hour, c.tail_latency_s) for c in plan.candidates]
    for i in plan.pareto:
        ci, li = pts[i]
        assert not any((c <= ci and lat <= li) and (c < ci or lat < li) for c, lat in pts)
    # every candidate off the front is dominated by (or equal to) one on it
    for j, (cj, lj) in enumerate(pts):
        if j not in plan.pareto:
            assert any(pts[i][0] <= cj and pts[i][1] <= lj for i in plan.pareto)


@FAST
@given(rate=st.floats(20, 400), slo_ms=st.floats(8, 60), looser=st.floats(1.0, 3.0))
def test_looser_slo_is_never_more_expensive(rate: float, slo_ms: float, looser: float) -> None:
    try:
        tight = plan_serving(
            request({"a": rate}, slo_ms), OPTIONS, profiles(("a",)), saturation_s=0
        )
    except NoFeasiblePlanError:
        return
    loose = plan_serving(
        request({"a": rate}, slo_ms * looser), OPTIONS, profiles(("a",)), saturation_s=0
    )
    assert tight.best is not None and loose.best is not None
    assert loose.best.cost_usd_per_hour <= tight.best.cost_usd_per_hour + 1e-9


@FAST
@given(rate=st.floats(20, 400), budget=st.floats(0.3, 5.0), more=st.floats(1.0, 4.0))
def test_more_budget_is_never_more_expensive(rate: float, budget: float, more: float) -> None:
    try:
        tight = plan_serving(
            request({"a": rate}, 40, budget_usd_per_hour=budget),
            OPTIONS,
            profiles(("a",)),
            saturation_s=0,
        )
    except NoFeasiblePlanError:
        return
    loose = plan_serving(
        request({"a": rate}, 40, budget_usd_per_hour=budget * more),
        OPTIONS,
        profiles(("a",)),
        saturation_s=0,
    )
    assert tight.best is not None and loose.best is not None
    assert loose.best.cost_usd_per_hour <= tight.best.cost_usd_per_hour + 1e-9


@FAST
@given(rates=st.lists(st.floats(5, 150), min_size=1, max_size=2))
def test_requests_in_equal_requests_out(rates: list[float]) -> None:
    names = tuple(f"m{i}" for i in range(len(rates)))
    req = request(dict(zip(names, rates, strict=True)), 80)
    plan = plan_serving(req, OPTIONS, profiles(names))
    for c in plan.candidates:
        assert c.requests_in == c.requests_out
        assert c.requests_in == pytest.approx(sum(rates) * 10.0, rel=0.5)


def test_given_arrivals_are_used() -> None:
    times = np.arange(0, 10, 0.01)  # 100 req/s, constant
    plan = plan_serving(request({"a": 100}, 40), OPTIONS, profiles(("a",)), arrivals={"a": times})
    assert plan.best is not None and plan.best.requests_in == times.size


def test_host_capacity_adds_servers_and_stretches_latency() -> None:
    import dataclasses

    req = request({"a": 300}, 50, max_batch_sizes=(4, 16), max_delays_s=(0.005,))
    gpus = (OPTIONS[0],)
    free = plan_serving(req, gpus, profiles(("a",)))
    # a host path that carries 200 requests/s per server: 300 requests/s need 2 servers
    # at least, and at 2 servers each request waits 3x its median latency more (rho 0.75)
    tight = (dataclasses.replace(OPTIONS[0], host_capacity_rps=200.0),)
    plan = plan_serving(req, tight, profiles(("a",)))
    assert free.best is not None and plan.best is not None
    assert plan.best.servers >= 2
    assert plan.best.servers > free.best.servers
    assert plan.best.groups[0].server.host_capacity_rps == 200.0
    assert plan.best.cost_usd_per_hour > free.best.cost_usd_per_hour
    assert plan.best.tail_latency_s > free.best.tail_latency_s
    with pytest.raises(InvalidSpecError, match="host capacity"):
        dataclasses.replace(OPTIONS[0], host_capacity_rps=0.0)


def test_tie_note_names_the_rule_only_when_the_pick_s_cost_is_shared() -> None:
    from gpucast.plan.pareto import tie_note

    assert tie_note([0.0, 0.0, 0.0], 1, "lower TTFT") == (
        "3 deployments tie at US$ 0.000/h; ties go to lower TTFT"
    )
    assert tie_note([0.445, 0.445, 0.7], 0, "lower p99") == (
        "2 deployments tie at US$ 0.445/h; ties go to lower p99"
    )
    assert tie_note([0.4, 0.445, 0.445], 0, "lower p99") is None


def test_equal_prices_pick_the_lower_tail_latency_in_any_order_and_say_so() -> None:
    twins = (
        ServerOption(name="slow", kind="gpu", memory_gib=16, price_usd_per_hour=1.0),
        ServerOption(name="fast", kind="gpu", memory_gib=16, price_usd_per_hour=1.0),
    )
    curves = {"slow": CURVES["small"], "fast": CURVES["big"]}
    profs = {
        ("a", o.name): ModelProfile(
            model="a", server=o.name, curve=curves[o.name], memory_fixed_gib=1.0,
            memory_per_sample_gib=0.05, request_overhead_s=0.0005,
        )
        for o in twins
    }  # fmt: skip
    plans = [plan_serving(request({"a": 50}, 50), opts, profs) for opts in (twins, twins[::-1])]
    for plan in plans:
        best = plan.best
        assert best is not None and "fast" in best.describe()
        tied = [c for c in plan.candidates if c.cost_usd_per_hour == best.cost_usd_per_hour]
        assert len(tied) > 1
        assert best.tail_latency_s == min(c.tail_latency_s for c in tied)
        assert plan.assumptions["pick"].startswith(f"{len(tied)} deployments tie at US$ 1.000/h")
        assert plan.assumptions["pick"].endswith(f"ties go to {TIE_BREAK}")
    assert [c.describe() for c in plans[0].candidates] == [
        c.describe() for c in plans[1].candidates
    ]
