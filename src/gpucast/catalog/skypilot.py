"""Import SkyPilot's public catalog CSVs (``catalogs/v8/<cloud>/vms.csv``) as gpucast offers.

Format notes (from skypilot-org/skypilot-catalog):

* AWS: one row per instance type and availability zone; ``Price`` is on-demand, ``SpotPrice``
  the zone's spot price. Azure: one row per instance type and region.
* GCP: host VM rows carry only the VM price; GPU prices sit on separate *accelerator rows*
  with an empty ``InstanceType`` (``AcceleratorName``, ``AcceleratorCount``, ``Price``,
  ``SpotPrice`` per zone). ``700.0`` means "not offered there". An offer's price is the host
  price plus the accelerator price. GPU-bundled families (a2, a3, a4, g2) get their GPUs from
  the machine name; n1-attachable GPUs (K80, P4, P100, V100, T4) become
  ``n1-standard-8+<N>x<GPU>`` offers.

Per (instance type, region) the cheapest zone's price is kept. SkyPilot has no network
column: ``network_gbps`` comes from the built-in offer of the same instance type, else
10 Gbit/s (said in the row's note and in one warning). A spot price above the on-demand one
is a stale quote: it is dropped, and the row's note and a warning say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from gpucast.catalog._csv import read_rows
from gpucast.catalog.loader import load_catalog
from gpucast.domain.catalog import Catalog, Offer
from gpucast.domain.errors import InvalidSpecError, UnknownGpuError

CLOUDS = ("aws", "gcp", "azure")
NOT_OFFERED = 700.0
DEFAULT_NETWORK_GBPS = 10.0
REQUIRED = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "Price",
    "SpotPrice",
    "Region",
)
IMPORTED_NOTE = "imported from SkyPilot catalog"
SOURCE_URLS = {
    c: f"https://github.com/skypilot-org/skypilot-catalog/blob/master/catalogs/v8/{c}/vms.csv"
    for c in CLOUDS
}
# SkyPilot accelerator names that differ from gpucast's canonical names or aliases
_NAME_MAP = {
    "V100": "V100-16GB",
    "A100": "A100-40GB",
    "H100": "H100-SXM",
    "H100-MEGA": "H100-SXM",
    "H200": "H200",
    "B200": "B200",
}
# GCP machine families that come with GPUs: regex -> (accelerator name, count or None=from name)
_GCP_BUNDLED: tuple[tuple[re.Pattern[str], str, int | None], ...] = (
    (re.compile(r"^a2-megagpu-16g$"), "A100", 16),
    (re.compile(r"^a2-highgpu-(\d+)g$"), "A100", None),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), "A100-80GB", None),
    (re.compile(r"^a3-(?:highgpu|edgegpu)-(\d+)g(?:-nolssd)?$"), "H100", None),
    (re.compile(r"^a3-megagpu-(\d+)g$"), "H100-MEGA", None),
    (re.compile(r"^a3-ultragpu-(\d+)g$"), "H200", None),
    (re.compile(r"^a4-highgpu-(\d+)g$"), "B200", None),
    (re.compile(r"^g2-standard-(4|8|12|16|32)$"), "L4", 1),
    (re.compile(r"^g2-standard-24$"), "L4", 2),
    (re.compile(r"^g2-standard-48$"), "L4", 4),
    (re.compile(r"^g2-standard-96$"), "L4", 8),
)
_N1_HOST = "n1-standard-8"
_N1_GPUS = ("K80", "P4", "P100", "V100", "T4")


@dataclass(frozen=True, slots=True, kw_only=True)
class SkypilotImport:
    """The offers read (each with its ``note``), why the other rows were skipped, and one
    warning per assumption the importer made for some offers."""

    offers: tuple[Offer, ...]
    notes: tuple[str, ...]  # one per offer, for the CSV's note column
    skipped: tuple[str, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Row:
    line: int
    instance_type: str
    accelerator: str
    count: float
    vcpus: float | None
    memory_gib: float | None
    price: float | None  # None: not offered (700.0) or empty
    spot: float | None
    region: str
    gpu_memory_mib: float | None


def _num(value: str) -> float | None:
    if value == "":
        return None
    number = float(value)  # ValueError handled by the caller
    if number != number or number < 0:  # NaN or negative
        raise ValueError(value)
    return number


def _price(value: float | None) -> float | None:
    if value is None or value == NOT_OFFERED or value <= 0:
        return None
    return value


_MEM_RE = re.compile(r"'SizeInMiB':\s*(\d+)")


def _read(path: Path) -> tuple[list[_Row], list[str]]:
    from gpucast.store.files import read_input_text

    text = read_input_text(path, "file", fix="give the path of a SkyPilot vms.csv")
    rows: list[_Row] = []
    skipped: list[str] = []
    for line, row in read_rows(text, str(path), REQUIRED):
        try:
            nums = {
                c: _num(row[c])
                for c in ("AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice")
            }
        except ValueError:
            bad = next(
                c
                for c in ("AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice")
                if not _ok(row[c])
            )
            skipped.append(f"line {line}: column {bad!r} is not a number >= 0: {row[bad]!r}")
            continue
        mem = _MEM_RE.search(row.get("GpuInfo", ""))
        rows.append(
            _Row(
                line=line,
                instance_type=row["InstanceType"],
                accelerator=row["AcceleratorName"],
                count=nums["AcceleratorCount"] or 0.0,
                vcpus=nums["vCPUs"],
                memory_gib=nums["MemoryGiB"],
                price=_price(nums["Price"]),
                spot=_price(nums["SpotPrice"]),
                region=row["Region"],
                gpu_memory_mib=float(mem.group(1)) if mem else None,
            )
        )
    return rows, skipped


def _ok(value: str) -> bool:
    try:
        _num(value)
    except ValueError:
        return False
    return True


def _canonical(catalog: Catalog, accelerator: str, gpu_memory_mib: float | None) -> str:
    name = _NAME_MAP.get(accelerator, accelerator)
    if accelerator == "V100" and gpu_memory_mib is not None and gpu_memory_mib > 20000:
        name = "V100-32GB"
    return catalog.gpu(name).name


def _cheapest(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def import_skypilot(path: Path, cloud: str, *, as_of: date | None = None) -> SkypilotImport:
    """Offers from a SkyPilot ``vms.csv`` of ``cloud``, the reasons rows were skipped and the
    assumptions made (a network figure, a dropped spot price), each said in the row's note.

    Raises :class:`DataFormatError` for an unreadable file or a missing column;
    :class:`InvalidSpecError` for an unknown cloud.
    """
    cloud = cloud.lower()
    if cloud not in CLOUDS:
        raise InvalidSpecError(
            "cloud",
            f"must be one of {', '.join(CLOUDS)}",
            got=cloud,
            fix=f"e.g. --cloud {CLOUDS[0]}",
        )
    from gpucast.store.files import input_file

    path = input_file(path, "file", fix="give the path of a SkyPilot vms.csv")
    snapshot = as_of or date.fromtimestamp(path.stat().st_mtime)
    catalog = load_catalog()
    network = {o.instance_type: o.network_gbps for o in catalog.offers}
    rows, skipped = _read(path)
    _check_cloud(rows, cloud, catalog, path)
    builder = _Builder(cloud, snapshot, network, skipped)
    if cloud == "gcp":
        _gcp(rows, catalog, builder)
    else:
        _per_region(rows, catalog, builder)
    return builder.result()


def _check_cloud(rows: list[_Row], cloud: str, catalog: Catalog, path: Path) -> None:
    """Refuse a file whose regions are all another cloud's (``--cloud`` mistyped): its rows
    would be written as ``cloud``'s offers in regions ``cloud`` does not have."""
    regions = {r.region for r in rows if r.region}
    if not regions or regions & set(catalog.regions(cloud)):
        return
    for other in CLOUDS:
        if other != cloud and regions & set(catalog.regions(other)):
            shown = ", ".join(sorted(regions)[:3]) + (", ..." if len(regions) > 3 else "")
            raise InvalidSpecError(
                "cloud",
                f"is {cloud}, but the regions of {path.name} ({shown}) are {other}'s",
                fix=f"pass --cloud {other}",
            )


class _Builder:
    def __init__(
        self, cloud: str, as_of: date, network: dict[str, float], skipped: list[str]
    ) -> None:
        self.cloud = cloud
        self.as_of = as_of
        self.network = network
        self.skipped = skipped
        self.offers: list[Offer] = []
        self.notes: list[str] = []
        self.assumed_network: list[str] = []  # "type in region" priced at DEFAULT_NETWORK_GBPS
        self.stale_spot: list[str] = []  # where a spot price above on-demand was dropped

    def result(self) -> SkypilotImport:
        warnings: list[str] = []
        if self.assumed_network:
            warnings.append(
                f"network_gbps: {DEFAULT_NETWORK_GBPS:g} Gbit/s assumed for "
                f"{_some(self.assumed_network, len(self.offers))}: SkyPilot has no network "
                "column and the built-in catalog no offer of these types; edit their "
                "network_gbps in the written CSV before planning on several nodes"
            )
        if self.stale_spot:
            warnings.append(
                "spot_usd_per_hour: above the on-demand price (a stale quote), dropped for "
                f"{_some(self.stale_spot, len(self.offers))}: they have no spot price in the "
                "written CSV; import a newer SkyPilot catalog for one"
            )
        return SkypilotImport(
            offers=tuple(self.offers),
            notes=tuple(self.notes),
            skipped=tuple(self.skipped),
            warnings=tuple(warnings),
        )

    def add(
        self,
        *,
        line: int,
        region: str,
        instance_type: str,
        gpu: str | None,
        gpus: int,
        vcpus: float | None,
        memory_gib: float | None,
        price: float | None,
        spot: float | None,
    ) -> None:
        where = f"line {line} ({instance_type} in {region})"
        if price is None:
            self.skipped.append(f"{where}: no on-demand price (empty or {NOT_OFFERED})")
            return
        if vcpus is None or vcpus < 1 or memory_gib is None or memory_gib <= 0:
            self.skipped.append(f"{where}: missing vCPUs or MemoryGiB")
            return
        notes = [IMPORTED_NOTE]
        stale = spot is not None and spot > price
        if stale:
            notes.append(f"spot {spot:g} > on-demand {price:g} US$/h dropped (a stale quote)")
            spot = None  # a spot price above on-demand is a stale quote, not a discount
        # a GCP n1 type with attached GPUs has its host's network ("n1-standard-8+2xT4")
        network = self.network.get(instance_type) or self.network.get(instance_type.split("+")[0])
        if network is None:
            notes.append(
                f"network_gbps {DEFAULT_NETWORK_GBPS:g} assumed (SkyPilot has no network "
                "column; no built-in offer of this type)"
            )
        try:
            offer = Offer(
                provider=self.cloud,
                region=region,
                instance_type=instance_type,
                gpu=gpu,
                gpus=gpus,
                vcpus=int(vcpus),
                memory_gib=memory_gib,
                network_gbps=DEFAULT_NETWORK_GBPS if network is None else network,
                on_demand_usd_per_hour=round(price, 6),
                spot_usd_per_hour=None if spot is None else round(spot, 6),
                source_url=SOURCE_URLS[self.cloud],
                as_of=self.as_of,
            )
        except InvalidSpecError as exc:
            self.skipped.append(f"{where}: {exc.message}")
            return
        self.offers.append(offer)
        self.notes.append("; ".join(notes))
        if network is None:
            self.assumed_network.append(f"{instance_type} in {region}")
        if stale:
            self.stale_spot.append(f"{instance_type} in {region}")


def _some(offers: list[str], total: int) -> str:
    """``2 of 5 offers (a in r, b in r)``: at most five named."""
    more = f", ... ({len(offers) - 5} more)" if len(offers) > 5 else ""
    return f"{len(offers)} of {total} offers ({', '.join(offers[:5])}{more})"


def _gpu_of(row: _Row, catalog: Catalog, builder: _Builder) -> tuple[str | None, int] | None:
    """(canonical GPU, count) for a row, (None, 0) for CPU-only, None when skipped."""
    if not row.accelerator or row.accelerator.upper() == "CPU-ONLY" or row.count == 0:
        return None, 0
    where = f"line {row.line} ({row.instance_type or row.accelerator} in {row.region})"
    if row.count != int(row.count):
        builder.skipped.append(f"{where}: fractional GPU ({row.count:g} x {row.accelerator})")
        return None
    try:
        return _canonical(catalog, row.accelerator, row.gpu_memory_mib), int(row.count)
    except UnknownGpuError:
        builder.skipped.append(f"{where}: accelerator {row.accelerator!r} is not a known GPU")
        return None


def _per_region(rows: list[_Row], catalog: Catalog, builder: _Builder) -> None:
    groups: dict[tuple[str, str], list[_Row]] = {}
    for row in rows:
        if not row.instance_type:
            builder.skipped.append(f"line {row.line}: empty InstanceType")
            continue
        groups.setdefault((row.instance_type, row.region), []).append(row)
    for (instance_type, region), group in groups.items():
        first = group[0]
        gpu = _gpu_of(first, catalog, builder)
        if gpu is None:
            continue
        builder.add(
            line=first.line,
            region=region,
            instance_type=instance_type,
            gpu=gpu[0],
            gpus=gpu[1],
            vcpus=first.vcpus,
            memory_gib=first.memory_gib,
            price=_cheapest([r.price for r in group]),
            spot=_cheapest([r.spot for r in group]),
        )


def _gcp(rows: list[_Row], catalog: Catalog, builder: _Builder) -> None:
    hosts: dict[tuple[str, str], list[_Row]] = {}
    accels: dict[tuple[str, int, str], list[_Row]] = {}
    for row in rows:
        if row.instance_type:
            hosts.setdefault((row.instance_type, row.region), []).append(row)
        elif row.accelerator:
            if row.count != int(row.count):
                builder.skipped.append(f"line {row.line}: fractional accelerator count")
                continue
            accels.setdefault((row.accelerator, int(row.count), row.region), []).append(row)
        else:
            builder.skipped.append(f"line {row.line}: neither InstanceType nor AcceleratorName")

    def accel_price(name: str, count: int, region: str) -> tuple[float | None, float | None]:
        group = accels.get((name, count, region), [])
        return _cheapest([r.price for r in group]), _cheapest([r.spot for r in group])

    for (instance_type, region), group in hosts.items():
        first = group[0]
        host_price = _cheapest([r.price for r in group])
        host_spot = _cheapest([r.spot for r in group])
        bundled = _bundled(instance_type, first)
        if bundled is None:
            builder.add(
                line=first.line,
                region=region,
                instance_type=instance_type,
                gpu=None,
                gpus=0,
                vcpus=first.vcpus,
                memory_gib=first.memory_gib,
                price=host_price,
                spot=host_spot,
            )
            continue
        accel, count = bundled
        where = f"line {first.line} ({instance_type} in {region})"
        try:
            gpu = _canonical(catalog, accel, None)
        except UnknownGpuError:
            builder.skipped.append(f"{where}: accelerator {accel!r} is not a known GPU")
            continue
        a_price, a_spot = accel_price(accel, count, region)
        if a_price is None:
            builder.skipped.append(f"{where}: no {count}x{accel} accelerator price in {region}")
            continue
        builder.add(
            line=first.line,
            region=region,
            instance_type=instance_type,
            gpu=gpu,
            gpus=count,
            vcpus=first.vcpus,
            memory_gib=first.memory_gib,
            price=None if host_price is None else host_price + a_price,
            spot=None if host_spot is None or a_spot is None else host_spot + a_spot,
        )

    bundled_names = {name for _, name, _ in _GCP_BUNDLED}
    for (accel, count, region), group in accels.items():
        first = group[0]
        if accel.lower().startswith("tpu"):
            builder.skipped.append(f"line {first.line}: {accel} is a TPU, not a GPU")
            continue
        if accel in bundled_names:
            continue  # priced into its machine family above
        where = f"line {first.line} ({count}x{accel} in {region})"
        if accel not in _N1_GPUS:
            builder.skipped.append(f"{where}: {accel} has no known host machine type")
            continue
        host = hosts.get((_N1_HOST, region))
        if not host:
            builder.skipped.append(f"{where}: no {_N1_HOST} host price in {region}")
            continue
        try:
            gpu = _canonical(catalog, accel, None)
        except UnknownGpuError:
            builder.skipped.append(f"{where}: accelerator {accel!r} is not a known GPU")
            continue
        a_price, a_spot = _cheapest([r.price for r in group]), _cheapest([r.spot for r in group])
        h_price, h_spot = _cheapest([r.price for r in host]), _cheapest([r.spot for r in host])
        label = _NAME_MAP.get(accel, accel).split("-")[0]
        builder.add(
            line=first.line,
            region=region,
            instance_type=f"{_N1_HOST}+{count}x{label}",
            gpu=gpu,
            gpus=count,
            vcpus=host[0].vcpus,
            memory_gib=host[0].memory_gib,
            price=None if a_price is None or h_price is None else a_price + h_price,
            spot=None if a_spot is None or h_spot is None else a_spot + h_spot,
        )


def _bundled(instance_type: str, row: _Row) -> tuple[str, int] | None:
    """(accelerator, count) for GCP machine types that come with GPUs."""
    if row.accelerator and row.count:
        return row.accelerator, int(row.count)
    for pattern, accel, count in _GCP_BUNDLED:
        match = pattern.match(instance_type)
        if match:
            return accel, count if count is not None else int(match.group(1))
    return None
