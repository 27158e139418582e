"""llm_train_intervals.csv: the bands predict/plan llm-train state, parsed strictly."""

from __future__ import annotations

import pytest

from gpucast.catalog.llm import load_llm_train_intervals, parse_llm_train_intervals
from gpucast.domain.errors import DataFormatError
from gpucast.inputs.mlperf_llm import ANY_STACK, TUNED

HEADER = "name,ratio_low,ratio_high,level,n,mape_pct,groups,source,as_of\n"


def _row(**cells: str) -> str:
    row = {
        "name": TUNED, "ratio_low": "0.8", "ratio_high": "2.0", "level": "0.950", "n": "21",
        "mape_pct": "19.8", "groups": "NVIDIA, Dell", "source": "MLPerf", "as_of": "2026-12-05",
    } | cells  # fmt: skip
    return ",".join(f'"{v}"' for v in row.values()) + "\n"


def test_the_shipped_file_has_both_regimes_and_the_tuned_one_is_narrower() -> None:
    table, sources = load_llm_train_intervals()
    assert set(table.n) == set(sources) == {TUNED, ANY_STACK}
    assert table.n[ANY_STACK] > table.n[TUNED] >= 20
    tuned, pooled = table.ratios(TUNED), table.ratios(ANY_STACK)
    # every held-out MLPerf LLM system ran slower than predicted: the lower edges may exceed 1
    assert min(tuned[0], pooled[0]) > 0 and 1.0 < tuned[1] < pooled[1]
    assert tuned[1] / tuned[0] < pooled[1] / pooled[0]
    assert all("MLPerf Training v4.0" in s for s in sources.values())
    assert "21 systems" in sources[TUNED] and "24 systems" in sources[ANY_STACK]


def test_a_small_file_parses() -> None:
    table, sources = parse_llm_train_intervals(HEADER + _row())
    assert table.ratios(TUNED) == pytest.approx((0.8, 2.0))
    assert table.level[TUNED] == pytest.approx(0.95) and table.n[TUNED] == 21
    assert sources == {TUNED: "MLPerf"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (HEADER + _row(ratio_low="3"), "line 2, column 'ratio_low'"),
        (HEADER + _row(ratio_low="0"), "ratio_low"),
        (HEADER + _row(ratio_high="nan"), "ratio_high"),
        (HEADER + _row(level="1.2"), "level"),
        (HEADER + _row(n="0"), "column 'n'"),
        (HEADER + _row(source=""), "source"),
        (HEADER + _row(as_of="soon"), "as_of"),
        (HEADER + _row() + _row(), "appears twice"),
        (HEADER, "holds no band"),
        (HEADER.replace(",groups", ""), "missing column"),
    ],
)
def test_bad_cells_name_the_line_and_column(text: str, match: str) -> None:
    with pytest.raises(DataFormatError, match=match):
        parse_llm_train_intervals(text)
