"""The CPU instance catalog: every row sourced and dated, strict parsing, lookups."""

from __future__ import annotations

import pytest

from gpucast.catalog.cpu_instances import (
    CPU_INSTANCE_COLUMNS,
    cpu_instances,
    parse_cpu_instances,
    shipped_cpu_instances,
)
from gpucast.domain.errors import DataFormatError, InvalidInputError


def test_shipped_rows_are_sourced_dated_and_cover_x86_and_arm() -> None:
    rows = shipped_cpu_instances()
    assert {r.arch for r in rows} == {"x86_64", "arm64"}
    for r in rows:
        assert r.source_url.startswith("https://") and r.as_of
        assert r.effective_cores <= r.vcpus
    smt = next(r for r in rows if r.instance_type == "c7i.large")
    assert smt.effective_cores == pytest.approx(1.25)  # 1 core + 25% for its second thread
    arm = next(r for r in rows if r.instance_type == "c7g.large")
    assert arm.effective_cores == 2.0


def test_filters_and_unknown_names() -> None:
    assert all(r.arch == "arm64" for r in cpu_instances(arch="arm64"))
    assert [r.instance_type for r in cpu_instances(("c7g.large",))] == ["c7g.large"]
    with pytest.raises(InvalidInputError, match=r"did you mean c7g\.large"):
        cpu_instances(("c7g.larg",))
    with pytest.raises(InvalidInputError, match="arch"):
        cpu_instances(arch="sparc")


HEADER = ",".join(CPU_INSTANCE_COLUMNS)
ROW = "aws,us-east-1,x.large,x86_64,cpu,2,2,3.0,4,100,125,0.1,https://e.org,2026-01-01,n"


@pytest.mark.parametrize(
    ("row", "text"),
    [
        (ROW.replace(",3.0,", ",nan,"), "clock_ghz"),
        (ROW.replace(",0.1,", ",-1,"), "on_demand_usd_per_hour"),
        (ROW.replace(",x86_64,", ",riscv,"), "arch"),
        (ROW.replace(",2,2,", ",3,2,"), "multiple of threads_per_core"),
        (ROW.replace(",2026-01-01,", ",soon,"), "not a date"),
    ],
)
def test_bad_rows_name_file_line_and_column(row: str, text: str) -> None:
    with pytest.raises(DataFormatError, match=text):
        parse_cpu_instances(f"{HEADER}\n{row}\n", "x.csv")


def test_duplicate_rows_are_refused() -> None:
    with pytest.raises(DataFormatError, match="second row"):
        parse_cpu_instances(f"{HEADER}\n{ROW}\n{ROW}\n", "x.csv")
