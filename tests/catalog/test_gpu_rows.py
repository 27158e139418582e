"""The GPU rows added for training predictions on today's GPUs, and the optional clock columns."""

from __future__ import annotations

import csv
import io
from datetime import date
from pathlib import Path

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.loader import parse_gpus
from gpucast.domain.errors import DataFormatError

ADDED = (
    "RTX6000",
    "A40",
    "A10",
    "L40",
    "RTX-A6000",
    "RTX4090",
    "MI250",
    "MI250X",
    "MI210",
    "GH200",
    "RX7900XTX",
)
BUILTIN = Path(__file__).resolve().parents[2] / "src/gpucast/catalog/data/gpus.csv"


@pytest.mark.parametrize("name", ADDED)
def test_added_gpu_is_sourced_and_dated(name: str) -> None:
    g = load_catalog().gpu(name)
    assert g.source_url.startswith("https://")
    assert g.as_of == date(2026, 12, 2)
    assert g.boost_clock_mhz is not None


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("Quadro RTX 6000", "RTX6000"),  # Zeus NSDI'23
        ("AMD MI250 GPU", "MI250"),  # LLM-Inference-Bench
        ("NVIDIA GeForce RTX 4090", "RTX4090"),  # MLPerf Training v4.0 system descriptions
        ("AMD Radeon RX 7900 XTX", "RX7900XTX"),
        ("RTX A6000", "RTX-A6000"),
        ("nvidia-a10", "A10"),
        ("A10G", "A10G"),  # the AWS variant stays its own row
        ("L40S", "L40S"),
    ],
)
def test_names_used_by_published_data_resolve(label: str, name: str) -> None:
    assert load_catalog().gpu(label).name == name


def test_mi250_row_is_one_package_of_two_gcds() -> None:
    c = load_catalog()
    mi250, mi210 = c.gpu("MI250"), c.gpu("MI210")  # MI210 = one GCD of the same CDNA2 die
    assert mi250.memory_gib == 2 * mi210.memory_gib == 128
    assert mi250.memory_bandwidth_gbps == 2 * mi210.memory_bandwidth_gbps


def test_dense_figures_are_below_the_sparse_datasheet_ones() -> None:
    c = load_catalog()
    assert c.gpu("A40").peak_tflops("bf16") == pytest.approx(299.4 / 2, abs=0.1)
    assert c.gpu("GH200").peak_tflops("fp8") == pytest.approx(3958 / 2, abs=1)
    l40s = c.gpu("L40S").peak_tflops("fp16")
    assert c.gpu("L40").peak_tflops("fp16") == pytest.approx(l40s / 2, abs=0.1)
    # GeForce: FP16 with FP32 accumulate (as AMP trains) runs at half the FP16-accumulate rate
    assert c.gpu("RTX4090").peak_tflops("fp16") == pytest.approx(330.3 / 2, abs=0.1)
    assert c.gpu("RTX6000").peak_tflops("bf16") == 130.5  # Turing: no BF16, falls back to FP16


def test_clocks_are_optional_and_boost_not_below_base() -> None:
    gpus = load_catalog().gpus
    with_clocks = [g for g in gpus if g.boost_clock_mhz is not None]
    assert len(with_clocks) >= 20
    for g in gpus:
        if g.base_clock_mhz is not None:
            assert g.boost_clock_mhz is not None and g.boost_clock_mhz >= g.base_clock_mhz, g.name
    assert load_catalog().gpu("B200").boost_clock_mhz is None  # not published


def test_file_without_clock_columns_still_loads() -> None:
    text = BUILTIN.read_text()
    header, *rows = text.splitlines()
    columns = header.split(",")
    drop = [columns.index(c) for c in ("base_clock_mhz", "boost_clock_mhz", "sustained_clock_mhz")]
    first = rows[0].split(",")  # the K80 row has no quoted commas before the clock cells
    old = ",".join(c for i, c in enumerate(columns) if i not in drop) + "\n"
    old += ",".join(c for i, c in enumerate(first) if i not in drop) + "\n"
    (k80,) = parse_gpus(old, "old.csv")
    assert k80.name == "K80" and k80.base_clock_mhz is None and k80.boost_clock_mhz is None
    assert k80.peak_tflops("fp32") == k80.fp32_tflops  # no sustained clock: the datasheet's


@pytest.mark.parametrize(
    ("cells", "column"),
    [(("-560", "875"), "base_clock_mhz"), (("560", "abc"), "boost_clock_mhz")],
)
def test_bad_clock_cell_names_line_and_column(cells: tuple[str, str], column: str) -> None:
    text = BUILTIN.read_text().replace(",13,560,875,", f",13,{cells[0]},{cells[1]},", 1)
    with pytest.raises(DataFormatError) as info:
        parse_gpus(text, "gpus.csv")
    assert (info.value.line, info.value.column) == (2, column)


def test_boost_below_base_is_rejected() -> None:
    text = BUILTIN.read_text().replace(",13,560,875,", ",13,900,875,", 1)
    with pytest.raises(DataFormatError) as info:
        parse_gpus(text, "gpus.csv")
    assert info.value.line == 2 and "boost_clock_mhz" in str(info.value)


def test_a_sustained_clock_below_the_boost_scales_the_peaks() -> None:
    c = load_catalog()
    k80 = c.gpu("K80")
    assert k80.fp32_tflops == 4.37  # the datasheet figure stays as published
    assert k80.peak_tflops("fp32") == pytest.approx(4.37 * 562 / 875)
    assert k80.peak_tflops("bf16") == pytest.approx(4.37 * 562 / 875)  # falls back to fp32
    assert c.gpu("P100").clock_share == 1.0 and c.gpu("P100").peak_tflops("fp32") == 9.3


@pytest.mark.parametrize(
    ("cells", "why"), [(("560", "875", "900"), "<= boost"), (("560", "", "562"), "<= boost")]
)
def test_a_sustained_clock_above_or_without_the_boost_is_rejected(
    cells: tuple[str, str, str], why: str
) -> None:
    text = BUILTIN.read_text().replace(",13,560,875,562,", ",13,{},{},{},".format(*cells), 1)
    with pytest.raises(DataFormatError) as info:
        parse_gpus(text, "gpus.csv")
    assert info.value.line == 2 and "sustained_clock_mhz" in str(info.value)
    assert why in str(info.value)


#: GPUs whose datasheet FP32 figure counts lanes shared with INT32 (GA10x, Ada) or dual-issued
#: (RDNA3); GA100, Hopper, Blackwell, Volta, Turing and CDNA have dedicated FP32 lanes
SHARED_FP32 = (
    "A10G",
    "A10",
    "A40",
    "RTX-A6000",
    "L4",
    "L40S",
    "L40",
    "RTX4090",
    "RX7900XTX",
    "RTX6000-Ada",
)


def test_fp32_dedicated_lanes_are_stated_with_their_source() -> None:
    c = load_catalog()
    notes = {r["name"]: r["note"] for r in csv.DictReader(io.StringIO(BUILTIN.read_text()))}
    for g in c.gpus:
        if g.name in SHARED_FP32:
            assert g.fp32_dedicated_tflops == pytest.approx(g.fp32_tflops / 2), g.name
            assert "fp32_dedicated_tflops = half of fp32_tflops" in notes[g.name], g.name
            assert "whitepaper" in notes[g.name] or "RDNA 3" in notes[g.name], g.name
            assert g.fp32_path_tflops() == pytest.approx(g.fp32_tflops / 2 * g.clock_share)
        else:
            assert g.fp32_dedicated_tflops is None, g.name
            assert g.fp32_path_tflops() == g.peak_tflops("fp32")
    assert c.gpu("L40S").peak_tflops("fp32") == 91.6  # the catalog shows the datasheet's


def test_fp32_dedicated_above_the_fp32_figure_is_rejected() -> None:
    text = BUILTIN.read_text()
    row = next(line for line in text.splitlines() if line.startswith("A10G,"))
    bad = row.replace("70,70,,,17.5,", "70,70,,,40,", 1)
    assert bad != row
    with pytest.raises(DataFormatError) as info:
        parse_gpus(text.replace(row, bad), "gpus.csv")
    assert "fp32_dedicated_tflops" in str(info.value) and "<= fp32_tflops" in str(info.value)


def test_matrix_work_at_fp32_runs_at_the_dedicated_lanes_everywhere_else_at_the_peak() -> None:
    l40s, a100 = load_catalog().gpu("L40S"), load_catalog().gpu("A100-40GB")
    assert l40s.matrix_tflops("fp32") == pytest.approx(45.8)
    assert l40s.matrix_tflops("bf16") == l40s.peak_tflops("bf16") == 362
    assert a100.matrix_tflops("fp32") == a100.peak_tflops("fp32") == 19.5
