"""Spot rows of the LLM planner: revocations, sharded checkpoints and restarts through the spot
Monte Carlo of plan train, priced per candidate."""

from __future__ import annotations

import dataclasses
from datetime import date

import numpy as np
import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.llm import llm_model
from gpucast.domain.catalog import Offer
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.parallel import LayoutSpace
from gpucast.plan.inputs import RiskInputs
from gpucast.plan.llm import LlmSpot, offer_nodes, plan_llm
from gpucast.predict.collective import TCP_DEFAULT
from gpucast.predict.revocation import ExponentialLifetime
from gpucast.predict.roofline import RooflineEfficiency


def _offer(region: str, od: float, spot: float | None) -> Offer:
    return Offer(
        provider="aws", region=region, instance_type="p5", gpu="H100-SXM", gpus=8, vcpus=192,
        memory_gib=2048, network_gbps=3200.0, on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot, source_url="https://example.org", as_of=date(2026, 12, 6),
    )  # fmt: skip


OFFERS = [_offer("r1", 98.0, None), _offer("r2", 100.0, 30.0), _offer("r3", 99.0, 40.0)]


def _spot(hazard_per_hour: float, **kw: object) -> LlmSpot:
    risk = RiskInputs(
        lifetime=lambda gpu, region, provider: ExponentialLifetime(hazard_per_hour=hazard_per_hour),
        startup_spot_s=120.0, startup_on_demand_s=120.0, startup_mean_s=120.0,
    )  # fmt: skip
    return LlmSpot(risk=risk, storage_gb_s=1.0, restart_s=100.0, runs=300, **kw)  # type: ignore[arg-type]


def _plan(
    spot: LlmSpot | None,
    *,
    lora: int = 0,
    deadline_s: float | None = None,
    offers: list[Offer] = OFFERS,
) -> object:
    catalog = load_catalog()
    return plan_llm(
        llm_model("llama-2-7b"), offer_nodes(offers, frozenset({"p5"}), spot=spot is not None),
        {g.name: g for g in catalog.gpus},
        tokens=5e9, global_batch=256, seq_len=2048, max_gpus=16,
        space=LayoutSpace(micro_batch_sizes=(1, 2), zero_stages=(1,), recompute=("selective",),
                          lora_rank=lora),
        efficiency=RooflineEfficiency(), tcp=TCP_DEFAULT, deadline_s=deadline_s, spot=spot,
    )  # fmt: skip


def _rows(plan: object, market: str) -> dict[int, object]:
    return {r.nodes: r for r in plan.candidates if r.market == market}  # type: ignore[attr-defined]


def test_spot_rows_come_from_the_cheapest_spot_region_and_cost_less_when_revocations_are_rare():
    plan = _plan(_spot(1e-4))
    spot, od = _rows(plan, "spot"), _rows(plan, "on-demand")
    assert set(spot) == set(od) == {1, 2}
    for n, row in spot.items():
        assert row.region == "r2" and od[n].region == "r1"  # cheapest spot / on-demand region
        assert row.revocations_mean < 0.05 and row.checkpoint_s > 0
        # no revocations: the same training plus a VM start-up, at the spot price
        assert od[n].time_s < row.time_s < 1.005 * od[n].time_s + 120.0
        assert row.cost_usd == pytest.approx(row.time_s / 3600 * n * 30.0, rel=0.02)
        assert row.time_low_s <= row.time_s <= row.time_high_s >= row.time_p90_s
    # the on-demand rows are those of a plan without spot
    plain = _plan(None).candidates  # type: ignore[attr-defined]
    assert tuple(r for r in plan.candidates if r.market == "on-demand") == plain  # type: ignore[attr-defined]


def test_revocations_lengthen_a_spot_run_and_lower_its_chance_to_meet_the_deadline():
    calm, storm = _rows(_plan(_spot(1e-4)), "spot"), _rows(_plan(_spot(0.5)), "spot")
    for n in calm:
        assert storm[n].revocations_mean > 1.0
        assert storm[n].time_s > calm[n].time_s
    deadline = 1.05 * calm[2].time_s
    tight = _rows(_plan(_spot(0.5), deadline_s=deadline), "spot")
    assert tight[2].p_meet_deadline < 0.5 and not tight[2].meets_deadline
    easy = _rows(_plan(_spot(1e-4), deadline_s=deadline), "spot")
    assert easy[2].p_meet_deadline >= 0.9 and easy[2].meets_deadline


def test_the_same_seed_gives_the_same_plan():
    a, b = _plan(_spot(0.3)), _plan(_spot(0.3))
    assert a.candidates == b.candidates  # type: ignore[attr-defined]
    c = _plan(_spot(0.3, seed=7))
    assert _rows(c, "spot")[1].time_s != _rows(a, "spot")[1].time_s


def test_lora_checkpoints_its_adapters_but_a_restart_reads_the_frozen_base_back():
    full, lora = _rows(_plan(_spot(0.2)), "spot"), _rows(_plan(_spot(0.2), lora=16), "spot")
    assert lora[1].checkpoint_s < 0.1 * full[1].checkpoint_s
    assert lora[1].checkpoint_s >= 3.0  # the fixed part
    # a revocation still costs a LoRA run its VM start-up, the restart and the frozen base
    # read back (7B in bf16 on 8 GPUs at 1 GB/s a node: over 13 s) on top of the lost work
    calm = _rows(_plan(_spot(1e-4), lora=16), "spot")
    lost = (lora[1].time_s - calm[1].time_s) / lora[1].revocations_mean
    assert lost > 120.0 + 100.0 + 13.0


def test_a_spot_option_without_spot_inputs_and_bad_settings_are_refused():
    catalog = load_catalog()
    with pytest.raises(InvalidSpecError, match="spot"):
        plan_llm(
            llm_model("llama-2-7b"), offer_nodes(OFFERS, frozenset(), spot=True),
            {g.name: g for g in catalog.gpus}, tokens=1e9, global_batch=256, seq_len=2048,
            max_gpus=8, space=LayoutSpace(), efficiency=RooflineEfficiency(), tcp=TCP_DEFAULT,
        )  # fmt: skip
    for bad in ({"storage_gb_s": 0.0}, {"restart_s": -1.0}, {"min_p_meet": 1.5}):
        with pytest.raises(InvalidSpecError):
            dataclasses.replace(_spot(0.1), **bad)  # type: ignore[arg-type]
    assert np.isfinite(_spot(0.1).storage_gb_s)


def test_shapes_that_cannot_matter_are_not_simulated_and_the_plan_says_so():
    """Revocations every 3 minutes outlast no restart (2 min start-up + 100 s): stalled; a
    spot price above the on-demand one makes every shape dearer than its on-demand twin;
    neither is simulated, and the summary counts them."""
    stalled = _plan(_spot(20.0))
    assert not _rows(stalled, "spot")
    assert "left out 2 stalled by revocations" in stalled.spot_summary  # type: ignore[attr-defined]
    assert "0 of the rest's front simulated" in stalled.spot_summary  # type: ignore[attr-defined]
    dear = _plan(_spot(1e-4), offers=[_offer("r1", 98.0, None), _offer("r2", 100.0, 150.0)])
    assert not _rows(dear, "spot")
    assert "2 dearer than 1.25 x the same shape on demand" in dear.spot_summary  # type: ignore[attr-defined]
    assert _plan(None).spot_summary == ""  # type: ignore[attr-defined]


def test_managed_recovery_moves_replacements_that_wait_for_capacity():
    """Replacements wait an hour for capacity at home; moved after 10 minutes to another
    region (where there is no gap) the job finishes sooner, and the row says where to."""

    def risk(move: bool) -> RiskInputs:
        return RiskInputs(
            lifetime=lambda gpu, region, provider: ExponentialLifetime(hazard_per_hour=0.2),
            startup_spot_s=120.0, startup_on_demand_s=120.0, startup_mean_s=120.0,
            capacity_gap=lambda gpu, region, provider: 3600.0 if region == "r2" else 0.0,
            move_to=(lambda provider, instance, home: ("r3", 40.0, 99.0)) if move else None,
            move_after_s=600.0,
        )  # fmt: skip

    stay = _rows(_plan(LlmSpot(risk=risk(False), storage_gb_s=1.0, restart_s=100.0, runs=300)),
                 "spot")  # fmt: skip
    move = _rows(_plan(LlmSpot(risk=risk(True), storage_gb_s=1.0, restart_s=100.0, runs=300)),
                 "spot")  # fmt: skip
    assert stay[1].moved_to is None and move[1].moved_to == "r3"
    assert move[1].moves_mean > 0.5
    assert move[1].time_s < stay[1].time_s
