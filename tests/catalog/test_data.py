"""Integrity of the built-in catalog data files."""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from gpucast.catalog import load_catalog

REQUIRED_GPUS = (
    "K80",
    "P4",
    "P100",
    "V100-16GB",
    "V100-32GB",
    "T4",
    "A10G",
    "L4",
    "L40S",
    "A100-40GB",
    "A100-80GB",
    "H100-SXM",
    "H100-PCIe",
    "H200",
    "B200",
    "MI300X",
)


def test_every_required_gpu_is_present() -> None:
    names = set(load_catalog().gpu_names())
    assert set(REQUIRED_GPUS) <= names


def test_gpu_rows_have_source_and_date_and_dense_ordering() -> None:
    for g in load_catalog().gpus:
        assert g.source_url.startswith("https://"), g.name
        assert g.as_of.year >= 2019
        # dense tensor rates never below the FP32 ALU rate; FP8 >= FP16, BF16 >= TF32 where present
        for low, high in (
            (g.fp32_tflops, g.tf32_tflops),
            (g.tf32_tflops, g.fp16_tflops),
            (g.fp16_tflops, g.fp8_tflops),
            (g.fp32_tflops, g.bf16_tflops),
            (g.tf32_tflops, g.bf16_tflops),
            (g.bf16_tflops, g.fp8_tflops),
        ):
            if low is not None and high is not None:
                assert high >= low, g.name


#: The catalog's fact files: each row must say where its figures come from and when they were read.
FACT_FILES = (
    "gpus.csv",
    "mig_profiles.csv",
    "offers.csv",
    "systems.csv",
    "spot_markets.csv",
    "spot_scenarios.csv",
    "grid_carbon.csv",
    "ssd.csv",
    "topologies.csv",
)


@pytest.mark.parametrize("name", FACT_FILES)
def test_every_fact_row_has_a_source_and_a_date_not_in_the_future(name: str) -> None:
    # spot_markets, spot_scenarios, grid_carbon and ssd are read without a date check, so a
    # typo there would load silently: the shipped rows are held to the rule here
    text = resources.files("gpucast.catalog").joinpath("data", name).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows, name
    for line, row in enumerate(rows, start=2):
        assert row["source_url"].strip().startswith("https://"), (name, line)
        assert date.fromisoformat(row["as_of"]) <= date.today(), (name, line, row["as_of"])


def test_k80_is_per_die() -> None:
    k80 = load_catalog().gpu("K80")
    assert k80.memory_gib == 12 and 4.0 < k80.fp32_tflops < 4.5


def test_mig_profiles_are_sane() -> None:
    catalog = load_catalog()
    with_mig = {g.name for g in catalog.gpus if g.mig_profiles}
    assert {"A100-40GB", "A100-80GB", "H100-SXM", "H200", "B200"} <= with_mig
    for g in catalog.gpus:
        for p in g.mig_profiles:
            assert 1 <= p.compute_slices <= 7
            assert p.memory_gib <= g.memory_gib
            assert p.compute_slices * p.max_instances <= 7
            assert p.name.startswith(f"{p.compute_slices}g.")


def test_offers_reference_known_gpus_and_are_dated() -> None:
    catalog = load_catalog()
    names = set(catalog.gpu_names())
    for o in catalog.offers:
        assert o.gpu is None or o.gpu in names
        assert o.source_url.startswith("https://")
        assert o.on_demand_usd_per_hour > 0 and math.isfinite(o.on_demand_usd_per_hour)
        if o.spot_usd_per_hour is not None:
            assert o.spot_usd_per_hour < o.on_demand_usd_per_hour, o


def test_offer_keys_are_unique() -> None:
    keys = [(o.provider, o.region, o.instance_type) for o in load_catalog().offers]
    assert len(keys) == len(set(keys))


MAJOR = {
    "aws": ("K80", "V100-16GB", "T4", "A10G", "L4", "A100-40GB", "A100-80GB", "H100-SXM"),
    "gcp": ("K80", "P100", "V100-16GB", "T4", "L4", "A100-40GB", "H100-SXM"),
    "azure": ("K80", "V100-16GB", "T4", "A100-80GB", "H100-SXM"),
}


@pytest.mark.parametrize("provider", sorted(MAJOR))
def test_major_gpus_in_three_regions(provider: str) -> None:
    regions: dict[str | None, set[str]] = defaultdict(set)
    for o in load_catalog().find_offers(provider=provider):
        regions[o.gpu].add(o.region)
    for gpu in MAJOR[provider]:
        assert len(regions[gpu]) >= 3, (provider, gpu, regions[gpu])
    assert len(regions[None]) >= 3  # CPU-only (parameter servers, CPU inference)


def test_catalog_is_cached_and_snapshot_date() -> None:
    a, b = load_catalog(), load_catalog()
    assert a is b
    assert a.snapshot_date == max(o.as_of for o in a.offers)


def test_the_readme_counts_the_offer_rows_as_they_are() -> None:
    """QA session 38: the README said 251 of 304 offer rows were read from SkyPilot's catalog
    after nine g6e rows were added (259 of 312)."""
    root = Path(__file__).resolve().parents[2]
    with (root / "src/gpucast/catalog/data/offers.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    unverified = [r for r in rows if r["note"].upper().startswith("UNVERIFIED")]
    read = [r for r in rows if "skypilot-catalog" in r["source_url"] and r not in unverified]
    text = " ".join((root / "README.md").read_text().split())
    said = re.search(r"(\d+) of the (\d+) offer rows are read from pinned commits", text)
    assert said is not None
    assert (int(said[1]), int(said[2])) == (len(read), len(rows))
    assert f"the remaining {len(unverified)} (" in text
