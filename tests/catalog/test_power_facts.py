"""Power facts in the GPU catalog: optional, sourced, and checked for consistency."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.loader import parse_gpus
from gpucast.domain.errors import DataFormatError

HEADER = (
    "name,vendor,architecture,fp32_tflops,tf32_tflops,fp16_tflops,bf16_tflops,fp8_tflops,"
    "memory_gib,memory_bandwidth_gbps,interconnect_gbps,pcie_generation,tdp_w,sm_count,"
    "idle_power_w,min_power_limit_w,max_power_limit_w,aliases,source_url,as_of"
)


def _row(idle: str, lo: str, hi: str) -> str:
    return (
        f"{HEADER}\nX,nvidia,Volta,14,,,,,16,900,,3,250,80,{idle},{lo},{hi},,https://x,2026-12-02\n"
    )


@pytest.mark.parametrize(
    ("name", "lo", "hi"),
    [
        ("V100-16GB", 150, 300),  # SXM2 (nvidia-smi -q)
        ("V100-32GB", 150, 300),
        ("V100-PCIe", 100, 250),  # the Zeus board
        ("P100", 125, 250),
        ("RTX6000", 100, 260),
        ("H100-SXM", 200, 700),
        # nvidia-smi outputs published on GitHub (each row's note names the file)
        ("T4", 60, 70),
        ("A10G", 100, 300),
        ("L4", 40, 72),
        ("L40S", 100, 350),
        ("A100-40GB", 100, 400),
        ("A100-80GB", 100, 400),  # a 500 W HGX board's minimum; the datasheet's 400 W kept
        ("A40", 100, 300),  # QA 35 E #16: `--power-limit auto` assumed 150 W
    ],
)
def test_power_limit_ranges_where_a_source_gives_them(name: str, lo: float, hi: float) -> None:
    g = load_catalog().gpu(name)
    assert (g.min_power_limit_w, g.max_power_limit_w) == (lo, hi)


def test_unknown_power_facts_stay_empty_and_max_is_the_board_power() -> None:
    c = load_catalog()
    assert c.gpu("K80").max_power_limit_w is None  # one die of a 300 W board: no per-die figure
    assert c.gpu("H100-PCIe").min_power_limit_w is None  # no published nvidia-smi output found
    for g in c.gpus:
        if g.max_power_limit_w is not None and g.vendor == "nvidia" and g.name != "RTX4090":
            assert g.max_power_limit_w == g.tdp_w, g.name
        assert g.idle_power_w is None or g.idle_power_w < (g.max_power_limit_w or 1e9)


def test_every_power_limit_range_names_its_source() -> None:
    """A row with a minimum power limit says in its note where the range comes from."""
    import csv
    from pathlib import Path

    import gpucast.catalog

    path = Path(gpucast.catalog.__file__).parent / "data" / "gpus.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["min_power_limit_w"]]
    assert len(rows) >= 12
    for row in rows:
        note = row["note"].lower()
        assert "power limit" in note and f"{float(row['min_power_limit_w']):g}" in note, row["name"]
        assert "https://" in note or "zeus_nsdi23/" in note, row["name"]


def test_the_pcie_v100_is_its_own_row_and_aliases_resolve() -> None:
    c = load_catalog()
    assert c.gpu("Tesla V100-PCIE-32GB").name == "V100-PCIe"
    assert c.gpu("V100").name == "V100-16GB"  # the bare name stays the SXM2 board
    pcie = c.gpu("V100-PCIe")
    assert pcie.fp32_tflops < c.gpu("V100-16GB").fp32_tflops and pcie.interconnect_gbps is None
    assert pcie.source_url.startswith("https://") and pcie.max_power_limit_w == pcie.tdp_w == 250


def test_a_file_without_power_columns_still_loads() -> None:
    text = _row("", "", "").replace(",idle_power_w,min_power_limit_w,max_power_limit_w", "")
    text = text.replace(",250,80,,,,", ",250,80,")
    (spec,) = parse_gpus(text, "gpus.csv")
    assert spec.max_power_limit_w is None and spec.idle_power_w is None


@pytest.mark.parametrize(
    ("idle", "lo", "hi", "message"),
    [
        ("", "300", "250", "min_power_limit_w"),
        ("260", "", "250", "idle_power_w"),
        ("", "-5", "250", "min_power_limit_w"),
    ],
)
def test_inconsistent_power_facts_are_one_error_naming_the_line(
    idle: str, lo: str, hi: str, message: str
) -> None:
    with pytest.raises(DataFormatError) as caught:
        parse_gpus(_row(idle, lo, hi), "gpus.csv")
    assert message in str(caught.value) and "line 2" in str(caught.value)
