"""Small rendering pieces of the catalog's tables, light enough for the CLI's start-up (no
numeric stack: :mod:`gpucast.report.tables` pulls in the planner's)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from rich.table import Table


def _source_site(url: str) -> str:
    """Where a row's facts come from, short: the host, and the repository on GitHub."""
    parts = urlsplit(url)
    if parts.netloc == "github.com":
        return "github.com/" + "/".join(parts.path.strip("/").split("/")[:2])
    return parts.netloc or url


def sources_caption(urls: Sequence[str]) -> str:
    """One footnote line naming a table's sources (each row's ``source_url``) by site, with
    how many rows each gave, most first -- the URLs themselves are in ``--json`` (QA 38 C #10:
    the tables named no source, a column of URLs would be wider than the table)."""
    counts: dict[str, int] = {}
    for url in urls:
        site = _source_site(url)
        counts[site] = counts.get(site, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return (
        "sources (rows): "
        + ", ".join(f"{site} {n}" for site, n in ranked)
        + "; each row's source_url in --json"
    )


def add_columns(
    table: Table, names: tuple[str, ...], *, left: tuple[str, ...], no_wrap: tuple[str, ...] = ()
) -> None:
    """``names`` as the table's columns: those in ``left`` left-aligned, the rest right."""
    for name in names:
        table.add_column(name, justify="left" if name in left else "right", no_wrap=name in no_wrap)
