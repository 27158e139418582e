"""The shipped CPU Adam speed (``data/cpu_adam.csv``): the offload model's default when no
optimizer step was measured on the user's host (``gpucast measure optimizer``).

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import parse_date, read_rows, require_float, require_text
from gpucast.domain.errors import DataFormatError
from gpucast.domain.offload import CpuAdamFact

CPU_ADAM_COLUMNS = ("name", "fixed_s", "per_tensor_s", "bandwidth_gbps", "source_url", "as_of")
_PATH = "cpu_adam.csv"


def parse_cpu_adam(text: str, path: str = _PATH) -> dict[str, CpuAdamFact]:
    """Rows of ``cpu_adam.csv`` by name."""
    out: dict[str, CpuAdamFact] = {}
    for line, row in read_rows(text, path, CPU_ADAM_COLUMNS):
        name = require_text(row["name"], path=path, line=line, column="name")
        if name in out:
            raise DataFormatError(path, f"name {name!r} appears twice", line=line)
        out[name] = CpuAdamFact(
            name=name,
            fixed_s=require_float(
                row["fixed_s"], path=path, line=line, column="fixed_s", positive=False
            ),
            per_tensor_s=require_float(
                row["per_tensor_s"], path=path, line=line, column="per_tensor_s", positive=False
            ),
            bandwidth_gbps=require_float(
                row["bandwidth_gbps"], path=path, line=line, column="bandwidth_gbps"
            ),
            source_url=require_text(row["source_url"], path=path, line=line, column="source_url"),
            as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
            note=row.get("note", ""),
        )
    if "default" not in out:
        raise DataFormatError(path, "has no 'default' row")
    return out


@functools.lru_cache(maxsize=1)
def load_cpu_adam() -> dict[str, CpuAdamFact]:
    """Every row of the built-in ``cpu_adam.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_cpu_adam(text, _PATH)
