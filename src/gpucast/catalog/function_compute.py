"""Serverless function compute prices (``data/function_compute.csv``): US$ per GB-second of
memory, per request, the memory that buys one vCPU and the most (``max_gb``) and, optionally,
the least (``min_gb``) a function may have, one row per offering with its source and date.
Used by the Dorylus-style GNN split (``gpucast predict gnn --split``).

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import by_name, named_rows, provenance, require_float
from gpucast.domain.gnn_split import FunctionCompute

FUNCTION_COLUMNS = (
    "name", "usd_per_gb_s", "usd_per_request", "gb_per_vcpu", "max_gb", "source_url", "as_of",
)  # fmt: skip
_PATH = "function_compute.csv"
DEFAULT_FUNCTION = "aws-lambda-x86"


def parse_function_compute(text: str, path: str = _PATH) -> dict[str, FunctionCompute]:
    """Rows of ``function_compute.csv`` by name."""
    out: dict[str, FunctionCompute] = {}
    for line, row, name in named_rows(text, path, FUNCTION_COLUMNS):

        def num(column: str, line: int = line, row: dict[str, str] = row) -> float:
            return require_float(row[column], path=path, line=line, column=column)

        where = provenance(row, path=path, line=line)
        out[name] = FunctionCompute(
            name=name,
            usd_per_gb_s=num("usd_per_gb_s"),
            usd_per_request=num("usd_per_request"),
            gb_per_vcpu=num("gb_per_vcpu"),
            max_gb=num("max_gb"),
            min_gb=num("min_gb") if row.get("min_gb", "").strip() else 0.0,
            source=f"catalog/data/function_compute.csv {name} {where}",
        )
    return out


@functools.lru_cache(maxsize=1)
def load_function_compute() -> dict[str, FunctionCompute]:
    """Every row of the built-in ``function_compute.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_function_compute(text, _PATH)


def function_compute(name: str = DEFAULT_FUNCTION) -> FunctionCompute:
    """One offering by name (an unknown name is one line naming the known ones)."""
    return by_name(load_function_compute(), name, field="function", file="function_compute.csv")
