"""catalog/data/coldstart.csv: every row sourced and dated, strict parsing."""

from __future__ import annotations

import pytest

from gpucast.catalog.coldstart import load_coldstart_facts, parse_coldstart
from gpucast.domain.errors import DataFormatError, InvalidSpecError

HEADER = "name,kind,value,source_url,as_of,note\n"


def test_shipped_facts_have_sources() -> None:
    facts = load_coldstart_facts()
    assert {"local-nvme", "ebs-gp3", "s3"} <= set(facts.names("storage"))
    assert {"pcie3", "pcie4", "pcie5"} <= set(facts.names("link"))
    assert {"container-start", "cuda-context", "first-call"} <= set(facts.names("phase"))
    for row in facts.rows:
        assert row.source_url.startswith("https://")
        assert row.value > 0
    assert facts.get("link", "pcie4").value > facts.get("link", "pcie3").value


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(InvalidSpecError, match="local-nvme"):
        load_coldstart_facts().get("storage", "floppy")


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ("x,storage,-1,https://a,2026-01-01,", "value"),
        ("x,disk,1,https://a,2026-01-01,", "kind"),
        ("x,storage,1,https://a,yesterday,", "date"),
        ("x,storage,1,,2026-01-01,", "source_url"),
    ],
)
def test_bad_rows(row: str, match: str) -> None:
    with pytest.raises(DataFormatError, match=match):
        parse_coldstart(HEADER + row + "\n")


def test_duplicates_are_refused() -> None:
    row = "x,storage,1,https://a,2026-01-01,\n"
    with pytest.raises(DataFormatError, match="already"):
        parse_coldstart(HEADER + row + row)
