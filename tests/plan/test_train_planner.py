"""The training planner on a tiny synthetic catalog: constraints, Pareto, monotonicity, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_factories import context, request

from gpucast.domain.errors import (
    InvalidSpecError,
    NoFeasiblePlanError,
    UnknownGpuError,
    UnknownProviderError,
    UnknownRegionError,
)
from gpucast.domain.plan import PlanCandidate, TrainPlan
from gpucast.plan.train import plan_training, search

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _dominates(a: PlanCandidate, b: PlanCandidate) -> bool:
    ka = (a.time_s, a.cost_usd, a.risk)
    kb = (b.time_s, b.cost_usd, b.risk)
    return all(x <= y for x, y in zip(ka, kb, strict=True)) and ka != kb


def test_plan_has_front_pick_and_explanations() -> None:
    plan = plan_training(request(), context())
    assert plan.candidates and plan.pareto and plan.recommended is not None
    assert plan.simulated >= 1 and plan.evaluated > 1000
    best = plan.best
    assert best is not None
    # cheapest objective: nothing shown is cheaper than the pick
    assert best.cost_usd == min(c.cost_usd for c in plan.candidates)
    spot = [c for c in plan.candidates if c.market == "spot"]
    assert spot and all(c.mc_runs >= 1000 and c.p_meet_deadline is not None for c in spot)
    assert all(c.time_p90_s is not None for c in spot)
    assert any(c.help for c in plan.candidates)
    assert plan.infeasible  # PS without CPU servers in gcp/r2, no spot market for slow-g


def test_fastest_objective_picks_the_fastest() -> None:
    plan = plan_training(request(objective="fastest"), context())
    assert plan.best is not None
    assert plan.best.time_s == min(c.time_s for c in plan.candidates)


@SETTINGS
@given(
    budget=st.floats(0.2, 5.0),
    deadline_h=st.floats(0.05, 6.0),
    max_gpus=st.integers(1, 16),
    spot=st.booleans(),
    min_p=st.sampled_from([0.0, 0.5, 0.9, 0.99]),
    provider=st.sampled_from([(), ("aws",), ("gcp",)]),
    mixed=st.booleans(),
)
def test_constraints_are_respected(
    budget: float,
    deadline_h: float,
    max_gpus: int,
    spot: bool,
    min_p: float,
    provider: tuple[str, ...],
    mixed: bool,
) -> None:
    req = request(
        budget_usd=budget,
        deadline_s=deadline_h * 3600,
        max_gpus=max_gpus,
        allow_spot=spot,
        min_p_meet=min_p,
        providers=provider,
        allow_mixed=mixed,
    )
    try:
        plan = plan_training(req, context())
    except NoFeasiblePlanError as exc:
        assert "cut the most" in str(exc) or "matches" in str(exc) or "fits no GPU" in str(exc)
        return
    for c in plan.candidates:
        assert c.gpus <= max_gpus
        assert c.cost_usd <= budget
        assert not provider or c.provider in provider
        assert mixed or not c.mixed
        # P(meet deadline) covers the model's uncertainty in both markets
        assert c.p_meet_deadline is not None and c.p_meet_deadline >= min_p
        if c.market == "spot":
            assert spot
        else:
            assert c.time_s <= deadline_h * 3600
    # Pareto property: no returned front point is dominated by any candidate
    for i in plan.pareto:
        assert not any(_dominates(c, plan.candidates[i]) for c in plan.candidates)


@SETTINGS
@given(
    low=st.floats(0.1, 3.0),
    extra=st.floats(0.0, 5.0),
    spot=st.booleans(),
    deadline_h=st.floats(0.05, 4.0),
    mixed=st.booleans(),
)
def test_higher_budget_never_gives_a_slower_best_plan(
    low: float, extra: float, spot: bool, deadline_h: float, mixed: bool
) -> None:
    def best_time(budget: float) -> float:
        req = request(
            budget_usd=budget,
            objective="fastest",
            allow_spot=spot,
            deadline_s=deadline_h * 3600,
            allow_mixed=mixed,
        )
        try:
            plan = plan_training(req, context())
        except NoFeasiblePlanError:
            return math.inf
        assert plan.best is not None
        return plan.best.time_s

    assert best_time(low + extra) <= best_time(low)


def test_larger_global_batch_needs_more_epochs() -> None:
    plan = plan_training(request(global_batch=4096, allow_spot=False), context())
    small = plan_training(request(global_batch=256, allow_spot=False), context())
    big_c, small_c = plan.candidates[0], small.candidates[0]
    assert big_c.global_batch > small_c.global_batch and big_c.epochs > small_c.epochs
    crit, ref = plan.critical_batch, plan.reference_batch
    for c in (*plan.candidates, *small.candidates):
        assert c.global_batch <= 4096
        expected = 2.0 * (1 + c.global_batch / crit) / (1 + ref / crit)
        assert c.epochs == pytest.approx(expected, rel=1e-9)


def test_critical_batch_override_is_used() -> None:
    plan = plan_training(request(critical_batch=512.0, allow_spot=False), context())
    assert plan.critical_batch == 512.0
    assert any("reference epochs" in h for c in plan.candidates for h in c.help)


def test_parameter_server_bound_plans_suggest_a_shard() -> None:
    # a huge model on a slow PS NIC: the PS is the bottleneck and another shard helps
    req = request(
        strategies=("ps",), allow_spot=False, providers=("aws",), max_ps_shards=1, deadline_s=None
    )
    res = search(req, context(gradient_bytes=2e9, weights_bytes=2e8))
    assert (res.reason == "").any()
    plan = plan_training(req, context(gradient_bytes=2e9, weights_bytes=2e8))
    ps_bound = [c for c in plan.candidates if c.bottleneck in ("ps_network", "ps_cpu")]
    assert ps_bound
    assert any(h.startswith("add a PS shard") for c in ps_bound for h in c.help)


def test_no_feasible_plan_names_the_constraint_and_the_fix() -> None:
    with pytest.raises(NoFeasiblePlanError) as err:
        plan_training(request(deadline_s=1.0), context())
    text = str(err.value)
    assert "misses the deadline" in text and "relax --deadline" in text
    assert err.value.exit_code == 2


def test_over_budget_says_how_much_is_needed() -> None:
    with pytest.raises(NoFeasiblePlanError, match=r"raise --budget to at least"):
        plan_training(request(budget_usd=0.001, allow_spot=False), context())


def test_workload_that_fits_no_gpu() -> None:
    with pytest.raises(NoFeasiblePlanError, match="fits no GPU with any strategy"):
        plan_training(request(), context(activation_bytes_per_sample=1e11))
    # the fix names the flag the batches came from (QA 39 Y #17)
    for changes, flag in (
        ({"batch_sizes": (64, 128)}, "smaller --batch-sizes,"),
        ({"batch_size": 64}, "smaller --batch-size,"),
        ({"global_batch": 512}, "smaller --global-batch,"),
    ):
        with pytest.raises(NoFeasiblePlanError, match=flag):
            plan_training(request(**changes), context(activation_bytes_per_sample=1e11))


def test_unknown_names_fail_with_close_matches() -> None:
    with pytest.raises(UnknownGpuError, match="FAST"):
        plan_training(request(gpus=("FAZT",)), context())
    with pytest.raises(UnknownRegionError):
        plan_training(request(regions=("r9",)), context())
    with pytest.raises(UnknownProviderError):
        plan_training(request(providers=("awz",)), context())


def test_contradictory_constraints() -> None:
    with pytest.raises(InvalidSpecError, match="both required and excluded"):
        request(gpus=("FAST",), exclude_gpus=("fast",))
    with pytest.raises(InvalidSpecError, match="not both"):
        request(batch_size=32, global_batch=1024)
    with pytest.raises(NoFeasiblePlanError, match="no GPU offer"):
        plan_training(request(providers=("gcp",), regions=("r1",)), context())


def test_filters_and_no_spot() -> None:
    plan = plan_training(request(gpus=("FAST",), allow_spot=False), context())
    assert {c.gpu for c in plan.candidates} == {"FAST"}
    assert {c.market for c in plan.candidates} == {"on-demand"}


def test_same_seed_same_plan_and_round_trip() -> None:
    a = plan_training(request(), context())
    b = plan_training(request(), context())
    assert a.to_dict() == b.to_dict()
    again = TrainPlan.from_dict(a.to_dict())
    assert again.to_dict() == a.to_dict()


def test_spot_risk_grows_with_hazard() -> None:
    calm = plan_training(request(min_p_meet=0.0, allow_spot=True), context(hazard_per_hour=0.01))
    wild = plan_training(request(min_p_meet=0.0, allow_spot=True), context(hazard_per_hour=5.0))

    def revocations(plan: TrainPlan) -> float:
        spot = [c for c in plan.candidates if c.market == "spot"]
        return float(np.mean([c.time_s / c.breakdown_s["train_s"] for c in spot]))

    assert revocations(wild) > revocations(calm)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"allow_mixed": True, "max_gpus": 32},
        {"deadline_s": 3 * 3600.0, "budget_usd": 40.0},
        {"objective": "goodput"},
        {"deadline_s": 600.0},  # nothing feasible: the error must not depend on chunks
    ],
)
def test_chunked_search_gives_the_same_plan(
    options: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner evaluates the space a chunk at a time and keeps only the rows a plan can
    show or simulate (#21: memory bounded by the survivors). Chunks of 37 rows and one
    chunk of everything give the same plan, or the same error."""
    from gpucast.plan import space

    def plan_with(rows: int) -> object:
        monkeypatch.setattr(space, "CHUNK_ROWS", rows)
        monkeypatch.setattr(
            space.space_chunks,
            "__kwdefaults__",
            {**space.space_chunks.__kwdefaults__, "rows": rows},
        )
        try:
            return plan_training(request(**options), context()).to_dict()
        except NoFeasiblePlanError as exc:
            return str(exc)

    assert plan_with(37) == plan_with(1 << 30)


def test_compact_search_keeps_the_fronts_and_counts_every_row() -> None:
    """``search(compact=True)`` keeps a few rows but counts every passing one."""
    req = request(allow_mixed=True, max_gpus=32)
    full = search(req, context())
    lean = search(req, context(), compact=True)
    assert lean.evaluated == len(full.space) and len(lean.space) < len(full.space)
    assert lean.passed_on_demand == int(np.count_nonzero(full.ok & ~full.space.spot))
    assert lean.passed_spot == int(np.count_nonzero(full.ok & full.space.spot))
    assert lean.marked == full.marked


def test_spot_dearer_than_on_demand_is_said_so() -> None:
    from gpucast.plan.explain import spot_verdict

    assert spot_verdict(0.62) == "spot saves 62%"
    assert spot_verdict(0.0) == "spot saves 0%"
    # revocations (or another cloud's prices) made the spot twin dearer: no "saves -43%"
    assert spot_verdict(-0.43) == "spot costs +43% more"


def test_work_in_steps_gives_no_epoch_count() -> None:
    """--steps without --dataset-size: a candidate has no epochs (it held the samples,
    1000 steps x 128 = 128,000 "epochs", in the JSON, the CSV and the HTML report)."""
    plan = plan_training(
        request(epochs=None, dataset_size=None, steps=1000, reference_batch=128, allow_spot=False),
        context(),
    )
    assert plan.candidates
    for c in plan.candidates:
        assert c.epochs is None and c.to_dict()["epochs"] is None
        assert c.steps * c.global_batch >= 128_000 * 0.99  # the work is in steps x batch
    with_size = plan_training(request(allow_spot=False), context())
    assert all(c.epochs is not None and 1.9 < c.epochs < 4 for c in with_size.candidates)


def test_the_spot_hint_states_a_short_p90_in_minutes() -> None:
    """QA session 38: a 3-minute job's hint read "spot saves 73% at 0.0% risk of missing the
    deadline (p90 0.0 h)"."""
    plan = plan_training(request(epochs=0.05, deadline_s=3600.0), context())
    hints = [h for c in plan.candidates for h in c.help if "(p90 " in h]
    assert hints and all("p90 0.0 h" not in h and " min)" in h for h in hints)
