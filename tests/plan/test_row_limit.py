"""``--limit`` of plan train and plan llm-train: one rule (``plan.pareto.limited_rows``)."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.plan.pareto import check_row_limit, limited_rows


def test_the_front_and_the_pick_are_kept_and_the_first_others_fill_up_to_the_limit() -> None:
    order = [5, 2, 7, 0, 3, 9, 1]  # e.g. cheapest first
    must = {7, 9}
    assert limited_rows(order, must, 4) == [5, 2, 7, 9]  # two others fill up to 4, order kept
    assert limited_rows(order, must, 2) == [7, 9]
    assert limited_rows(order, must, 1) == [7, 9]  # the front and the pick beyond the limit
    assert limited_rows(order, must, 7) == order
    assert limited_rows(order, must, 100) == order
    assert limited_rows(order, must, None) == order


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_a_limit_below_one_or_not_an_integer_is_refused(bad: object) -> None:
    with pytest.raises(InvalidSpecError, match="limit: must be >= 1"):
        check_row_limit(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="limit"):
        limited_rows([0, 1], set(), bad)  # type: ignore[arg-type]
