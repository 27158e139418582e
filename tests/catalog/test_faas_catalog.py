"""catalog/data/faas_workload.csv: every row sourced and dated, strict parsing."""

from __future__ import annotations

import pytest

from gpucast.catalog.faas import load_faas_mix, parse_faas_mix
from gpucast.domain.errors import DataFormatError

HEADER = "name,value,source_url,as_of,note\n"


def test_shipped_mix_has_a_source_per_row() -> None:
    mix = load_faas_mix()
    assert sum(mix.trigger_shares.values()) == pytest.approx(1.0, abs=0.01)
    assert mix.trigger_shares["timer"] == pytest.approx(0.156)
    assert 0 < mix.periodic_share + mix.bursty_share <= 1
    assert len(mix.sources) >= 18
    assert all("https://" in s and "as of" in s for s in mix.sources.values())


def _text(replace: str = "", drop: str = "") -> str:
    from importlib import resources

    text = resources.files("gpucast.catalog").joinpath("data", "faas_workload.csv").read_text()
    lines = [ln for ln in text.splitlines() if not (drop and ln.startswith(drop + ","))]
    if replace:
        name = replace.split(",")[0]
        lines = [replace if ln.startswith(name + ",") else ln for ln in lines]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (_text(drop="bursty_cv_max"), "missing row"),
        (_text(replace="bursty_cv_max,-1,https://a,2020-01-01,"), "value"),
        (_text(replace="trigger.http,0.5,https://a,someday,"), "date"),
        (_text(replace="periodic_share_nontimer,0.9,https://a,2020-01-01,"), "<= 1"),
        (_text() + "trigger.fax,0.1,https://a,2020-01-01,\n", "unknown trigger"),
        (_text() + "colour,1,https://a,2020-01-01,\n", "unknown row"),
        (HEADER, "missing row"),
    ],
)
def test_bad_files(text: str, match: str) -> None:
    with pytest.raises(DataFormatError, match=match):
        parse_faas_mix(text)
