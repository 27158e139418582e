"""NVMe drives as an embedding tier (``data/ssd.csv``): random-read IOPS, the latency of one
read and capacity per drive, one row each with its source and date. The drive's sequential
read bandwidth is the storage row of the same name in ``coldstart.csv`` (one fact, one place).

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import by_name, named_rows, provenance, require_float
from gpucast.catalog.coldstart import load_coldstart_facts
from gpucast.domain.embeddings import SsdSpec
from gpucast.domain.errors import DataFormatError, InvalidSpecError

SSD_COLUMNS = (
    "name", "random_read_iops", "read_latency_s", "capacity_tb", "source_url", "as_of",
)  # fmt: skip
_PATH = "ssd.csv"
#: The drive ``ssd_drive`` returns without a name.
DEFAULT_SSD = "local-nvme"


def parse_ssd(text: str, path: str = _PATH) -> dict[str, SsdSpec]:
    """Drives of ``ssd.csv`` by name, each with its ``coldstart.csv`` read bandwidth."""
    facts = load_coldstart_facts()
    out: dict[str, SsdSpec] = {}
    for line, row, name in named_rows(text, path, SSD_COLUMNS):
        where = provenance(row, path=path, line=line)
        try:
            bandwidth = facts.get("storage", name)
        except InvalidSpecError as exc:
            raise DataFormatError(
                path, f"{name!r} has no storage row in coldstart.csv", line=line, column="name"
            ) from exc
        out[name] = SsdSpec(
            name=name,
            read_gbps=bandwidth.value,
            random_read_iops=require_float(
                row["random_read_iops"], path=path, line=line, column="random_read_iops"
            ),
            read_latency_s=require_float(
                row["read_latency_s"], path=path, line=line, column="read_latency_s"
            ),
            capacity_bytes=require_float(
                row["capacity_tb"], path=path, line=line, column="capacity_tb"
            )
            * 1e12,
            source=f"catalog/data/ssd.csv {name} {where}; {bandwidth.source()}",
        )
    return out


@functools.lru_cache(maxsize=1)
def load_ssd() -> dict[str, SsdSpec]:
    """Every row of the built-in ``ssd.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_ssd(text, _PATH)


def ssd_drive(name: str = DEFAULT_SSD) -> SsdSpec:
    """One drive by name (an unknown name is one line naming the known ones)."""
    return by_name(load_ssd(), name, field="ssd", file="ssd.csv", kind="drive")
