"""The SkyPilot catalog importer on small fixtures in SkyPilot's v8 format."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from gpucast.catalog import load_catalog, write_offers_csv
from gpucast.catalog.skypilot import import_skypilot
from gpucast.domain.errors import DataFormatError, InvalidSpecError

FIX = Path(__file__).resolve().parent / "fixtures"
DAY = date(2026, 1, 2)


def _vms(tmp_path: Path, *rows: str) -> Path:
    """A SkyPilot vms.csv of ``rows`` with the importer's required columns."""
    vms = tmp_path / "vms.csv"
    head = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region"
    vms.write_text("\n".join([head, *rows]) + "\n")
    return vms


def _by(offers, region, it):  # type: ignore[no-untyped-def]
    return next(o for o in offers if o.region == region and o.instance_type == it)


def test_aws_collapses_zones_and_skips_odd_rows() -> None:
    got = import_skypilot(FIX / "aws_vms.csv", "aws", as_of=DAY)
    offers, skipped = got.offers, got.skipped
    p3 = _by(offers, "us-east-1", "p3.2xlarge")
    assert (p3.gpu, p3.gpus, p3.on_demand_usd_per_hour, p3.spot_usd_per_hour) == (
        "V100-16GB",
        1,
        3.06,
        0.88,
    )
    assert p3.network_gbps == 10 and p3.as_of == DAY  # network from the built-in offer
    assert _by(offers, "us-east-1", "p3dn.24xlarge").gpu == "V100-32GB"  # from GpuInfo memory
    assert _by(offers, "us-west-1", "p5.48xlarge").spot_usd_per_hour is None
    c5 = _by(offers, "us-east-1", "c5.2xlarge")
    assert c5.gpu is None and c5.spot_usd_per_hour == 0.132
    assert len(offers) == 5
    text = "\n".join(skipped)
    assert "fractional GPU" in text and "Radeon Pro V520" in text and "'Price'" in text


def test_gcp_adds_accelerator_rows_and_honours_700_sentinel() -> None:
    got = import_skypilot(FIX / "gcp_vms.csv", "gcp", as_of=DAY)
    offers, skipped = got.offers, got.skipped
    a2 = _by(offers, "us-central1", "a2-highgpu-1g")
    assert a2.gpu == "A100-40GB" and a2.gpus == 1
    assert a2.on_demand_usd_per_hour == pytest.approx(0.73948 + 2.933908)
    assert a2.spot_usd_per_hour == pytest.approx(0.36975 + 0.8802)
    t4 = _by(offers, "us-central1", "n1-standard-8+1xT4")
    assert t4.on_demand_usd_per_hour == pytest.approx(0.379998 + 0.35)
    assert t4.spot_usd_per_hour == pytest.approx(0.08 + 0.10)  # cheapest zone
    assert _by(offers, "us-central1", "n1-standard-8+4xT4").gpus == 4
    eu_t4 = _by(offers, "europe-west4", "n1-standard-8+1xT4")
    assert eu_t4.spot_usd_per_hour is None  # 700.0 = no preemptible offer
    assert not [o for o in offers if o.region == "europe-west4" and o.gpu == "A100-40GB"]
    assert _by(offers, "us-central1", "n1-standard-4").gpu is None
    text = "\n".join(skipped)
    assert "no 1xA100 accelerator price in europe-west4" in text
    assert "TPU" in text and "asia-east1" in text


def test_azure_rows_per_region() -> None:
    got = import_skypilot(FIX / "azure_vms.csv", "azure", as_of=DAY)
    offers, skipped = got.offers, got.skipped
    assert {(o.region, o.instance_type) for o in offers} == {
        ("eastus", "Standard_NC6s_v3"),
        ("westeurope", "Standard_NC6s_v3"),
        ("eastus", "Standard_NC24ads_A100_v4"),
        ("eastus", "Standard_D8s_v3"),
    }
    assert _by(offers, "eastus", "Standard_NC24ads_A100_v4").gpu == "A100-80GB"
    assert any("M60" in s for s in skipped)


def test_round_trip_through_loader(tmp_path: Path) -> None:
    offers = import_skypilot(FIX / "gcp_vms.csv", "gcp", as_of=DAY).offers
    out = tmp_path / "offers.csv"
    write_offers_csv(offers, out)
    merged = load_catalog(out)
    got = merged.find_offers(provider="gcp", region="us-central1", gpu="T4")
    assert any(o.instance_type == "n1-standard-8+4xT4" and o.as_of == DAY for o in got)


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError):
        import_skypilot(FIX / "aws_vms.csv", "ibm")
    with pytest.raises(InvalidSpecError, match="file not found"):
        import_skypilot(tmp_path / "missing.csv", "aws")
    broken = tmp_path / "vms.csv"
    broken.write_text("InstanceType,Price\nx,1\n")
    with pytest.raises(DataFormatError) as info:
        import_skypilot(broken, "aws")
    assert info.value.line == 1


def test_a_price_above_the_ceiling_is_skipped_and_refused_by_the_loader(tmp_path: Path) -> None:
    """QA session 36: a SkyPilot row priced 1e12 US$/h was imported and listed as an offer,
    where `--price` refuses more than 1e6 US$/h per GPU as a typo."""
    vms = _vms(
        tmp_path,
        "p3.2xlarge,V100,1,8,61,3.06,0.918,us-east-1",
        "p4d.24xlarge,A100,8,96,1152,1e12,9,us-east-1",
    )
    got = import_skypilot(vms, "aws", as_of=DAY)
    offers, skipped = got.offers, got.skipped
    assert [o.instance_type for o in offers] == ["p3.2xlarge"]
    assert "line 3 (p4d.24xlarge in us-east-1)" in skipped[0] and "8,000,000 US$/h" in skipped[0]
    out = tmp_path / "offers.csv"
    write_offers_csv(offers, out)
    text = out.read_text().replace(",3.06,", ",2000000,")  # 2e6 US$/h for one GPU
    out.write_text(text)
    with pytest.raises(DataFormatError, match="on_demand_usd_per_hour: must be <= 1,000,000"):
        load_catalog(out)


def test_an_assumed_network_and_a_dropped_spot_price_are_said(tmp_path: Path) -> None:
    """QA session 38: an instance type the built-in catalog lacks got network_gbps 10 and a
    spot price above on-demand was dropped, neither said in the row's note or anywhere."""
    vms = _vms(
        tmp_path,
        "p3.2xlarge,V100,1,8,61,3.06,0.918,us-east-1",
        "p9.new,V100,8,96,768,30,40,us-east-1",
    )
    got = import_skypilot(vms, "aws", as_of=DAY)
    known, new = _by(got.offers, "us-east-1", "p3.2xlarge"), _by(got.offers, "us-east-1", "p9.new")
    assert known.network_gbps == 10 and new.network_gbps == 10 and new.spot_usd_per_hour is None
    assert got.notes[0] == "imported from SkyPilot catalog"  # its network is the built-in one
    assert "network_gbps 10 assumed" in got.notes[1] and "spot 40 > on-demand 30" in got.notes[1]
    network, spot = got.warnings
    assert network.startswith("network_gbps: 10 Gbit/s assumed for 1 of 2 offers (p9.new in")
    assert spot.startswith("spot_usd_per_hour:") and "1 of 2 offers (p9.new in us-east-1)" in spot
    out = tmp_path / "offers.csv"
    write_offers_csv(got.offers, out, notes=got.notes)
    assert "network_gbps 10 assumed" in out.read_text().splitlines()[2]


def test_a_file_of_another_cloud_is_refused() -> None:
    """QA session 38: `--cloud aws` on a GCP vms.csv wrote GCP's machines as aws offers in
    us-central1 (exit 0)."""
    with pytest.raises(InvalidSpecError) as info:
        import_skypilot(FIX / "gcp_vms.csv", "aws", as_of=DAY)
    assert str(info.value).startswith("cloud: is aws, but the regions of gcp_vms.csv (")
    assert str(info.value).endswith("are gcp's; pass --cloud gcp")


def test_an_n1_type_with_attached_gpus_has_its_hosts_network(tmp_path: Path) -> None:
    """QA session 38: n1-standard-8+2xT4 (no built-in offer of that type) got the assumed
    10 Gbit/s where its host, n1-standard-8, has 16 in the built-in catalog."""
    vms = _vms(
        tmp_path, "n1-standard-8,,,8,30,0.38,0.08,us-central1", ",T4,2,,,0.70,0.22,us-central1"
    )
    got = import_skypilot(vms, "gcp", as_of=DAY)
    host = load_catalog().find_offers(provider="gcp", region="us-central1", cpu_only=True)
    n1 = next(o for o in host if o.instance_type == "n1-standard-8")
    assert _by(got.offers, "us-central1", "n1-standard-8+2xT4").network_gbps == n1.network_gbps
    assert n1.network_gbps != 10 and not got.warnings
