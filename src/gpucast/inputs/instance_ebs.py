"""The instance's EBS link as a link of a cold start's weight load (``predict coldstart
--instance TYPE`` or ``--ebs-gbps N``, issue #19).

An EBS volume is read over the instance's dedicated EBS bandwidth, so weights read from one
cross three links before PCIe: the volume's rate (``coldstart.csv``), the instance's EBS link
(``ebs_bandwidth.csv``) and, for remote storage, the network. The slowest bounds the copy.

Which of an instance's two figures applies: AWS's table gives a baseline and a maximum, and
says the sizes whose two differ "can support maximum performance for 30 minutes at least
once every 24 hours, after which they revert to their baseline performance"; the others
sustain the maximum indefinitely. A cold start's weight load lasts seconds to a few minutes,
far inside 30 minutes, so the **maximum** applies to a one-off load -- said as an assumption
beside the prediction, with the baseline a user gets once the burst is spent (many cold
starts a day, or other EBS traffic) and the flag that prices it (``--ebs-gbps``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpucast.domain.errors import InvalidSpecError

if TYPE_CHECKING:
    from gpucast.domain.catalog import Catalog, GpuSpec

#: the name of the instance's EBS link among a weight load's links (``bound_by`` when it binds)
EBS_LINK = "instance-ebs"
#: storage classes of ``coldstart.csv`` that are EBS volumes start with it
EBS_PREFIX = "ebs-"
#: ceiling of --network-gbps and --ebs-gbps (Gbit/s): far above any instance's links
MAX_NETWORK_GBPS = 100_000.0


def check_gbps(name: str, value: float | None, example: str) -> None:
    """A link's bandwidth flag (Gbit/s): None or in (0, :data:`MAX_NETWORK_GBPS`]."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_NETWORK_GBPS):
        raise InvalidSpecError(
            name,
            f"must be in (0, {MAX_NETWORK_GBPS:g}] Gbit/s",
            got=value,
            fix=f"e.g. --{name} {example}",
        )


def check_instance_options(instance: str | None, ebs_gbps: float | None) -> None:
    """``--instance`` and ``--ebs-gbps`` as a request holds them (predict coldstart,
    simulate/plan serverless): a bandwidth in range, not both, no empty instance type."""
    check_gbps("ebs-gbps", ebs_gbps, "16")
    if instance is not None and ebs_gbps is not None:
        raise InvalidSpecError(
            "ebs-gbps", "replaces --instance's EBS bandwidth: give one of them",
            got=ebs_gbps, fix=f"drop --ebs-gbps to use {instance}'s, or --instance",
        )  # fmt: skip
    if instance is not None and not instance.strip():
        raise InvalidSpecError("instance", "must not be empty", fix="e.g. --instance g5.12xlarge")


def check_instance(instance: str | None, gpu: GpuSpec | None, catalog: Catalog) -> None:
    """Before any work: an ``--instance`` type ``ebs_bandwidth.csv`` lists, carrying ``gpu``
    (:func:`check_instance_gpu`)."""
    from gpucast.catalog.ebs import instance_ebs

    if instance is None:
        return
    instance_ebs(instance)  # an unknown type fails before any work
    check_instance_gpu(instance, gpu, catalog)


def instance_links(
    storage: str, *, instance: str | None, ebs_gbps: float | None, network_gbps: float | None
) -> tuple[dict[str, float | None], dict[str, str], dict[str, str]]:
    """(links, sources, assumptions) of the instance between ``storage`` and the host: its
    EBS link (:func:`ebs_link`) and the network (:func:`network_link`, ``--network-gbps``)."""
    links, sources, assumptions = ebs_link(storage, instance=instance, ebs_gbps=ebs_gbps)
    links.update(network_link(storage, network_gbps))
    if network_gbps is not None:
        sources["network"] = f"--network-gbps {network_gbps:g}"
    return links, sources, assumptions


def ebs_link(
    storage: str, *, instance: str | None, ebs_gbps: float | None
) -> tuple[dict[str, float | None], dict[str, str], dict[str, str]]:
    """(links, sources, assumptions) the instance's EBS link adds to a weight load from
    ``storage``: none without ``instance`` and ``ebs_gbps``; ``ebs_gbps`` (Gbit/s) is the
    user's own figure; else the instance's maximum from ``ebs_bandwidth.csv`` (module
    docstring); without either, from an EBS volume, an assumption says the link is not
    bounded (:func:`_unbounded_text`). Off EBS the link is not crossed: ``--instance`` says
    so, ``--ebs-gbps`` is an error (a figure that cannot apply)."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.catalog.ebs import instance_ebs
    from gpucast.domain.serverless import EBS_BURST_S, MBPS_PER_GBS

    if instance is None and ebs_gbps is None:
        if not storage.startswith(EBS_PREFIX):
            return {}, {}, {}
        return {}, {}, {EBS_LINK: _unbounded_text(storage)}
    if not storage.startswith(EBS_PREFIX):
        if ebs_gbps is not None:
            names = load_coldstart_facts().names("storage")
            volumes = [n for n in names if n.startswith(EBS_PREFIX)]
            raise InvalidSpecError(
                "ebs-gbps", f"is the instance's link to an EBS volume; --storage {storage} is "
                "not one", got=ebs_gbps, fix=f"use --storage {' or '.join(volumes)}, or drop "
                "--ebs-gbps",
            )  # fmt: skip
        instance_ebs(str(instance))  # an unknown type fails here too
        return {}, {}, {EBS_LINK: f"not crossed: --storage {storage} is not an EBS volume"}
    if ebs_gbps is not None:
        return {EBS_LINK: ebs_gbps / 8.0}, {EBS_LINK: f"--ebs-gbps {ebs_gbps:g}"}, {}
    ebs = instance_ebs(str(instance))
    gbs = ebs.maximum_mbps / MBPS_PER_GBS
    said = f"{ebs.instance_type}'s dedicated EBS bandwidth, {ebs.maximum_mbps:,.0f} Mbit/s "
    if ebs.bursts:
        base = ebs.baseline_mbps
        text = (
            f"{said}({gbs:.3g} GB/s), its maximum: AWS holds it {EBS_BURST_S // 60} min at least "
            f"once every 24 h, longer than a weight load; once that is spent the baseline "
            f"{base:,.0f} Mbit/s ({base / MBPS_PER_GBS:.3g} GB/s) applies: --ebs-gbps "
            f"{base / 1000:g} prices it"
        )
    else:
        text = f"{said}({gbs:.3g} GB/s), sustained (AWS gives this size one figure, no burst)"
    return {EBS_LINK: gbs}, {EBS_LINK: ebs.source}, {EBS_LINK: text}


def _unbounded_text(storage: str) -> str:
    """The assumption of an EBS load priced without its instance's link (QA 39 S #6: an io2
    volume read at 4.19 GB/s on a T4, faster than any g4dn's EBS link, said nowhere)."""
    from gpucast.catalog.ebs import EBS_PATH, load_ebs_bandwidth

    rows = load_ebs_bandwidth().values()
    low, high = min(r.maximum_mbps for r in rows), max(r.maximum_mbps for r in rows)
    return (
        f"not bounded: the weights read at --storage {storage}'s own rate, as if the "
        f"instance's dedicated EBS link were faster; its maximum is {low:,.0f}-{high:,.0f} "
        f"Mbit/s over the {len(rows)} types of catalog/data/{EBS_PATH}; --instance TYPE or "
        "--ebs-gbps N prices it"
    )


#: storage classes read on the host itself: their weights cross no network
HOST_STORAGE = ("local", "local-nvme")


def network_link(storage: str, network_gbps: float | None) -> dict[str, float]:
    """The network among a weight load's links (GB/s; ``network_gbps`` in Gbit/s): none
    without it; an error for storage on the host (``--network-gbps 1 --storage local-nvme``
    bounded the load by a network it does not cross)."""
    if network_gbps is None:
        return {}
    if storage in HOST_STORAGE:
        raise InvalidSpecError(
            "network-gbps", f"is the network to remote storage; --storage {storage} is read "
            "on the host, not over it", got=network_gbps,
            fix="use --storage s3 or an ebs-* volume, or drop --network-gbps",
        )  # fmt: skip
    return {"network": network_gbps / 8.0}


def check_instance_gpu(instance: str, gpu: GpuSpec | None, catalog: Catalog) -> None:
    """One clear error where ``instance`` (an instance type of ``offers.csv``) carries another
    GPU than ``gpu`` (None: this machine's CPU, so an instance with no GPU). An instance type
    the offers do not list is not checked."""
    carried = {o.gpu for o in catalog.offers if o.instance_type.lower() == instance.lower()}
    if not carried:
        return
    have = gpu.name if gpu is not None else None
    if have in carried:
        return
    its = sorted(g for g in carried if g is not None)
    if not its:
        raise InvalidSpecError(
            "instance", f"{instance} has no GPU (offers.csv), but --gpu {have} was given",
            fix="drop --gpu, or use an --instance that carries it",
        )  # fmt: skip
    want = have if have is not None else "this machine's CPU (no --gpu)"
    raise InvalidSpecError(
        "instance", f"{instance} carries {', '.join(its)} (offers.csv), not {want}",
        fix=f"use --gpu {its[0]}, or another --instance",
    )  # fmt: skip
