"""The server topology a verb runs on: a built-in name or a user's topology CSV."""

from __future__ import annotations

from pathlib import Path

from gpucast.catalog.topologies import get_topology, load_topologies, parse_topologies
from gpucast.domain.errors import DataFormatError
from gpucast.domain.topology import ServerTopology


def resolve_topology(name_or_file: str) -> ServerTopology:
    """A built-in topology (``dgx1-v100``, ...) or the one topology of a ``.csv`` file with the
    columns of ``catalog/data/topologies.csv`` (``source_url``/``as_of`` optional)."""
    if name_or_file.strip().lower() in load_topologies() or not name_or_file.lower().endswith(
        ".csv"
    ):
        return get_topology(name_or_file)
    from gpucast.inputs.textfiles import read_text

    path = Path(name_or_file)
    text = read_text(path, "--topology", fix="pass a built-in name or a topology CSV")
    found = parse_topologies(text, str(path), sourced=False)
    if len(found) != 1:
        raise DataFormatError(
            str(path),
            f"holds {len(found)} topologies ({', '.join(sorted(found))})",
            fix="one topology per file",
        )
    return next(iter(found.values()))
