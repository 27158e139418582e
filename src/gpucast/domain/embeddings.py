"""Recommendation models by their embedding tables (issue #17): specs and sharding types.

A table is ``rows x dim`` values; each sample looks up ``pooling`` rows of it on average
(multi-hot) and sums them (pooled embedding bag). :class:`RecModel` adds the dense part
(parameters and training FLOPs per sample) and the reference global batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gpucast.domain.errors import InvalidSpecError

ShardingType = Literal[
    "data_parallel",
    "table_wise",
    "row_wise",
    "column_wise",
    "grid",
    "row_wise_uvm",
    "parameter_server",
]
#: The built-in ``dlrm`` workload's embedding defaults (``workloads/other.py``): 26 tables of
#: 10,000 rows, dim 64, one row summed per table and sample.
DLRM_TABLES = 26
DLRM_TABLE_ROWS = 10_000
DLRM_EMBEDDING_DIM = 64
DLRM_LOOKUPS = 1

SHARDING_TYPES: tuple[ShardingType, ...] = get_args(ShardingType)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingTable:
    """One embedding table: rows, width, mean lookups per sample, bytes per value."""

    name: str
    rows: int
    dim: int
    pooling: float
    bytes_per_value: int = 4

    def __post_init__(self) -> None:
        owner = f"table {self.name}"
        if isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 1:
            raise InvalidSpecError(f"{owner}.rows", "must be an integer >= 1", got=self.rows)
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise InvalidSpecError(f"{owner}.dim", "must be an integer >= 1", got=self.dim)
        if not (math.isfinite(self.pooling) and self.pooling > 0):
            raise InvalidSpecError(
                f"{owner}.pooling", "must be a number > 0 (lookups per sample)", got=self.pooling
            )
        if self.bytes_per_value not in (1, 2, 4, 8):
            raise InvalidSpecError(
                f"{owner}.bytes_per_value", "must be 1, 2, 4 or 8", got=self.bytes_per_value
            )

    @property
    def row_bytes(self) -> int:
        return self.dim * self.bytes_per_value

    @property
    def bytes(self) -> int:
        return self.rows * self.row_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class RecModel:
    """A recommendation model: its tables, its dense part and its reference batch."""

    name: str
    tables: tuple[EmbeddingTable, ...]
    dense_params: float
    dense_train_flops_per_sample: float
    global_batch: int
    source_url: str
    note: str = ""

    def __post_init__(self) -> None:
        if not self.tables:
            raise InvalidSpecError(f"model {self.name}.tables", "needs at least one table")
        for name in ("dense_params", "dense_train_flops_per_sample"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(f"model {self.name}.{name}", "must be >= 0", got=value)
        if self.global_batch < 1:
            raise InvalidSpecError(
                f"model {self.name}.global_batch", "must be >= 1", got=self.global_batch
            )

    @property
    def embedding_bytes(self) -> int:
        return sum(t.bytes for t in self.tables)

    @property
    def embedding_params(self) -> int:
        return sum(t.rows * t.dim for t in self.tables)


@dataclass(frozen=True, slots=True, kw_only=True)
class SsdSpec:
    """One NVMe drive as an embedding tier: sequential read bandwidth (GB/s), 4 KiB random
    reads per second at depth, the latency of one read (s) and capacity (bytes)."""

    name: str
    read_gbps: float
    random_read_iops: float
    read_latency_s: float
    capacity_bytes: float
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("read_gbps", "random_read_iops", "read_latency_s", "capacity_bytes"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a number > 0", got=value)


def dlrm_lookups(options: Mapping[str, Any]) -> tuple[int, int]:
    """Rows looked up per sample and values per row of the ``dlrm`` workload built with
    ``options`` (the workload itself checks them)."""
    tables = options.get("table_sizes", (DLRM_TABLE_ROWS,) * DLRM_TABLES)
    dim = int(options.get("embedding_dim", DLRM_EMBEDDING_DIM))
    return len(tuple(tables)) * int(options.get("lookups", DLRM_LOOKUPS)), dim
