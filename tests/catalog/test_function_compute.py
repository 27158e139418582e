"""Serverless function prices (``catalog/data/function_compute.csv``)."""

from __future__ import annotations

import pytest

from gpucast.catalog.function_compute import function_compute, parse_function_compute
from gpucast.domain.errors import DataFormatError, InvalidSpecError

_HEAD = "name,usd_per_gb_s,usd_per_request,gb_per_vcpu,max_gb,source_url,as_of\n"


def test_shipped_rows() -> None:
    x86 = function_compute()
    assert x86.usd_per_gb_s == pytest.approx(1.66667e-5)
    assert x86.usd_per_request == pytest.approx(2e-7)
    # 1,769 MB and 10,240 MB in the 1,024-MB GB Lambda bills
    assert x86.gb_per_vcpu == pytest.approx(1769 / 1024) and x86.max_gb == pytest.approx(10.0)
    assert "function_compute.csv" in x86.source
    assert x86.min_gb == pytest.approx(128 / 1024)  # 128 MB, the least Lambda takes
    assert parse_function_compute(_HEAD + "fn,1,1,1,1,https://x,2026-12-03\n")["fn"].min_gb == 0
    assert function_compute("aws-lambda-arm").usd_per_gb_s < x86.usd_per_gb_s
    with pytest.raises(InvalidSpecError, match="unknown 'gcf'"):
        function_compute("gcf")


def test_malformed_rows() -> None:
    with pytest.raises(DataFormatError, match=r"line 2.*usd_per_gb_s"):
        parse_function_compute(_HEAD + "fn,abc,1,1,1,https://x,2026-12-03\n", "f.csv")
    with pytest.raises(DataFormatError, match="appears twice"):
        row = "fn,1,1,1,1,https://x,2026-12-03\n"
        parse_function_compute(_HEAD + row + row, "f.csv")
