"""NVMe drives as an embedding tier (``catalog/data/ssd.csv`` + ``coldstart.csv``)."""

from __future__ import annotations

import pytest

from gpucast.catalog.ssd import parse_ssd, ssd_drive
from gpucast.domain.errors import DataFormatError, InvalidSpecError

_HEAD = "name,random_read_iops,read_latency_s,capacity_tb,source_url,as_of\n"


def test_shipped_drive_takes_its_bandwidth_from_the_coldstart_row() -> None:
    drive = ssd_drive()
    assert drive.name == "local-nvme"
    assert drive.read_gbps == pytest.approx(7.0)  # coldstart.csv local-nvme
    assert drive.random_read_iops == pytest.approx(1e6)
    assert drive.read_latency_s == pytest.approx(1 / 22_000, rel=0.02)
    assert drive.capacity_bytes == pytest.approx(2e12)
    assert "ssd.csv" in drive.source and "coldstart.csv" in drive.source
    with pytest.raises(InvalidSpecError, match="unknown drive 'floppy'"):
        ssd_drive("floppy")


def test_malformed_rows_name_file_line_and_column() -> None:
    with pytest.raises(DataFormatError, match=r"line 2.*random_read_iops"):
        parse_ssd(_HEAD + "local-nvme,-1,4.5e-5,2,https://x,2026-12-03\n", "ssd.csv")
    with pytest.raises(DataFormatError, match=r"no storage row in coldstart\.csv"):
        parse_ssd(_HEAD + "tape,1,1,1,https://x,2026-12-03\n", "ssd.csv")
    with pytest.raises(DataFormatError, match="appears twice"):
        row = "local-nvme,1,1,1,https://x,2026-12-03\n"
        parse_ssd(_HEAD + row + row, "ssd.csv")
