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


def _offers(
    tmp_path: Path,
    row: str = "gcp,us-central1,bargain-t4,T4,1,8,30,16,0.01,0.005,https://example.com,",
) -> Path:
    path = tmp_path / "offers.csv"
    path.write_text(HEADER + row + "2026-12-01,a test price\n", encoding="utf-8")
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


def _guessed(tmp_path: Path, row: str) -> Path:
    path = tmp_path / "guessed.csv"
    path.write_text(HEADER + row + ",https://example.com,2026-12-05,UNVERIFIED: a guess\n")
    return path


def test_plans_name_the_estimated_prices_they_rest_on(tmp_path: Path) -> None:
    """A row whose note starts UNVERIFIED (prices not read from a source) is priced, and a
    plan whose shown rows rest on it says so in one note naming it (and whether it is the
    pick); a plan on read prices says nothing."""
    guessed = _guessed(tmp_path, "gcp,us-central1,guessed-t4,T4,1,8,30,16,0.01,0.005")
    plan = gpucast.plan_train(offers=guessed, **PLAN)
    assert plan.best.instance_type == "guessed-t4"
    (note,) = [n for n in plan.notes if n.startswith("estimated prices")]
    assert "gcp/us-central1 guessed-t4 (the pick)" in note and "UNVERIFIED" in note
    assert not any(n.startswith("estimated prices") for n in gpucast.plan_train(**PLAN).notes)
    # the built-in catalog marks its own guesses the same way (AWS p2 K80 rows)
    k80 = gpucast.plan_train(**{**PLAN, "provider": "aws", "gpu": "K80"})
    assert any("p2." in n and n.startswith("estimated prices") for n in k80.notes)


def test_plan_serve_names_the_servers_priced_by_estimates() -> None:
    k80 = gpucast.plan_serve(model=["resnet50:20"], slo="p99<2000ms", gpu=["K80"],
                             provider=["aws"], no_cpu=True, saturation_s=0)  # fmt: skip
    assert "K80 (aws/us-east-1 p2.xlarge)" in k80.plan.assumptions["estimated prices"]
    t4 = gpucast.plan_serve(model=["resnet50:20"], slo="p99<2000ms", gpu=["T4"],
                            provider=["gcp"], no_cpu=True, saturation_s=0)  # fmt: skip
    assert "estimated prices" not in t4.plan.assumptions


def test_plan_llm_train_takes_offers_and_names_estimated_prices(tmp_path: Path) -> None:
    common = {"model": "llama-3-8b", "tokens": 1e10, "global_batch": 512, "max_gpus": 16,
              "provider": ["aws"], "gpu": ["H100"]}  # fmt: skip
    plain = gpucast.plan_llm_train(**common)
    assert "estimated prices" not in plain.assumptions
    guessed = _guessed(tmp_path, "aws,us-west-1,p5.48xlarge,H100-SXM,8,192,2048,3200,5.0,")
    plan = gpucast.plan_llm_train(**common, offers=guessed)
    assert plan.best.region == "us-west-1" and plan.best.price_estimated
    assert "aws/us-west-1 p5.48xlarge (the pick)" in plan.assumptions["estimated prices"]
    with pytest.raises(InvalidInputError, match="offers: adds to the cloud catalog"):
        gpucast.plan_llm_train(
            model="llama-3-8b", tokens=1e10, global_batch=512, cluster="DGX-H100", offers=guessed
        )


def test_every_verb_that_prices_offers_takes_the_offers_file(tmp_path: Path) -> None:
    """The serving, serverless and embedding verbs price the same refreshed offers as plan
    train (they read the built-in catalog alone before session 19, $GPUCAST_OFFERS included)."""
    offers = _offers(tmp_path)
    served = gpucast.simulate_serve(
        model="resnet50", gpu="T4", rate=50, duration_s=5, offers=offers
    )
    assert "bargain-t4" in served.sources["price"]
    plan = gpucast.plan_serve(
        model=["resnet50:50"], slo="p99<200ms", gpu=["T4"], provider=["gcp"], no_cpu=True,
        saturation_s=0, offers=offers,
    )  # fmt: skip
    assert plan.best.cost_usd_per_hour == pytest.approx(0.01)
    functions = gpucast.simulate_serverless(
        synthetic=5, minutes=10, models=["mlp"], gpu="T4", offers=offers
    )
    assert functions.price_usd_per_hour == pytest.approx(0.01)
    tables = gpucast.plan_embeddings(model="dlrm-dcnv2", gpu="T4", gpus=1, offers=offers)
    assert "bargain-t4" in tables.assumptions["node"]
    with pytest.raises(InvalidInputError, match="offers: adds to the cloud catalog"):
        gpucast.plan_embeddings(model="dlrm-dcnv2", cluster="D54U-3U", offers=offers)


def test_an_offer_of_a_meshed_gpu_type_plans_on_its_mesh(tmp_path: Path) -> None:
    # an 8 x Gaudi 2 instance in a user's offers file: plan llm-train prices it on the
    # catalog's HLS-Gaudi2 mesh -- the same row as that server as a cluster, and slower than
    # the same links through a switch would be (tensor-parallel pairs reach one peer's link)
    path = _offers(tmp_path, "aws,us-east-1,gaudi2-8x,Gaudi2,8,160,1024,2400,10.0,,https://e.com,")
    common = {"model": "llama-2-70b", "tokens": 1e8, "seq_len": 8192, "global_batch": 8,
              "lora_rank": 16, "precision": "fp8"}  # fmt: skip
    offered = gpucast.plan_llm_train(offers=path, gpus=("Gaudi2",), max_gpus=8, **common)
    cluster = {"cluster": "HLS-Gaudi2", "cluster_nodes": 1, "cluster_price_usd_per_gpu_hour": 1.25}
    meshed = gpucast.plan_llm_train(**cluster, **common)
    switched = gpucast.plan_llm_train(
        **cluster, cluster_set=(("intra_node", "nvswitch"),), **common
    )
    assert offered.best.gpus == meshed.best.gpus == 8
    assert offered.best.time_s == pytest.approx(meshed.best.time_s)
    assert meshed.best.time_s > switched.best.time_s
