"""Lookups, filters and malformed-file errors of the catalog loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucast.catalog import load_catalog, write_offers_csv
from gpucast.catalog.loader import (
    OFFER_COLUMNS,
    offers_to_csv,
    parse_gpus,
    parse_mig_profiles,
    parse_offers,
)
from gpucast.domain.errors import (
    DataFormatError,
    InvalidInputError,
    UnknownGpuError,
    UnknownProviderError,
    UnknownRegionError,
)


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("V100", "V100-16GB"),
        ("v100", "V100-16GB"),
        ("A100", "A100-40GB"),
        ("H100", "H100-SXM"),
        ("Tesla K80", "K80"),
        ("tesla k80", "K80"),
        ("h100 pcie", "H100-PCIe"),
        ("nvidia-tesla-t4", "T4"),
        ("a100_80gb", "A100-80GB"),
    ],
)
def test_aliases(alias: str, name: str) -> None:
    assert load_catalog().gpu(alias).name == name


@given(
    st.sampled_from(["K80", "T4", "L4", "A10G", "H200", "B200", "MI300X"]),
    st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_lookup_ignores_case(name: str, upper: list[bool]) -> None:
    mixed = "".join(c.upper() if upper[i % len(upper)] else c.lower() for i, c in enumerate(name))
    assert load_catalog().gpu(mixed).name == name


def test_unknown_gpu_lists_close_matches() -> None:
    with pytest.raises(UnknownGpuError) as info:
        load_catalog().gpu("V10")
    assert "V100" in str(info.value)
    assert info.value.exit_code == 2


def test_find_offers_filters() -> None:
    c = load_catalog()
    spot = c.find_offers(provider="aws", gpu="V100", spot=True)
    assert spot and all(o.gpu == "V100-16GB" and o.spot_usd_per_hour for o in spot)
    cpu = c.find_offers(provider="gcp", region="us-central1", cpu_only=True)
    assert cpu and all(o.gpu is None and o.gpus == 0 for o in cpu)
    gpu_only = c.find_offers(provider="azure", cpu_only=False)
    assert gpu_only and all(o.gpu is not None for o in gpu_only)
    assert set(c.regions("aws")) >= {"us-east-1", "us-west-2", "eu-west-1"}


def test_find_offers_unknown_names() -> None:
    c = load_catalog()
    with pytest.raises(UnknownRegionError) as info:
        c.find_offers(provider="aws", region="us-east-9")
    assert "us-east-1" in str(info.value)
    with pytest.raises(UnknownProviderError):
        c.find_offers(provider="ibm")
    with pytest.raises(UnknownGpuError):
        c.find_offers(gpu="X9000")


GOOD = "aws,us-east-1,p3.2xlarge,V100,1,8,61,10,3.06,0.9,https://example.com,2025-01-01"


def _offers_csv(row: str) -> str:
    return ",".join(OFFER_COLUMNS) + "\n" + GOOD + "\n" + row + "\n"


@pytest.mark.parametrize(
    ("row", "column"),
    [
        ("aws,us-east-1,x,,0,8,abc,10,1.0,,https://e.com,2025-01-01", "memory_gib"),
        ("aws,us-east-1,x,,0,8,16,10,nan,,https://e.com,2025-01-01", "on_demand_usd_per_hour"),
        ("aws,us-east-1,x,,0,8,16,10,-1,,https://e.com,2025-01-01", "on_demand_usd_per_hour"),
        ("aws,us-east-1,x,,0,8,16,10,1.0,inf,https://e.com,2025-01-01", "spot_usd_per_hour"),
        # QA session 38: a spot price above on-demand (the importer drops it as stale)
        ("aws,us-east-1,x,,0,8,16,10,1.0,1.5,https://e.com,2025-01-01", "spot_usd_per_hour"),
        ("aws,us-east-1,x,,0,8,16,10,1.0,,https://e.com,yesterday", "as_of"),
        ("aws,us-east-1,x,Z80,1,8,16,10,1.0,,https://e.com,2025-01-01", "gpu"),
        ("aws,us-east-1,x,,0,8,16,10,1.0,,,2025-01-01", "source_url"),
        ("ibm,us-east-1,x,,0,8,16,10,1.0,,https://e.com,2025-01-01", "provider"),
    ],
)
def test_malformed_offer_rows_name_line_and_column(row: str, column: str) -> None:
    with pytest.raises(DataFormatError) as info:
        parse_offers(_offers_csv(row), "extra.csv", load_catalog().gpus)
    err = info.value
    assert (err.path, err.line, err.column) == ("extra.csv", 3, column)
    assert "extra.csv, line 3" in str(err)


def test_missing_column_is_reported() -> None:
    text = "provider,region\naws,us-east-1\n"
    with pytest.raises(DataFormatError) as info:
        parse_offers(text, "extra.csv", load_catalog().gpus)
    assert info.value.line == 1 and info.value.column == "instance_type"


def test_malformed_gpu_and_mig_files() -> None:
    builtin = Path(__file__).resolve().parents[2] / "src/gpucast/catalog/data"
    gpus = (builtin / "gpus.csv").read_text()
    bad = gpus.replace("K80,nvidia,Kepler,4.37", "K80,nvidia,Kepler,-4.37")
    with pytest.raises(DataFormatError) as info:
        parse_gpus(bad, "gpus.csv")
    assert (info.value.line, info.value.column) == (2, "fp32_tflops")
    mig = (
        "gpu,name,compute_slices,memory_gib,max_instances,source_url,as_of\n"
        "A100-40GB,9g.5gb,9,5,1,https://e.com,2025-01-01\n"
    )
    with pytest.raises(DataFormatError) as info:
        parse_mig_profiles(mig, "mig.csv")
    assert info.value.column == "compute_slices"
    too_big = (
        "gpu,name,compute_slices,memory_gib,max_instances,source_url,as_of\n"
        "T4,1g.99gb,1,99,1,https://e.com,2025-01-01\n"
    )
    with pytest.raises(DataFormatError):
        parse_gpus(gpus, "gpus.csv", parse_mig_profiles(too_big, "mig.csv"))


def test_extra_offers_add_and_override(tmp_path: Path) -> None:
    base = load_catalog()
    original = base.find_offers(provider="aws", region="us-east-1", gpu="V100")[0]
    from dataclasses import replace

    cheaper = replace(original, on_demand_usd_per_hour=1.23, spot_usd_per_hour=None)
    new = replace(original, region="sa-east-1", instance_type="p3.2xlarge")
    path = tmp_path / "offers.csv"
    write_offers_csv([cheaper, new], path)
    merged = load_catalog(path)
    assert len(merged.offers) == len(base.offers) + 1
    same = [
        o
        for o in merged.offers
        if (o.provider, o.region, o.instance_type)
        == (original.provider, original.region, original.instance_type)
    ]
    assert [o.on_demand_usd_per_hour for o in same] == [1.23]
    assert "sa-east-1" in merged.regions("aws")
    assert load_catalog() is base  # the built-in cache is untouched


def test_missing_offers_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="offers: file not found"):
        load_catalog(tmp_path / "nope.csv")


def test_bad_placements_in_the_profile_file_name_line_and_column() -> None:
    head = "gpu,name,compute_slices,memory_gib,max_instances,memory_slices,sm_count,placements"
    tail = ",https://x,2026-12-03"
    head += ",source_url,as_of\n"
    with pytest.raises(DataFormatError, match=r"line 2, column 'placements'.*runs past"):
        parse_mig_profiles(head + "X,3g.20gb,3,20,2,4,42,0;6" + tail, "m.csv")
    with pytest.raises(DataFormatError, match="repeated start offset"):
        parse_mig_profiles(head + "X,1g.5gb,1,5,7,1,14,0;0" + tail, "m.csv")
    with pytest.raises(DataFormatError, match=r"column 'memory_slices'.*<= 8"):
        parse_mig_profiles(head + "X,1g.5gb,1,5,7,9,14,0" + tail, "m.csv")
    ok = parse_mig_profiles(head + "X,1g.5gb,1,5,7,,," + tail, "m.csv")
    assert ok["X"][0].placements == () and ok["X"][0].sm_count is None


def test_estimated_prices_are_marked_and_survive_a_round_trip() -> None:
    """Rows whose note starts UNVERIFIED are the catalog's guesses (README "Facts and data":
    47 of them); written back without notes they keep the mark, read rows stay unmarked."""
    catalog = load_catalog()
    guessed = [o for o in catalog.offers if o.price_estimated]
    assert len(guessed) == 47 and all(o.provider and o.as_of for o in guessed)
    sample = [guessed[0], next(o for o in catalog.offers if not o.price_estimated)]
    again = parse_offers(offers_to_csv(sample), "round-trip.csv", catalog.gpus)
    assert [o.price_estimated for o in again] == [True, False]


def test_an_instance_type_is_the_same_machine_in_every_region() -> None:
    """GPUs, vCPUs, memory and network belong to the instance type, not the region (the
    NDm A100 v4's eastus row said 1,800 GiB where its other regions say 1,900)."""
    facts: dict[tuple[str, str], set[tuple[object, ...]]] = {}
    for o in load_catalog().offers:
        key = (o.provider, o.instance_type)
        facts.setdefault(key, set()).add((o.gpu, o.gpus, o.vcpus, o.memory_gib, o.network_gbps))
    assert {k: v for k, v in facts.items() if len(v) > 1} == {}
