"""Server topologies (``data/topologies.csv``): which links join the GPUs of a server.

One row per link: ``topology,a,b,kind,links,gb_per_s_per_link,gpus,source_url,as_of,note``
(bandwidth per link per direction, GB/s; ``gpus``, optional: the catalog GPUs the server holds,
``|``-separated, the same on every row of a topology -- blank for a PCIe server of any GPU).
The built-in file holds a DGX-1 V100 (hybrid cube mesh: 1 or 2 NVLink 2 links per pair, PCIe
switches, two sockets), HGX A100 and H100 boards (every GPU on the NVSwitch) and 8- and 4-GPU
PCIe servers with two sockets. A user's file of the same columns (``--topology FILE.csv``) is
read with the same checks; a GPU that cannot reach the others is one line naming it.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import parse_date, parse_int, read_rows, require_float, require_text
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownNameError
from gpucast.domain.topology import Link, ServerTopology

TOPOLOGY_COLUMNS = ("topology", "a", "b", "kind", "links", "gb_per_s_per_link")


class UnknownTopologyError(UnknownNameError):
    kind = "topology"
    default_field = "topology"


def parse_topologies(text: str, path: str, *, sourced: bool = True) -> dict[str, ServerTopology]:
    """Topologies by name from CSV text (``sourced``: ``source_url`` and ``as_of`` required)."""
    required = (*TOPOLOGY_COLUMNS, "source_url", "as_of") if sourced else TOPOLOGY_COLUMNS
    links: dict[str, list[Link]] = {}
    sources: dict[str, str] = {}
    gpu_names: dict[str, tuple[tuple[str, ...], int]] = {}
    for line, row in read_rows(text, path, required):
        name = require_text(row["topology"], path=path, line=line, column="topology")
        try:
            link = Link(
                a=require_text(row["a"], path=path, line=line, column="a"),
                b=require_text(row["b"], path=path, line=line, column="b"),
                kind=require_text(row["kind"], path=path, line=line, column="kind").lower(),
                links=parse_int(row["links"], path=path, line=line, column="links", minimum=1),
                gb_per_s_per_link=require_float(
                    row["gb_per_s_per_link"], path=path, line=line, column="gb_per_s_per_link"
                ),
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line, fix=exc.fix) from None
        if sourced:
            sources.setdefault(
                name, require_text(row["source_url"], path=path, line=line, column="source_url")
            )
            parse_date(row["as_of"], path=path, line=line, column="as_of")
        else:
            sources.setdefault(name, row.get("source_url", "").strip() or path)
        names = tuple(n.strip() for n in (row.get("gpus") or "").split("|") if n.strip())
        first = gpu_names.setdefault(name, (names, line))
        if first[0] != names:
            raise DataFormatError(
                path,
                f"topology {name}'s gpus is {'|'.join(names) or 'blank'}, but "
                f"{'|'.join(first[0]) or 'blank'} on line {first[1]}",
                line=line,
                fix="give the same gpus on every row of a topology",
            )
        links.setdefault(name, []).append(link)
    if not links:
        raise DataFormatError(path, "has no links", fix="one row per link: " + ",".join(required))
    out = {}
    for name, rows in links.items():
        try:
            out[name] = ServerTopology(
                name=name, links=tuple(rows), source=sources[name], gpu_names=gpu_names[name][0]
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, fix=exc.fix) from None
    return out


@functools.cache
def load_topologies() -> dict[str, ServerTopology]:
    """The built-in topologies."""
    text = resources.files("gpucast.catalog").joinpath("data", "topologies.csv").read_text("utf-8")
    return parse_topologies(text, "topologies.csv")


def get_topology(name: str) -> ServerTopology:
    """A built-in topology by name; unknown names list the close ones."""
    builtin = load_topologies()
    key = name.strip().lower()
    if key not in builtin:
        raise UnknownTopologyError(name, builtin, fix="or pass a topology CSV file")
    return builtin[key]
