"""CPU neighbour-sampler rates (``data/gnn_samplers.csv``): sampled edges per second of one
worker, one row per sampler with its source and date. Used by ``gpucast predict gnn`` to price
the CPU sampling of gcn/sage mini-batches.

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import by_name, named_rows, provenance, require_float
from gpucast.domain.gnn import CpuSampler

SAMPLER_COLUMNS = ("name", "edges_per_s_per_worker", "source_url", "as_of")
_PATH = "gnn_samplers.csv"
DEFAULT_SAMPLER = "pyg-cpu"


def parse_gnn_samplers(text: str, path: str = _PATH) -> dict[str, CpuSampler]:
    """Rows of ``gnn_samplers.csv`` by name."""
    out: dict[str, CpuSampler] = {}
    for line, row, name in named_rows(text, path, SAMPLER_COLUMNS):
        where = provenance(row, path=path, line=line)
        out[name] = CpuSampler(
            name=name,
            edges_per_s=require_float(
                row["edges_per_s_per_worker"],
                path=path,
                line=line,
                column="edges_per_s_per_worker",
            ),
            source=f"catalog/data/gnn_samplers.csv {name} {where}",
        )
    return out


@functools.lru_cache(maxsize=1)
def load_gnn_samplers() -> dict[str, CpuSampler]:
    """Every row of the built-in ``gnn_samplers.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_gnn_samplers(text, _PATH)


def gnn_sampler(name: str = DEFAULT_SAMPLER) -> CpuSampler:
    """One sampler by name (an unknown name is one line naming the known ones)."""
    return by_name(load_gnn_samplers(), name, field="sampler", file="gnn_samplers.csv")
