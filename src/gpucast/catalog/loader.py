"""Load the catalog: GPU specs, MIG profiles and cloud offers from versioned CSV files.

The built-in files live in ``gpucast/catalog/data`` (read with :mod:`importlib.resources`);
an extra offers CSV (same format, e.g. written by the SkyPilot importer) can add to or
override the built-in offers. Parsing of the built-in files is cached per process.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

from gpucast.catalog._csv import (
    parse_date,
    parse_float,
    parse_int,
    read_rows,
    require_float,
    require_text,
    split_bar,
)
from gpucast.domain.catalog import (
    ESTIMATED_PRICE_MARK,
    PROVIDERS,
    Catalog,
    GpuSpec,
    MigProfile,
    Offer,
)
from gpucast.domain.errors import (
    DataFormatError,
    InvalidSpecError,
    UnknownGpuError,
)

GPU_COLUMNS = (
    "name",
    "vendor",
    "architecture",
    "fp32_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "bf16_tflops",
    "fp8_tflops",
    "memory_gib",
    "memory_bandwidth_gbps",
    "interconnect_gbps",
    "pcie_generation",
    "tdp_w",
    "sm_count",
    "aliases",
    "source_url",
    "as_of",
)
MIG_COLUMNS = (
    "gpu",
    "name",
    "compute_slices",
    "memory_gib",
    "max_instances",
    "source_url",
    "as_of",
)
OFFER_COLUMNS = (
    "provider",
    "region",
    "instance_type",
    "gpu",
    "gpus",
    "vcpus",
    "memory_gib",
    "network_gbps",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "source_url",
    "as_of",
)
# -- parsing -----------------------------------------------------------------------------------


def parse_mig_profiles(text: str, path: str) -> dict[str, list[MigProfile]]:
    """MIG profiles keyed by the GPU name given in the file."""
    out: dict[str, list[MigProfile]] = {}
    for line, row in read_rows(text, path, MIG_COLUMNS):
        gpu = require_text(row["gpu"], path=path, line=line, column="gpu")
        name = require_text(row["name"], path=path, line=line, column="name")
        slices = parse_int(
            row["compute_slices"], path=path, line=line, column="compute_slices", minimum=1
        )
        if slices > 7:
            raise DataFormatError(
                path,
                f"a GPU has at most 7 compute slices, got {slices}",
                line=line,
                column="compute_slices",
            )
        source_url = require_text(row["source_url"], path=path, line=line, column="source_url")
        as_of = parse_date(row["as_of"], path=path, line=line, column="as_of")
        memory_slices = _optional_int(row, "memory_slices", path, line, maximum=8)
        placements = _placements(row.get("placements", ""), path, line)
        width = memory_slices or 1
        bad = [p for p in placements if p + width > 8 or p + slices > 8]
        if bad:
            raise DataFormatError(
                path,
                f"placement {bad[0]} of {name} runs past the GPU's 8 memory slices",
                line=line,
                column="placements",
                fix="a start offset plus the profile's memory_slices must be <= 8",
            )
        out.setdefault(gpu, []).append(
            MigProfile(
                name=name,
                compute_slices=slices,
                memory_gib=require_float(
                    row["memory_gib"], path=path, line=line, column="memory_gib"
                ),
                max_instances=parse_int(
                    row["max_instances"], path=path, line=line, column="max_instances", minimum=1
                ),
                memory_slices=memory_slices,
                sm_count=_optional_int(row, "sm_count", path, line),
                placements=placements,
                source_url=source_url,
                as_of=as_of,
            )
        )
    return out


def _optional_int(
    row: dict[str, str], column: str, path: str, line: int, *, maximum: int | None = None
) -> int | None:
    """An optional whole number >= 1 (an absent column or empty cell gives None)."""
    text = row.get(column, "").strip()
    if not text:
        return None
    value = parse_int(text, path=path, line=line, column=column, minimum=1)
    if maximum is not None and value > maximum:
        raise DataFormatError(path, f"must be <= {maximum}, got {text!r}", line=line, column=column)
    return value


def _placements(text: str, path: str, line: int) -> tuple[int, ...]:
    """MIG start offsets written ``0;2;4`` (empty: not published)."""
    text = text.strip()
    if not text:
        return ()
    starts = tuple(
        parse_int(p.strip(), path=path, line=line, column="placements", minimum=0)
        for p in text.split(";")
    )
    if len(set(starts)) != len(starts):
        raise DataFormatError(
            path, f"repeated start offset in {text!r}", line=line, column="placements"
        )
    return tuple(sorted(starts))


def parse_gpus(
    text: str,
    path: str,
    mig: dict[str, list[MigProfile]] | None = None,
    mig_path: str = "mig_profiles.csv",
) -> tuple[GpuSpec, ...]:
    """GPU specs from CSV text. ``base_clock_mhz``, ``boost_clock_mhz``, the power facts
    (``idle_power_w``, ``min_power_limit_w``, ``max_power_limit_w``), ``int8_tops`` and
    ``fp32_dedicated_tflops`` are
    optional columns: a file without them (or an empty cell) gives ``None``."""
    mig = dict(mig or {})
    specs: list[GpuSpec] = []
    for line, row in read_rows(text, path, GPU_COLUMNS):

        def num(
            column: str, *, optional: bool = False, _row: dict[str, str] = row, _line: int = line
        ) -> float | None:
            return parse_float(
                _row[column], path=path, line=_line, column=column, optional=optional
            )

        def opt(column: str, _row: dict[str, str] = row, _line: int = line) -> float | None:
            return parse_float(
                _row.get(column, ""), path=path, line=_line, column=column, optional=True
            )

        def req(column: str, _row: dict[str, str] = row, _line: int = line) -> float:
            return require_float(_row[column], path=path, line=_line, column=column)

        name = require_text(row["name"], path=path, line=line, column="name")
        memory_gib = req("memory_gib")
        profiles = tuple(mig.pop(name, []))
        for profile in profiles:
            if profile.memory_gib > memory_gib:
                raise DataFormatError(
                    mig_path,
                    f"profile {profile.name} has {profile.memory_gib} GiB, more "
                    f"than the {memory_gib} GiB of {name}",
                    column="memory_gib",
                )
        try:
            spec = GpuSpec(
                name=name,
                vendor=require_text(row["vendor"], path=path, line=line, column="vendor"),
                architecture=require_text(
                    row["architecture"], path=path, line=line, column="architecture"
                ),
                fp32_tflops=req("fp32_tflops"),
                tf32_tflops=num("tf32_tflops", optional=True),
                fp16_tflops=num("fp16_tflops", optional=True),
                bf16_tflops=num("bf16_tflops", optional=True),
                fp8_tflops=num("fp8_tflops", optional=True),
                memory_gib=memory_gib,
                memory_bandwidth_gbps=req("memory_bandwidth_gbps"),
                interconnect_gbps=num("interconnect_gbps", optional=True),
                pcie_generation=parse_int(
                    row["pcie_generation"],
                    path=path,
                    line=line,
                    column="pcie_generation",
                    minimum=1,
                ),
                tdp_w=req("tdp_w"),
                sm_count=parse_int(
                    row["sm_count"], path=path, line=line, column="sm_count", minimum=1
                ),
                mig_profiles=profiles,
                aliases=split_bar(row["aliases"]),
                source_url=require_text(
                    row["source_url"], path=path, line=line, column="source_url"
                ),
                as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                base_clock_mhz=opt("base_clock_mhz"),
                boost_clock_mhz=opt("boost_clock_mhz"),
                sustained_clock_mhz=opt("sustained_clock_mhz"),
                idle_power_w=opt("idle_power_w"),
                min_power_limit_w=opt("min_power_limit_w"),
                max_power_limit_w=opt("max_power_limit_w"),
                int8_tops=opt("int8_tops"),
                fp32_dedicated_tflops=opt("fp32_dedicated_tflops"),
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
        specs.append(spec)
    if mig:
        raise DataFormatError(
            mig_path,
            f"MIG profiles for unknown GPU(s): {', '.join(mig)}",
            column="gpu",
            fix="use a name from gpus.csv",
        )
    return tuple(specs)


def parse_offers(text: str, path: str, gpus: Sequence[GpuSpec]) -> tuple[Offer, ...]:
    """Offers from CSV text; the ``gpu`` column may use any alias (stored canonical)."""
    lookup = Catalog(gpus=tuple(gpus), offers=())
    offers: list[Offer] = []
    for line, row in read_rows(text, path, OFFER_COLUMNS):
        gpu_text = row["gpu"]
        gpu_name: str | None = None
        if gpu_text:
            try:
                gpu_name = lookup.gpu(gpu_text).name
            except UnknownGpuError as exc:
                raise DataFormatError(path, exc.message, line=line, column="gpu") from exc
        provider = require_text(row["provider"], path=path, line=line, column="provider")
        if provider not in PROVIDERS:
            raise DataFormatError(
                path,
                f"provider must be one of {', '.join(PROVIDERS)}, got {provider!r}",
                line=line,
                column="provider",
            )
        gpus_count = parse_int(row["gpus"], path=path, line=line, column="gpus")
        if (gpu_name is None) != (gpus_count == 0):
            raise DataFormatError(
                path, "gpus must be 0 exactly when gpu is empty", line=line, column="gpus"
            )
        od = require_float(
            row["on_demand_usd_per_hour"], path=path, line=line, column="on_demand_usd_per_hour"
        )
        spot = parse_float(
            row["spot_usd_per_hour"],
            path=path,
            line=line,
            column="spot_usd_per_hour",
            optional=True,
        )
        if spot is not None and spot > od:  # the importer drops such a quote as stale
            raise DataFormatError(
                path,
                f"must not exceed on_demand_usd_per_hour (got {spot:g} > {od:g}); a spot price "
                "is a discount: correct it or leave it empty (no spot market)",
                line=line,
                column="spot_usd_per_hour",
            )
        try:
            offers.append(
                Offer(
                    provider=provider,
                    region=require_text(row["region"], path=path, line=line, column="region"),
                    instance_type=require_text(
                        row["instance_type"], path=path, line=line, column="instance_type"
                    ),
                    gpu=gpu_name,
                    gpus=gpus_count,
                    vcpus=parse_int(row["vcpus"], path=path, line=line, column="vcpus", minimum=1),
                    memory_gib=require_float(
                        row["memory_gib"], path=path, line=line, column="memory_gib"
                    ),
                    network_gbps=require_float(
                        row["network_gbps"], path=path, line=line, column="network_gbps"
                    ),
                    on_demand_usd_per_hour=od,
                    spot_usd_per_hour=spot,
                    source_url=require_text(
                        row["source_url"], path=path, line=line, column="source_url"
                    ),
                    as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                    price_estimated=(row.get("note") or "")
                    .lstrip()
                    .upper()
                    .startswith(ESTIMATED_PRICE_MARK),
                )
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
    return tuple(offers)


def _data_text(name: str) -> str:
    return resources.files("gpucast.catalog").joinpath("data", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _builtin() -> Catalog:
    mig = parse_mig_profiles(_data_text("mig_profiles.csv"), "mig_profiles.csv")
    gpus = parse_gpus(_data_text("gpus.csv"), "gpus.csv", mig)
    offers = parse_offers(_data_text("offers.csv"), "offers.csv", gpus)
    return Catalog(gpus=gpus, offers=offers)


def merge_offers(base: Iterable[Offer], extra: Iterable[Offer]) -> tuple[Offer, ...]:
    """``base`` with ``extra`` added; an extra offer replaces a base offer with the same
    (provider, region, instance_type)."""
    merged = {(o.provider, o.region, o.instance_type): o for o in base}
    for offer in extra:
        merged[(offer.provider, offer.region, offer.instance_type)] = offer
    return tuple(merged.values())


def offers_file(given: Path | str | None) -> Path | None:
    """The offers CSV a verb adds to the catalog: ``given`` (``--offers``), else
    ``$GPUCAST_OFFERS`` when set, else none."""
    import os

    from gpucast.domain.catalog import OFFERS_ENV

    if given is not None:
        return Path(given)
    configured = os.environ.get(OFFERS_ENV, "").strip()
    return Path(configured).expanduser() if configured else None


def load_catalog(offers_path: Path | None = None) -> Catalog:
    """The built-in catalog, plus (and overridden by) the offers in ``offers_path``."""
    builtin = _builtin()
    if offers_path is None:
        return builtin
    from gpucast.store.files import read_input_text

    path = Path(offers_path)
    text = read_input_text(path, "offers", fix="check the path given to --offers")
    extra = parse_offers(text, str(path), builtin.gpus)
    return Catalog(gpus=builtin.gpus, offers=merge_offers(builtin.offers, extra))


def offers_to_csv(offers: Iterable[Offer], notes: Sequence[str] | None = None) -> str:
    """Offers as CSV text in the format :func:`load_catalog` reads (plus a ``note`` column)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*OFFER_COLUMNS, "note"])
    for i, o in enumerate(offers):
        writer.writerow(
            [
                o.provider,
                o.region,
                o.instance_type,
                o.gpu or "",
                o.gpus,
                o.vcpus,
                f"{o.memory_gib:g}",
                f"{o.network_gbps:g}",
                f"{o.on_demand_usd_per_hour:.6g}",
                "" if o.spot_usd_per_hour is None else f"{o.spot_usd_per_hour:.6g}",
                o.source_url,
                o.as_of.isoformat(),
                notes[i]
                if notes
                else (
                    f"{ESTIMATED_PRICE_MARK}: prices not read from a source"
                    if o.price_estimated
                    else ""
                ),
            ]
        )
    return buffer.getvalue()


def write_offers_csv(
    offers: Iterable[Offer], path: Path, notes: Sequence[str] | None = None
) -> None:
    """Write offers to ``path`` atomically (temp file + rename)."""
    from gpucast.store.files import write_text_atomic

    write_text_atomic(Path(path), offers_to_csv(offers, notes), field="out")
