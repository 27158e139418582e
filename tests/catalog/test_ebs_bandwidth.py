"""ebs_bandwidth.csv: each AWS instance type's dedicated bandwidth to EBS (baseline and
maximum, Mbit/s), a source per row; the loader's errors name file, line and column."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.ebs import instance_ebs, load_ebs_bandwidth, parse_ebs_bandwidth
from gpucast.domain.errors import DataFormatError, InvalidSpecError

HEADER = "provider,instance_type,baseline_mbps,maximum_mbps,source_url,as_of,note\n"
GOOD = "aws,g5.xlarge,700,3500,https://a,2026-12-07,burst\n"


def test_a_good_file_parses_by_lower_cased_instance_type() -> None:
    rows = parse_ebs_bandwidth(HEADER + GOOD.replace("g5.xlarge", "G5.XLarge"), "e.csv")
    ebs = rows["g5.xlarge"]
    assert (ebs.baseline_mbps, ebs.maximum_mbps, ebs.bursts) == (700, 3500, True)
    assert "https://a" in ebs.source and "2026-12-07" in ebs.source


@pytest.mark.parametrize(
    ("cells", "column"),
    [
        ("aws,g5.xlarge,3500,700,https://a,2026-12-07,", "maximum_mbps"),  # max < baseline
        ("aws,g5.xlarge,0,3500,https://a,2026-12-07,", "baseline_mbps"),
        ("aws,g5.xlarge,700,fast,https://a,2026-12-07,", "maximum_mbps"),
        ("aws,,700,3500,https://a,2026-12-07,", "instance_type"),
        ("aws,g5.xlarge,700,3500,https://a,yesterday,", "as_of"),
        ("aws,g5.xlarge,700,3500,,2026-12-07,", "source_url"),
    ],
)
def test_a_bad_cell_names_its_file_line_and_column(cells: str, column: str) -> None:
    with pytest.raises(DataFormatError) as err:
        parse_ebs_bandwidth(HEADER + cells + "\n", "e.csv")
    assert "e.csv, line 2" in str(err.value) and column in str(err.value)


def test_an_instance_type_twice_or_no_rows_is_refused() -> None:
    with pytest.raises(DataFormatError, match=r"line 3.*appears twice"):
        parse_ebs_bandwidth(HEADER + GOOD + GOOD, "e.csv")
    with pytest.raises(DataFormatError, match="no rows"):
        parse_ebs_bandwidth(HEADER, "e.csv")
    with pytest.raises(DataFormatError, match="missing column"):
        parse_ebs_bandwidth("provider,instance_type\naws,x\n", "e.csv")


def test_the_shipped_rows_are_sourced_aws_types_of_the_offers() -> None:
    rows = load_ebs_bandwidth()
    offered = {o.instance_type for o in load_catalog().offers if o.provider == "aws"}
    assert set(rows) <= offered
    for ebs in rows.values():
        assert ebs.provider == "aws" and "https://github.com/" in ebs.source
    # the published loader check's testbed: one sustained figure, 16,000 Mbit/s (2 GB/s)
    g5 = instance_ebs("g5.12xlarge")
    assert (g5.baseline_mbps, g5.maximum_mbps, g5.bursts) == (16_000, 16_000, False)
    assert instance_ebs("G5.XLARGE").bursts


def test_an_unknown_instance_type_is_one_line_naming_the_file() -> None:
    with pytest.raises(InvalidSpecError) as err:
        instance_ebs("g9.huge")
    text = str(err.value)
    assert "\n" not in text
    assert "unknown instance type 'g9.huge'" in text and "catalog/data/ebs_bandwidth.csv" in text
