"""The LLM planner: node counts, cheapest region, Pareto front and the pick."""

from __future__ import annotations

from datetime import date

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.llm import llm_model
from gpucast.domain.catalog import Offer
from gpucast.domain.errors import NoFeasiblePlanError
from gpucast.domain.parallel import LayoutSpace
from gpucast.plan.llm import cheapest_offers, node_counts, plan_llm
from gpucast.predict.collective import TCP_DEFAULT
from gpucast.predict.roofline import RooflineEfficiency


def _offer(
    instance: str, gpu: str, price: float, region: str = "r1", gbps: float = 3200.0
) -> Offer:
    return Offer(
        provider="aws", region=region, instance_type=instance, gpu=gpu, gpus=8, vcpus=96,
        memory_gib=1024, network_gbps=gbps, on_demand_usd_per_hour=price,
        spot_usd_per_hour=None, source_url="https://example.org", as_of=date(2026, 12, 2),
    )  # fmt: skip


def _plan(offers: list[Offer], model: str = "llama-2-7b", **kw: object) -> object:
    catalog = load_catalog()
    return plan_llm(
        llm_model(model), offers, {g.name: g for g in catalog.gpus},
        tokens=2e10, global_batch=256, seq_len=2048, max_gpus=64,
        space=LayoutSpace(micro_batch_sizes=(1, 2), zero_stages=(1,), recompute=("selective",)),
        efficiency=RooflineEfficiency(), tcp=TCP_DEFAULT, rdma_instances=frozenset({"fast"}),
        **kw,
    )  # fmt: skip


def test_node_counts_and_cheapest_region() -> None:
    assert node_counts(8, 64) == [1, 2, 4, 8]
    assert node_counts(8, 48) == [1, 2, 4, 6]
    assert node_counts(8, 4) == []
    offers = [_offer("a", "H100-SXM", 90.0, "r1"), _offer("a", "H100-SXM", 80.0, "r2")]
    assert [o.region for o in cheapest_offers(offers)] == ["r2"]


def test_front_pick_deadline_and_tcp() -> None:
    offers = [_offer("fast", "H100-SXM", 98.0), _offer("slow", "H100-SXM", 98.0)]
    plan = _plan(offers)
    rows = plan.candidates  # type: ignore[attr-defined]
    assert {r.nodes for r in rows} == {1, 2, 4, 8}
    fast = {r.nodes: r for r in rows if r.instance_type == "fast"}
    slow = {r.nodes: r for r in rows if r.instance_type == "slow"}
    # same GPUs and price; the TCP instance is never faster across nodes
    assert all(slow[n].time_s >= fast[n].time_s for n in fast)
    assert fast[1].time_s == pytest.approx(slow[1].time_s, rel=1e-9)
    pick = rows[plan.recommended]  # type: ignore[attr-defined]
    assert pick.cost_usd == min(r.cost_usd for r in rows)
    tight = _plan(offers, deadline_s=fast[8].time_s * 1.01)
    chosen = tight.candidates[tight.recommended]  # type: ignore[attr-defined]
    assert chosen.meets_deadline and chosen.time_s <= fast[8].time_s * 1.01
    none = _plan(offers, deadline_s=1.0)
    assert none.recommended is None  # type: ignore[attr-defined]


def test_nothing_runs_says_why() -> None:
    with pytest.raises(NoFeasiblePlanError, match="no offer runs"):
        _plan([_offer("tiny", "T4", 1.0)], model="gpt-3-175b")
