"""Refresh rows of src/gpucast/catalog/data/offers.csv from SkyPilot catalog files.

Usage:  python tools/offers_from_skypilot.py SRC_DIR

SRC_DIR holds SkyPilot ``vms.csv`` files (whole files, or excerpts keeping the header and every
zone row of the instance types used) named ``<tag>.csv`` for the tags in ``SOURCES``,
each taken from skypilot-org/skypilot-catalog at the pinned commit. Extra columns are ignored.

Rules (applied the same way to every row):
* AWS / Azure: on-demand = Price, spot = min SpotPrice over the region's zone rows.
* GCP: price = host VM row + accelerator row (empty InstanceType), each the min over the
  region's zones; 700.0 or an empty SpotPrice means "not offered" and is skipped.
* A spot price that is not below on-demand (within 0.01 %: SkyPilot writes Price, rounded, as
  the SpotPrice of zones without a spot market) is dropped (left empty).
* Prices keep the catalog's digits (rounded to 6 decimals only to hide float noise of sums).
* vCPUs / MemoryGiB come from the (host) VM row; network_gbps is kept from the existing row of the
  same instance type (SkyPilot has no network column).
Rows of offers.csv not produced here are kept unchanged.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

OFFERS = Path(__file__).resolve().parents[1] / "src/gpucast/catalog/data/offers.csv"
REPO = "https://github.com/skypilot-org/skypilot-catalog/blob"
READ_ON = "2026-11-29"
NOT_OFFERED = 700.0
# Zones without a real spot market list SpotPrice = Price rounded to 4-6 decimals.
SAME_AS_ON_DEMAND = 1e-4
PLACEHOLDER = "network_gbps 10 is a placeholder"
UNVERIFIED = "UNVERIFIED: remembered list price, not read from any source; "
# tag -> (cloud, commit, path in repo)
SOURCES = {
    "gcp_v8": ("gcp", "8427bbff988abdd050a9f51addd314ef31cb4e85", "catalogs/v8/gcp/vms.csv"),
    "gcp_v2": ("gcp", "d72d6709e890af5cb2501d15c45c67282fec845a", "catalogs/v2/gcp.csv"),
    "aws_v8": ("aws", "e385a0d348eda9cefd9806423e7725944dc249e4", "catalogs/v8/aws/vms.csv"),
    "azure_v6": ("azure", "098741e70562f65d7af1cceb81e33b284f742604", "catalogs/v6/azure/vms.csv"),
}
# (tag, instance_type, gpu, gpus, host type, accelerator name or "", regions)
TARGETS: list[tuple[str, str, str, int, str, str, tuple[str, ...]]] = []


def _gcp(it: str, gpu: str, n: int, host: str, acc: str, regions: str, tag: str = "gcp_v8") -> None:
    TARGETS.append((tag, it, gpu, n, host, acc, tuple(regions.split())))


def _plain(tag: str, its: str, gpu: str, regions: str, gpus: int = 0) -> None:
    """Whole-VM offers; ``gpus`` > 0 overrides the catalog's AcceleratorCount (see NOTES)."""
    for it in its.split():
        TARGETS.append((tag, it, gpu, gpus, it, "", tuple(regions.split())))


US3 = "us-central1 us-east1 us-west1"
N1_4 = "us-central1 us-east1 europe-west4 asia-east1"
US3_EU_ASIA = f"{US3} europe-west4 asia-east1"
for g, name in (("P100", "P100"), ("V100-16GB", "V100"), ("T4", "T4")):
    _gcp(f"n1-standard-4+1x{name}", g, 1, "n1-standard-4", name, US3_EU_ASIA)
    _gcp(f"n1-standard-8+1x{name}", g, 1, "n1-standard-8", name, N1_4)
    _gcp(f"n1-standard-8+4x{name}", g, 4, "n1-standard-8", name, N1_4)
    _gcp(f"n1-highmem-8+1x{name}", g, 1, "n1-highmem-8", name, N1_4)
_gcp("n1-standard-4+1xP4", "P4", 1, "n1-standard-4", "P4", "us-central1 us-east4 europe-west4")
_gcp("n1-standard-8+1xP4", "P4", 1, "n1-standard-8", "P4", "us-central1 us-east4 europe-west4")
_gcp("n1-standard-8+4xP4", "P4", 4, "n1-standard-8", "P4", "us-central1 us-east4 europe-west4")
_gcp("n1-highmem-8+1xP4", "P4", 1, "n1-highmem-8", "P4", "us-central1 us-east4 europe-west4")
# K80 in us-east1 is in the v2 file but its n1 host rows there were not copied yet; the v2 file
# is US-only, so europe-west1 / asia-east1 K80 offers stay unverified.
for host, n in (("n1-standard-4", 1), ("n1-standard-8", 1), ("n1-standard-8", 4)):
    _gcp(f"{host}+{n}xK80", "K80", n, host, "K80", "us-central1 us-west1", tag="gcp_v2")
_gcp("n1-standard-4", "", 0, "n1-standard-4", "", US3_EU_ASIA)
_gcp("n1-standard-8", "", 0, "n1-standard-8", "", N1_4)
_gcp("n1-highmem-8", "", 0, "n1-highmem-8", "", N1_4)
_gcp(
    "a2-highgpu-1g", "A100-40GB", 1, "a2-highgpu-1g", "A100", f"{US3} europe-west4 asia-southeast1"
)
_gcp(
    "a2-highgpu-8g", "A100-40GB", 8, "a2-highgpu-8g", "A100", f"{US3} europe-west4 asia-southeast1"
)
_gcp(
    "a2-ultragpu-1g",
    "A100-80GB",
    1,
    "a2-ultragpu-1g",
    "A100-80GB",
    "us-central1 us-east4 europe-west4 asia-southeast1",
)
_gcp(
    "a3-highgpu-8g",
    "H100-SXM",
    8,
    "a3-highgpu-8g",
    "H100",
    "us-central1 us-east4 us-west1 us-east5 europe-west4 asia-southeast1",
)
_gcp(
    "a3-ultragpu-8g",
    "H200",
    8,
    "a3-ultragpu-8g",
    "H200",
    "us-central1 us-east4 us-west1 europe-west4",
)
_gcp(
    "a4-highgpu-8g",
    "B200",
    8,
    "a4-highgpu-8g",
    "B200",
    "us-central1 us-east1 us-east4 europe-west4 us-south1",
)
G2 = "us-central1 us-east4 europe-west4 asia-southeast1"
_gcp("g2-standard-4", "L4", 1, "g2-standard-4", "L4", G2)
_gcp("g2-standard-8", "L4", 1, "g2-standard-8", "L4", G2)
_gcp("g2-standard-48", "L4", 4, "g2-standard-48", "L4", f"{G2} us-east1 us-west1")
CPU4 = "us-central1 us-east1 europe-west4 asia-east1"
_gcp("n2-standard-8", "", 0, "n2-standard-8", "", CPU4)
_gcp("c2-standard-8", "", 0, "c2-standard-8", "", CPU4)
AWS3 = "us-east-1 us-west-2 eu-west-1"
AWS2 = "us-east-1 us-west-2"
_plain("aws_v8", "g5.xlarge g5.2xlarge g5.48xlarge g5.12xlarge", "A10G", AWS3)
_plain("aws_v8", "g4dn.xlarge", "T4", "us-east-1 us-east-2 us-west-1 us-west-2 eu-west-1")
_plain("aws_v8", "g4dn.2xlarge g4dn.12xlarge", "T4", AWS3)
# g6 has no eu-west-1 rows at the pinned commit: those offers stay unverified.
_plain("aws_v8", "g6.xlarge g6.12xlarge g6.48xlarge", "L4", AWS2)
_plain("aws_v8", "g6e.xlarge", "L40S", "us-east-1 us-west-2 us-east-2 eu-central-1 ap-northeast-1")
_plain("aws_v8", "g6e.8xlarge", "L40S", "us-east-1 us-west-2 us-east-2 eu-north-1")
# p2 (K80) is absent from the pinned v8 file (retired family): p2 offers stay unverified.
_plain("aws_v8", "p3.2xlarge p3.8xlarge p3.16xlarge", "V100-16GB", AWS3)
_plain("aws_v8", "p3dn.24xlarge", "V100-32GB", AWS3)
_plain("aws_v8", "p4d.24xlarge", "A100-40GB", AWS3)
_plain("aws_v8", "p4de.24xlarge", "A100-80GB", "us-east-1 us-west-2 eu-central-1 ap-southeast-1")
P5_REGIONS = "us-east-1 us-west-2 us-east-2 eu-west-2 ap-northeast-1"
_plain("aws_v8", "p5.48xlarge", "H100-SXM", P5_REGIONS)
# p5e.48xlarge rows carry no on-demand Price at the pinned commit, so no p5e offer is made.
_plain("aws_v8", "p5en.48xlarge", "H200", "us-east-1 us-east-2 us-west-2")
_plain("aws_v8", "p6-b200.48xlarge", "B200", "us-east-1 us-east-2 us-west-2")
_plain("aws_v8", "c5.xlarge c5.2xlarge c5.4xlarge m5.xlarge m5.2xlarge m5.4xlarge", "", AWS3)
# Azure v6 lists US regions only (no westeurope): westeurope offers stay unverified.
AZ2 = "eastus westus2"
_plain("azure_v6", "Standard_D4s_v3 Standard_D8s_v3 Standard_F4s_v2 Standard_F8s_v2", "", AZ2)
_plain("azure_v6", "Standard_NC4as_T4_v3 Standard_NC16as_T4_v3 Standard_NC64as_T4_v3", "T4", AZ2)
_plain("azure_v6", "Standard_NC6s_v3 Standard_NC12s_v3 Standard_NC24s_v3", "V100-16GB", AZ2)
_plain("azure_v6", "Standard_NC24ads_A100_v4 Standard_NC96ads_A100_v4", "A100-80GB", AZ2)
_plain("azure_v6", "Standard_ND96asr_v4", "A100-40GB", AZ2)
_plain("azure_v6", "Standard_ND96amsr_A100_v4", "A100-80GB", "eastus")
_plain("azure_v6", "Standard_ND96isr_H100_v5", "H100-SXM", "eastus", gpus=8)
# K80 NC (retired) is listed only in southcentralus and westus2; NC6s_v2 (P100), H200 and
# MI300X VMs are absent from the pinned v6 file.
_plain("azure_v6", "Standard_NC6 Standard_NC12 Standard_NC24", "K80", "westus2")
# Notes appended to rows of one (cloud, instance type).
NOTES = {
    ("azure", "Standard_ND96isr_H100_v5"): (
        "catalog AcceleratorCount says 12; 8 used (an ND H100 v5 VM has 8 H100 GPUs)"
    ),
}


def _float(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return None if v == NOT_OFFERED else v


def load(path: Path) -> dict[tuple[str, str, str], list[dict[str, str]]]:
    """(instance type or "", accelerator "name:count" for accelerator rows, region) -> rows."""
    out: dict[tuple[str, str, str], list[dict[str, str]]] = defaultdict(list)
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            acc = ""
            if not row["InstanceType"]:
                acc = f"{row['AcceleratorName']}:{int(float(row['AcceleratorCount']))}"
            out[(row["InstanceType"], acc, row["Region"])].append(row)
    return out


def _prices(rows: list[dict[str, str]]) -> tuple[float | None, float | None]:
    od = [v for r in rows if (v := _float(r["Price"])) is not None]
    spot = [v for r in rows if (v := _float(r.get("SpotPrice", ""))) is not None]
    return (min(od) if od else None, min(spot) if spot else None)


def build(src: Path, existing: list[dict[str, str]]) -> list[dict[str, str]]:
    tables = {tag: load(src / f"{tag}.csv") for tag in SOURCES if (src / f"{tag}.csv").exists()}
    network = {(r["provider"], r["instance_type"]): r["network_gbps"] for r in existing}
    # A type keeps its "placeholder" flag across re-runs (its network_gbps came from here).
    placeholder = {
        (r["provider"], r["instance_type"]) for r in existing if PLACEHOLDER in r["note"]
    }
    rows = {(r["provider"], r["region"], r["instance_type"]): r for r in existing}
    for tag, it, gpu, n, host, acc, regions in TARGETS:
        if tag not in tables:
            continue
        cloud, commit, repo_path = SOURCES[tag]
        for region in regions:
            host_rows = tables[tag].get((host, "", region), [])
            od, spot = _prices(host_rows)
            if od is None:
                raise SystemExit(f"{tag}: no {host} rows in {region}")
            how = f"{host} host"
            if acc:
                acc_od, acc_spot = _prices(tables[tag].get(("", f"{acc}:{n}", region), []))
                if acc_od is None:
                    raise SystemExit(f"{tag}: no {acc} x{n} rows in {region}")
                od += acc_od
                spot = None if spot is None or acc_spot is None else spot + acc_spot
                how += f" + {n}x {acc} accelerator row"
            if spot is not None and spot >= od * (1 - SAME_AS_ON_DEMAND):
                spot = None
            key = (cloud, region, it)
            old = rows.get(key, {})
            rows[key] = {
                "provider": cloud,
                "region": region,
                "instance_type": it,
                "gpu": gpu,
                "gpus": str(n or int(float(host_rows[0]["AcceleratorCount"] or 0))),
                "vcpus": str(int(float(host_rows[0]["vCPUs"]))),
                "memory_gib": f"{float(host_rows[0]['MemoryGiB']):g}",
                "network_gbps": old.get("network_gbps") or network.get((cloud, it), "10"),
                "on_demand_usd_per_hour": f"{round(od, 6):.10g}",
                "spot_usd_per_hour": "" if spot is None else f"{round(spot, 6):.10g}",
                "source_url": f"{REPO}/{commit}/{repo_path}",
                "as_of": READ_ON,
                "note": (
                    f"SkyPilot catalog {cloud} {repo_path} @ {commit[:7]}"
                    + (f" ({how}s summed)" if acc else "")
                    + "; on-demand = min Price, spot = min SpotPrice over the region's zones"
                    + f"; commit date unknown, as_of = date read ({READ_ON})"
                    + (
                        f"; {PLACEHOLDER}"
                        if (cloud, it) not in network or (cloud, it) in placeholder
                        else ""
                    )
                    + (f"; {NOTES[(cloud, it)]}" if (cloud, it) in NOTES else "")
                ),
            }
    first: dict[tuple[str, str], int] = {}
    for r in rows.values():
        first.setdefault((r["provider"], r["instance_type"]), len(first))
        remembered = "approximation" in r["note"] or "list price" in r["note"]
        if remembered and not r["note"].startswith(UNVERIFIED):
            r["note"] = UNVERIFIED + r["note"]
    return sorted(rows.values(), key=lambda r: first[(r["provider"], r["instance_type"])])


def main() -> None:
    with OFFERS.open(newline="") as fh:
        reader = csv.DictReader(fh)
        columns = list(reader.fieldnames or [])
        existing = list(reader)
    out = build(Path(sys.argv[1]), existing)
    with OFFERS.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(out)


if __name__ == "__main__":
    main()
