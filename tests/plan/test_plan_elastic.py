"""Elastic spot candidates in plans (issue #16 item 3): a synchronous job goes on with the ready
nodes, re-planning its batch, instead of waiting for revoked nodes' replacements."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from plan_factories import context, request

from gpucast.plan.risk import SpotDelays, SpotJob, SpotPart, simulate_spots
from gpucast.plan.train import plan_training
from gpucast.predict.revocation import ExponentialLifetime


def _job(elastic: bool) -> SpotJob:
    part = SpotPart(
        instance_type="x", nodes=4, spot_usd_per_hour=1.0, on_demand_usd_per_hour=3.0,
        lifetime=ExponentialLifetime(hazard_per_hour=0.2, source="test"),
    )  # fmt: skip
    # waiting: [0, steps/s with every node]; elastic: steps/s with 0..4 ready nodes
    speed = np.array([0.0, 0.6, 1.1, 1.6, 2.0]) if elastic else np.array([0.0, 2.0])
    return SpotJob(
        key="k", region="r", parts=(part,), synchronous=True, steps=36_000, speed=speed,
        ps_shards=0, cpu_usd_per_hour=0.0, deadline_s=None, expected_time_s=5 * 3600.0,
        elastic=elastic,
    )  # fmt: skip


def _run(elastic: bool, gap_s: float) -> tuple[float, float]:
    delays = SpotDelays(startup_spot_s=60.0, startup_on_demand_s=60.0, capacity_gap_s=gap_s)
    (out,) = simulate_spots(
        [(_job(elastic), delays)], runs=300, seed=2, checkpoint_s=5.0, restart_penalty_s=30.0
    )
    return out.time_mean_s, out.revocations_mean


def test_elastic_does_not_wait_for_capacity() -> None:
    wait_t, wait_rev = _run(False, 2 * 3600.0)
    el_t, el_rev = _run(True, 2 * 3600.0)
    assert el_t < 0.7 * wait_t  # 2 h gaps: the waiting job idles, the elastic one goes on
    assert wait_rev > 0 and el_rev > 0
    # never slower than the full cluster's pace
    assert el_t > 36_000 / 2.0


def test_plan_train_elastic_prices_spot_candidates_without_waiting() -> None:
    ctx = context(hazard_per_hour=0.5)
    ctx = replace(ctx, risk=replace(ctx.risk, capacity_gap=lambda *_: 3600.0))
    req = request(
        allow_spot=True, strategies=("ddp",), max_gpus=8, deadline_s=None, epochs=100.0,
        max_simulated=12, mc_runs=300,
    )  # fmt: skip
    waiting = plan_training(req, ctx)
    elastic = plan_training(replace(req, elastic=True), ctx)

    def spot(plan: object) -> dict[str, float]:
        return {
            c.label(): c.time_s
            for c in plan.candidates  # type: ignore[attr-defined]
            if c.market == "spot" and c.mc_runs > 0
        }

    both = set(spot(waiting)) & set(spot(elastic))
    multi = [k for k in both if k.split()[1] != "1x"]
    assert multi, both
    for k in multi:
        assert spot(elastic)[k] < spot(waiting)[k]
    said = {a.name: a.value for a in elastic.assumptions}
    assert "elastic" in said and "ready nodes" in said["elastic"]
    assert "elastic" not in {a.name for a in waiting.assumptions}


def test_a_spot_row_s_interval_holds_its_mean_above_its_p90() -> None:
    # QA 39 O #12: "4m [2m, 3m]": rare 10 h capacity gaps pull the Monte Carlo mean above its
    # p90 and the step-time band; the interval now reaches the stated time
    from gpucast.report.tables import mean_above_band

    ctx = context(hazard_per_hour=0.5)
    ctx = replace(ctx, risk=replace(ctx.risk, capacity_gap=lambda *_: 36_000.0))
    plan = plan_training(request(epochs=0.2, deadline_s=None), ctx)
    spot = [c for c in plan.candidates if c.market == "spot"]
    assert spot
    for c in spot:
        assert c.time_p90_s is not None and c.time_upper_s >= c.time_p90_s
        assert c.time_lower_s <= c.time_s <= c.time_upper_s
    # the heavy tail is there, and the table's note still says so
    assert any(mean_above_band(c) for c in spot)
