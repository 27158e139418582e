"""CPU server types (``data/cpu_instances.csv``): cores, clock, memory bandwidth, disk, price.

One row per (provider, region, instance type), each with its source and the date it was read
(see the ``note`` column for what each figure is). Parsing is strict (every bad cell names
its file, line and column) and cached per process. :func:`cpu_instances` filters by name,
provider and architecture; an unknown name lists the close ones.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import (
    parse_date,
    parse_int,
    read_rows,
    require_float,
    require_text,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownNameError
from gpucast.domain.program import CpuInstance

CPU_INSTANCE_COLUMNS = (
    "provider", "region", "instance_type", "arch", "cpu", "vcpus", "threads_per_core",
    "clock_ghz", "memory_gib", "memory_bandwidth_gbs", "disk_mb_per_s",
    "on_demand_usd_per_hour", "source_url", "as_of", "note",
)  # fmt: skip
ARCHES: tuple[str, ...] = ("x86_64", "arm64")


class UnknownInstanceError(UnknownNameError):
    kind = "CPU instance type"


def parse_cpu_instances(text: str, path: str) -> tuple[CpuInstance, ...]:
    """CPU instance types from CSV text (see the module docstring)."""
    out: list[CpuInstance] = []
    seen: set[tuple[str, str, str]] = set()
    for line, row in read_rows(text, path, CPU_INSTANCE_COLUMNS):

        def num(column: str, row: dict[str, str] = row, line: int = line) -> float:
            return require_float(row[column], path=path, line=line, column=column)

        key = (row["provider"], row["region"], row["instance_type"])
        if key in seen:
            raise DataFormatError(
                path, f"second row for {'/'.join(key)}", line=line, column="instance_type"
            )
        seen.add(key)
        if row["arch"] not in ARCHES:
            raise DataFormatError(
                path, f"arch must be one of {', '.join(ARCHES)}", line=line, column="arch"
            )
        try:
            out.append(
                CpuInstance(
                    provider=require_text(row["provider"], path=path, line=line, column="provider"),
                    region=require_text(row["region"], path=path, line=line, column="region"),
                    instance_type=require_text(
                        row["instance_type"], path=path, line=line, column="instance_type"
                    ),
                    arch=row["arch"],
                    cpu=row["cpu"],
                    vcpus=parse_int(row["vcpus"], path=path, line=line, column="vcpus", minimum=1),
                    threads_per_core=parse_int(
                        row["threads_per_core"],
                        path=path,
                        line=line,
                        column="threads_per_core",
                        minimum=1,
                    ),
                    clock_ghz=num("clock_ghz"),
                    memory_gib=num("memory_gib"),
                    memory_bandwidth_gbs=num("memory_bandwidth_gbs"),
                    disk_mb_per_s=num("disk_mb_per_s"),
                    on_demand_usd_per_hour=num("on_demand_usd_per_hour"),
                    source_url=require_text(
                        row["source_url"], path=path, line=line, column="source_url"
                    ),
                    as_of=parse_date(
                        row["as_of"], path=path, line=line, column="as_of"
                    ).isoformat(),
                    note=row["note"],
                )
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
    if not out:
        raise DataFormatError(path, "has no rows", fix="add at least one instance type")
    return tuple(out)


@functools.cache
def shipped_cpu_instances() -> tuple[CpuInstance, ...]:
    """The built-in CPU instance types."""
    resource = resources.files("gpucast.catalog") / "data" / "cpu_instances.csv"
    return parse_cpu_instances(
        resource.read_text(encoding="utf-8"), "gpucast/catalog/data/cpu_instances.csv"
    )


def cpu_instances(
    names: tuple[str, ...] = (),
    *,
    provider: str | None = None,
    arch: str | None = None,
    field: str | None = None,
) -> tuple[CpuInstance, ...]:
    """The catalog's CPU instance types, optionally only ``names``, one provider, one arch;
    ``field``: the flag ``names`` came from, starting the line of an unknown one."""
    rows = shipped_cpu_instances()
    if arch is not None and arch not in ARCHES:
        raise InvalidSpecError("arch", f"must be one of {', '.join(ARCHES)}", got=arch)
    known = [r.instance_type for r in rows]
    for name in names:
        if name not in known:
            raise UnknownInstanceError(
                name, known, fix="see catalog/data/cpu_instances.csv", field=field
            )
    return tuple(
        r
        for r in rows
        if (not names or r.instance_type in names)
        and (provider is None or r.provider == provider)
        and (arch is None or r.arch == arch)
    )
