"""``catalog._csv``'s cell readers: one message per constraint (QA #16)."""

from __future__ import annotations

import pytest

from gpucast.catalog._csv import named_rows, parse_float, parse_int, require_text
from gpucast.domain.errors import DataFormatError

WHERE = {"path": "t.csv", "line": 2, "column": "rows"}


@pytest.mark.parametrize("value", ["-5", "0", "2.5", "-0.5"])
def test_a_whole_number_below_its_minimum_reads_one_way_whatever_breaks_it(value: str) -> None:
    """-5 said 'must be >= 0' and 0 'must be >= 1' for the one rule 'rows >= 1'."""
    with pytest.raises(DataFormatError) as info:
        parse_int(value, minimum=1, **WHERE)
    # QA 39 G #8: and the fix, which it lacked
    assert str(info.value) == (
        f"t.csv, line 2, column 'rows': must be a whole number >= 1, got {value!r}; write a "
        "whole number >= 1 such as 8 in that cell"
    )


def test_whole_numbers_pass_and_other_text_says_what_it_is() -> None:
    assert parse_int("8.0", minimum=1, **WHERE) == 8
    assert parse_int("0", **WHERE) == 0
    with pytest.raises(DataFormatError, match="not a number: 'x'"):
        parse_int("x", minimum=1, **WHERE)
    with pytest.raises(DataFormatError, match="not a finite number"):
        parse_int("inf", minimum=1, **WHERE)
    with pytest.raises(DataFormatError) as empty:
        parse_int("", minimum=1, **WHERE)
    # QA 37 G #11: an empty graph-stats feature_dim said "value is required" and no fix
    assert str(empty.value) == (
        "t.csv, line 2, column 'rows': value is required; write a whole number >= 1 such as 8 "
        "in that cell"
    )


def test_parse_float_keeps_its_sign_rule() -> None:
    assert parse_float("0", positive=False, **WHERE) == 0.0
    with pytest.raises(DataFormatError, match=r"must be > 0, got '0'"):
        parse_float("0", **WHERE)
    with pytest.raises(DataFormatError, match=r"must be >= 0, got '-1'"):
        parse_float("-1", positive=False, **WHERE)
    assert parse_float("", optional=True, **WHERE) is None


def test_every_shared_cell_error_says_what_to_write() -> None:
    """QA 39 G #8: the shared cell errors had no fix (one place gives it: ``bad_cell``)."""
    cases = [
        (lambda: parse_float("0", **WHERE), "write a number > 0 such as 2.5 in that cell"),
        (lambda: parse_float("-1", positive=False, **WHERE), "write a number >= 0 such as 2.5"),
        (lambda: parse_float("", **WHERE), "write a number > 0 such as 2.5"),
        (lambda: parse_float("nan", **WHERE), "write a number > 0"),
        (lambda: parse_int("x", **WHERE), "write a whole number >= 0 such as 8"),
        (lambda: require_text("", **WHERE), "write its value in that cell"),
        (lambda: list(named_rows("name\na\na\n", "t.csv", ["name"])), "rename or merge"),
        (lambda: list(named_rows("name\n", "t.csv", ["name"])), "add one row under the header"),
    ]
    for call, fix in cases:
        with pytest.raises(DataFormatError) as info:
            call()
        assert info.value.fix is not None and fix in info.value.fix, str(info.value)
        assert "\n" not in str(info.value)
