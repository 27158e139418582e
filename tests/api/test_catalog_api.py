"""``gpucast.catalog_gpus``, ``catalog_offers``, ``import_skypilot``: results, frames, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.app.catalog import CatalogOffersRequest, ImportSkypilotRequest
from gpucast.domain.errors import (
    DataFormatError,
    InvalidSpecError,
    UnknownGpuError,
    UnknownProviderError,
)

FIX = Path(__file__).resolve().parents[1] / "catalog" / "fixtures"


def test_gpus_result_dict_and_frame() -> None:
    result = gpucast.catalog_gpus()
    names = {g.name for g in result.gpus}
    assert {"K80", "H100-SXM", "MI300X"} <= names
    data = result.to_dict()
    a100 = next(g for g in data["gpus"] if g["name"] == "A100-40GB")
    assert a100["mig_profiles"][0]["compute_slices"] == 1 and a100["as_of"]
    frame = result.to_frame()
    assert len(frame) == len(result.gpus) and "memory_gib" in frame.columns


def test_offers_with_keyword_options_and_a_request() -> None:
    result = gpucast.catalog_offers(provider="gcp", gpu="k80", spot=True)
    assert result.offers and all(o.gpu == "K80" and o.spot_usd_per_hour for o in result.offers)
    data = result.to_dict()
    assert data["count"] == len(data["offers"]) == len(result.offers)
    assert data["snapshot_date"] == result.snapshot_date.isoformat()
    cpu = gpucast.catalog_offers(CatalogOffersRequest(cpu_only=True))
    assert cpu.offers and all(o.gpus == 0 for o in cpu.offers)
    frame = cpu.to_frame()
    assert len(frame) == len(cpu.offers) and "on_demand_usd_per_hour" in frame.columns


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"gpu": "V10"}, UnknownGpuError),
        ({"provider": "ibm"}, UnknownProviderError),
        ({"spot": "maybe"}, InvalidSpecError),
        ({"gpu": "V100", "cpu_only": True}, InvalidSpecError),
        ({"regoin": "us-east-1"}, InvalidSpecError),
    ],
)
def test_bad_offer_filters_are_typed_errors(options: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        gpucast.catalog_offers(**options)


def test_import_then_use_offers(tmp_path: Path) -> None:
    out = tmp_path / "offers.csv"
    result = gpucast.import_skypilot(file=FIX / "gcp_vms.csv", cloud="gcp", out=out)
    assert result.to_dict() == {
        "imported": 8,
        "skipped": 4,
        "skipped_reasons": list(result.skipped_reasons),
        "out": str(out),
        "warnings": [],  # every fixture instance type has a built-in network figure
    }
    assert len(result.to_frame()) == 8 and out.is_file()
    offers = gpucast.catalog_offers(offers=out, gpu="T4", region="us-central1")
    assert "n1-standard-8+4xT4" in {o.instance_type for o in offers.offers}
    again = gpucast.import_skypilot(
        ImportSkypilotRequest(file=FIX / "aws_vms.csv", cloud="aws", out=tmp_path / "a.csv")
    )
    assert (len(again.offers), len(again.skipped_reasons)) == (5, 3)


def test_bad_imports_are_typed_errors_and_write_nothing(tmp_path: Path) -> None:
    vms = FIX / "aws_vms.csv"
    with pytest.raises(InvalidSpecError, match="cloud"):
        gpucast.import_skypilot(file=vms, cloud="ibm", out=tmp_path / "o.csv")
    with pytest.raises(InvalidSpecError, match="out: must differ"):
        gpucast.import_skypilot(file=vms, cloud="aws", out=vms)
    with pytest.raises(InvalidSpecError, match="out: is required"):
        gpucast.import_skypilot(file=vms, cloud="aws")
    assert not (tmp_path / "o.csv").exists()
    bad = tmp_path / "bad.csv"
    bad.write_text("provider,region\n")
    with pytest.raises(DataFormatError, match=r"bad\.csv"):
        gpucast.catalog_offers(offers=bad)


def test_no_offer_says_why() -> None:
    """QA session 38: `catalog offers --gpu GB200` printed an empty table and nothing else."""
    none = gpucast.catalog_offers(gpu="GB200")
    assert none.offers == () and len(none.warnings) == 1
    assert none.warnings[0].startswith("gpu: no offer of the catalog sells GB200;")
    assert "catalog systems --gpu GB200" in none.warnings[0]
    assert none.to_dict()["warnings"] == list(none.warnings)
    # a GPU that is sold (GCP sells H100 elsewhere), filters that exclude each other
    filtered = gpucast.catalog_offers(gpu="H100", provider="gcp", region="us-east1", spot=True)
    assert filtered.offers == ()
    assert filtered.warnings[0].startswith("no offer matches all of these filters")
    assert gpucast.catalog_offers(gpu="V100", provider="gcp").warnings == ()
