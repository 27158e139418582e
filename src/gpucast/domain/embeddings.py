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
#: Embedding cache policies: ``lru``, and ``lfu`` (per-row counters over all rows, FBGEMM's).
CACHE_POLICIES = ("lru", "lfu")


def check_cache_policy(policy: str, field: str) -> None:
    """``policy`` is one of :data:`CACHE_POLICIES`, else one error naming ``field`` (the
    flag) with the fix."""
    if policy not in CACHE_POLICIES:
        raise InvalidSpecError(
            field, "must be lru or lfu", got=policy,
            fix=f"e.g. --{field} lfu (per-row counters, as FBGEMM's), or leave it out (lru)",
        )  # fmt: skip


#: The built-in ``dlrm`` workload's embedding defaults (``workloads/other.py``): 26 tables of
#: 10,000 rows, dim 64, one row summed per table and sample.
DLRM_TABLES = 26
DLRM_TABLE_ROWS = 10_000
DLRM_EMBEDDING_DIM = 64
DLRM_LOOKUPS = 1

SHARDING_TYPES: tuple[ShardingType, ...] = get_args(ShardingType)
#: The dlrm_datasets locality files (``embedding_bag_<window>_locality_stats.txt``).
LOCALITY_WINDOWS = ("2021", "2022")
#: The steepest Zipf law a table's locality may name.
MAX_ZIPF_EXPONENT = 10.0
LOCALITY_FIX = (
    "e.g. 2022 (a dlrm_datasets window), 2021/fbgemm_t856_bs65536_3 (one of its traces) or "
    "1.05 (a Zipf exponent)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessLocality:
    """Where a table's access pattern comes from: a ``dlrm_datasets`` window (``window``
    ``2021`` or ``2022``: the locality model fitted on the file's first trace, or on
    ``trace``), or a Zipf law over the table's own rows (``zipf_exponent``: row ``i`` of the
    hottest first is looked up with probability ``~ i^-s``; 0 is uniform)."""

    window: str = ""
    trace: str = ""
    zipf_exponent: float | None = None

    def __post_init__(self) -> None:
        if (self.zipf_exponent is None) == (not self.window):
            raise InvalidSpecError(
                "locality", "names one of a dlrm_datasets window and a Zipf exponent",
                fix=LOCALITY_FIX,
            )  # fmt: skip
        if self.window and self.window not in LOCALITY_WINDOWS:
            raise InvalidSpecError(
                "locality", f"window must be {' or '.join(LOCALITY_WINDOWS)}", got=self.window,
                fix=LOCALITY_FIX,
            )  # fmt: skip
        if self.trace and not self.window:
            raise InvalidSpecError("locality", "a trace needs its window", got=self.trace)
        z = self.zipf_exponent
        if z is not None and not (math.isfinite(z) and 0.0 <= z <= MAX_ZIPF_EXPONENT):
            raise InvalidSpecError(
                "locality", f"Zipf exponent must be in [0, {MAX_ZIPF_EXPONENT:g}]", got=z,
                fix=LOCALITY_FIX,
            )  # fmt: skip

    @classmethod
    def parse(cls, text: str) -> AccessLocality:
        """``2022``, ``2022/<trace>`` (a window, one of its traces) or a number (Zipf)."""
        value = str(text).strip()
        window, _, trace = value.partition("/")
        if window.strip() in LOCALITY_WINDOWS or "/" in value:
            return cls(window=window.strip(), trace=trace.strip().removesuffix(".pt"))
        try:
            exponent = float(value)
        except ValueError:
            raise InvalidSpecError(
                "locality", "must be a dlrm_datasets window or a Zipf exponent", got=value,
                fix=LOCALITY_FIX,
            ) from None  # fmt: skip
        return cls(zipf_exponent=exponent)

    def label(self) -> str:
        if self.zipf_exponent is not None:
            return f"Zipf {self.zipf_exponent:g}"
        return f"dlrm_datasets {self.window}" + (f"/{self.trace}" if self.trace else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingTable:
    """One embedding table: rows, width, mean lookups per sample, bytes per value."""

    name: str
    rows: int
    dim: int
    pooling: float
    bytes_per_value: int = 4
    #: this table's access pattern (None: the plan's one global hit-rate curve)
    locality: AccessLocality | None = None

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
    tables = (tables,) if isinstance(tables, int) else tables  # -o table_sizes=1000: one table
    dim = int(options.get("embedding_dim", DLRM_EMBEDDING_DIM))
    return len(tuple(tables)) * int(options.get("lookups", DLRM_LOOKUPS)), dim
