"""Instances' dedicated bandwidth to Amazon EBS (``data/ebs_bandwidth.csv``, issue #19): the
link between an EBS-optimized instance and its volumes, baseline and maximum (Mbit/s), one
row per instance type with its source and date. A weight load from an EBS volume crosses it
(``predict coldstart --instance``): a 4,000 MiB/s io2 volume on a g5.12xlarge reads at the
instance's 16,000 Mbit/s (2 GB/s), not at the volume's rate.

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import by_name, provenance, read_rows, require_float, require_text
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serverless import InstanceEbs

EBS_COLUMNS = (
    "provider", "instance_type", "baseline_mbps", "maximum_mbps", "source_url", "as_of",
)  # fmt: skip
EBS_PATH = "ebs_bandwidth.csv"


def parse_ebs_bandwidth(text: str, path: str = EBS_PATH) -> dict[str, InstanceEbs]:
    """Rows of ``ebs_bandwidth.csv`` by instance type (lower-cased); an instance type twice,
    a bandwidth <= 0 or a maximum below the baseline is an error naming the line."""
    out: dict[str, InstanceEbs] = {}
    for line, row in read_rows(text, path, EBS_COLUMNS):
        name = require_text(row["instance_type"], path=path, line=line, column="instance_type")
        name = name.lower()
        if name in out:
            raise DataFormatError(
                path, f"instance_type {name!r} appears twice", line=line, column="instance_type"
            )
        baseline, maximum = (
            require_float(row[c], path=path, line=line, column=c)
            for c in ("baseline_mbps", "maximum_mbps")
        )
        try:
            out[name] = InstanceEbs(
                provider=require_text(row["provider"], path=path, line=line, column="provider"),
                instance_type=name,
                baseline_mbps=baseline,
                maximum_mbps=maximum,
                source=f"catalog/data/{EBS_PATH} {name} {provenance(row, path=path, line=line)}",
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.detail, line=line, column=exc.field) from exc
    if not out:
        raise DataFormatError(path, "has no rows")
    return out


@functools.lru_cache(maxsize=1)
def load_ebs_bandwidth() -> dict[str, InstanceEbs]:
    """Every row of the built-in ``ebs_bandwidth.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", EBS_PATH).read_text("utf-8")
    return parse_ebs_bandwidth(text, EBS_PATH)


def instance_ebs(instance_type: str) -> InstanceEbs:
    """One instance type's EBS bandwidth (an unknown one is one line naming the known ones
    and the file that lists them)."""
    return by_name(
        load_ebs_bandwidth(),
        instance_type,
        field="instance",
        file=f"catalog/data/{EBS_PATH}",
        kind="instance type",
    )
