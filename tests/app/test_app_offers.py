"""``--offers FILE`` (and ``$GPUCAST_OFFERS``): refreshed prices reach plan and simulate."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError

HEADER = (
    "provider,region,instance_type,gpu,gpus,vcpus,memory_gib,network_gbps,"
    "on_demand_usd_per_hour,spot_usd_per_hour,source_url,as_of,note\n"
)


def _offers(tmp_path: Path) -> Path:
    path = tmp_path / "offers.csv"
    path.write_text(
        HEADER + "gcp,us-central1,bargain-t4,T4,1,8,30,16,0.01,0.005,https://example.com,"
        "2026-12-01,a test price\n",
        encoding="utf-8",
    )
    return path


PLAN = {"workload": "mlp", "steps": 2000, "provider": "gcp", "gpu": "T4", "max_gpus": 2,
        "runs": 50, "batch_sizes": "32", "spot": False}  # fmt: skip


def test_plan_train_prices_the_offers_file(tmp_path: Path) -> None:
    plain = gpucast.plan_train(**PLAN)
    assert "bargain-t4" not in plain.best.instance_type
    plan = gpucast.plan_train(offers=_offers(tmp_path), **PLAN)
    assert plan.best.instance_type == "bargain-t4"
    catalog = next(a for a in plan.assumptions if a.name == "catalog")
    assert "offers.csv" in catalog.value


def test_the_configured_default_is_gpucast_offers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUCAST_OFFERS", str(_offers(tmp_path)))
    plan = gpucast.plan_train(**PLAN)
    assert plan.best.instance_type == "bargain-t4"
    listed = gpucast.catalog_offers(provider="gcp", gpu="T4")
    assert any(o.instance_type == "bargain-t4" for o in listed.offers)


def test_simulate_train_prices_the_offers_file(tmp_path: Path) -> None:
    sim = gpucast.simulate_train(
        instance="bargain-t4", workers=2, strategy="ddp", region="us-central1",
        provider="gcp", workload="mlp", steps=2000, runs=20, offers=_offers(tmp_path),
    )  # fmt: skip
    assert any("offers.csv" in note for note in sim.notes)
    hours = float(sim.on_demand.duration_s.mean()) / 3600.0
    assert float(sim.on_demand.cost_usd.mean()) == pytest.approx(2 * 0.01 * hours, rel=0.05)


def test_a_bad_offers_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("provider,region\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"bad\.csv"):
        gpucast.plan_train(offers=bad, **PLAN)
