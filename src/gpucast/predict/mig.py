"""MIG as rules: NVIDIA's placements, every valid mixed layout, a slice's speed and price.

A MIG-capable GPU has 8 memory slices and 7 compute slices (A100, H100, H200; an A30 has 4
and 4: :attr:`~gpucast.domain.catalog.GpuSpec.mig_slices`). A GPU instance of a profile
occupies ``memory_slices`` consecutive memory slices and ``compute_slices`` consecutive
compute slices from one of the start offsets NVIDIA publishes for the profile
(``nvidia-smi mig -lgipp``; ``catalog/data/mig_profiles.csv`` column ``placements``). Two
instances may not share a memory or a compute slice, and a GPU holds at most
``max_instances`` instances of a profile. Those are the rules this module checks:

* :func:`enumerate_layouts` -- every valid layout of a GPU (``maximal=True``: the ones no
  further instance fits into, which is how NVIDIA's user guide draws its combinations; A100
  with its five original profiles has 19 of them);
* :func:`check_layout` -- a layout a user wrote (``3g.20gb,2g.10gb,1g.5gb`` or with pinned
  starts ``3g.20gb@4``): the placed layout, or one :class:`InvalidSpecError` naming the rule
  that fails (unknown profile, max instances, compute slices, memory slices, placement);
* :func:`mig_share` -- a slice's share of the GPU's SMs and of its memory bandwidth (its SM
  count over the GPU's when published, else compute slices / 7; memory slices / 8 (A30: / 4), the
  fraction of the memory controllers and L2 it owns), and :func:`slice_throughput_ratio`,
  the throughput of a workload on the slice relative to the whole GPU from the share of its
  time that is compute;
* :func:`layout_prices_usd_per_hour` -- a slice's price: the GPU's price split over the
  instances of the layout it sits in by their share ``max(compute / 7, memory / 8)``. Clouds
  rent whole GPUs, so a layout costs the whole GPU whatever it leaves unused; for a layout
  of one profile this is the GPU's price over ``max_instances``
  (:func:`gpucast.inputs.serving.mig_price_usd_per_hour` calls it).

Pure: no files, no clock.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpucast.domain.catalog import GpuSpec, MigProfile
from gpucast.domain.errors import InvalidSpecError

MEMORY_SLICES = 8
COMPUTE_SLICES = 7
_PINNED = re.compile(r"^\s*([^@\s]+)\s*(?:@\s*(\d+))?\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class MigInstance:
    """One GPU instance of a profile at a start offset (in memory slices)."""

    profile: MigProfile
    start: int

    @property
    def memory_mask(self) -> int:
        return ((1 << _memory_width(self.profile)) - 1) << self.start

    @property
    def compute_mask(self) -> int:
        return ((1 << self.profile.compute_slices) - 1) << self.start

    @property
    def label(self) -> str:
        return f"{self.profile.name}@{self.start}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigLayout:
    """A valid set of GPU instances on one GPU, ordered by start offset."""

    gpu: str
    instances: tuple[MigInstance, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(i.profile.name for i in self.instances)

    @property
    def compute_slices(self) -> int:
        return sum(i.profile.compute_slices for i in self.instances)

    @property
    def memory_slices(self) -> int:
        return sum(_memory_width(i.profile) for i in self.instances)

    @property
    def label(self) -> str:
        return " + ".join(i.label for i in self.instances)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "layout": self.label,
            "instances": [{"profile": i.profile.name, "start": i.start} for i in self.instances],
            "compute_slices": self.compute_slices,
            "memory_slices": self.memory_slices,
        }


def _memory_width(profile: MigProfile) -> int:
    return profile.memory_slices or 1


def placeable_profiles(
    gpu: GpuSpec,
    mig_gpus: Sequence[str] = (),
    *,
    field: str = "mig layout",
    example: str | None = None,
) -> tuple[MigProfile, ...]:
    """The profiles of ``gpu`` with published placements; one clear error when there are none,
    whose fix names ``mig_gpus`` (the catalog's GPUs with placements) when given, and whose
    ``field`` is the flag that named the GPU (``gpu``), when one did; ``example`` is the value
    its "e.g." shows (default: the first of ``mig_gpus``)."""
    flag = "" if field == "mig layout" else f"--{field} "
    pick = (
        f"pick one of {', '.join(mig_gpus)}, e.g. {flag}{example or mig_gpus[0]}"
        if mig_gpus
        else "pick a GPU with MIG placements (`gpucast catalog gpus`, column MIG)"
    )
    if not gpu.mig_profiles:
        raise InvalidSpecError(field, f"{gpu.name} does not support MIG", fix=pick)
    usable = gpu.placeable_mig_profiles
    if not usable:
        raise InvalidSpecError(
            field,
            f"the catalog has no published MIG placements for {gpu.name}",
            fix=f"{pick}, or add the start offsets (nvidia-smi mig -lgipp) to "
            "catalog/data/mig_profiles.csv",
        )
    return usable


def _profile(
    gpu: GpuSpec, profiles: Sequence[MigProfile], name: str, *, field: str = "mig layout"
) -> MigProfile:
    """``name`` among ``profiles``; else one error on ``field`` (a layout: its rule)."""
    for p in profiles:
        if p.name == name:
            return p
    have = ", ".join(p.name for p in profiles)
    rule = "rule profile: " if field == "mig layout" else ""
    raise InvalidSpecError(
        field,
        f"{rule}{name!r} is not a MIG profile of {gpu.name} (it has {have})",
        fix="use the profile names `gpucast catalog mig --gpu GPU` lists",
    )


def enumerate_layouts(
    gpu: GpuSpec, *, profiles: Iterable[str] | None = None, maximal: bool = True
) -> tuple[MigLayout, ...]:
    """Every valid layout of ``gpu`` (from the profiles named in ``profiles``, default all).

    ``maximal``: only layouts that no further instance of those profiles fits into (NVIDIA's
    documented combinations); otherwise every non-empty valid layout. Two instances never
    share a start offset (they would share its memory slice), so a layout is enumerated once
    as its instances in start order.
    """
    usable = placeable_profiles(gpu)
    if profiles is not None:
        usable = tuple(
            _profile(gpu, usable, name, field="profile") for name in dict.fromkeys(profiles)
        )  # QA 40 M #10: --profile bogus was "mig layout: rule profile: ..."
    candidates = sorted(
        (MigInstance(profile=p, start=s) for p in usable for s in p.placements),
        key=lambda i: (i.start, -_memory_width(i.profile), -i.profile.compute_slices),
    )
    masks = [(c.memory_mask, c.compute_mask, c.profile.name) for c in candidates]
    limit = {p.name: p.max_instances for p in usable}
    out: list[MigLayout] = []

    def fits(k: int, memory: int, compute: int, counts: Counter[str]) -> bool:
        m, c, name = masks[k]
        return not (m & memory or c & compute) and counts[name] < limit[name]

    def walk(
        first: int, memory: int, compute: int, counts: Counter[str], chosen: list[int]
    ) -> None:
        if chosen and (
            not maximal or not any(fits(k, memory, compute, counts) for k in range(len(masks)))
        ):
            out.append(MigLayout(gpu=gpu.name, instances=tuple(candidates[k] for k in chosen)))
        for k in range(first, len(masks)):
            if fits(k, memory, compute, counts):
                m, c, name = masks[k]
                counts[name] += 1
                chosen.append(k)
                walk(k + 1, memory | m, compute | c, counts, chosen)
                chosen.pop()
                counts[name] -= 1

    walk(0, 0, 0, Counter(), [])
    return tuple(out)


def _starts(p: MigProfile) -> str:
    return "{" + ",".join(str(s) for s in p.placements) + "}"


def check_layout(gpu: GpuSpec, layout: Sequence[str] | str) -> MigLayout:
    """The placed layout for the profile names ``layout`` (``"3g.20gb@4"`` pins a start), or
    an :class:`InvalidSpecError` whose one line names the first rule that fails."""
    items = [s for s in layout.split(",")] if isinstance(layout, str) else list(layout)
    items = [s for s in (x.strip() for x in items) if s]
    if not items:
        raise InvalidSpecError(
            "mig layout", "is empty", fix="name profiles, e.g. --layout 3g.20gb,2g.10gb,1g.5gb"
        )
    usable = placeable_profiles(gpu)
    wanted: list[tuple[MigProfile, int | None]] = []
    for item in items:
        match = _PINNED.match(item)
        if match is None:
            raise InvalidSpecError(
                "mig layout",
                f"{item!r} is not PROFILE or PROFILE@START (START a whole number >= 0: the "
                "slice the instance starts at, as nvidia-smi mig -lgipp lists them)",
                fix="e.g. 3g.20gb or 3g.20gb@4",
            )
        profile = _profile(gpu, usable, match.group(1))
        start = None if match.group(2) is None else int(match.group(2))
        if start is not None and start not in profile.placements:
            raise InvalidSpecError(
                "mig layout",
                f"rule placement: {profile.name} starts only at {_starts(profile)} on "
                f"{gpu.name}, not at {start}",
                fix="drop the @START to let gpucast place it",
            )
        wanted.append((profile, start))
    counts = Counter(p.name for p, _ in wanted)
    for p in usable:
        if counts[p.name] > p.max_instances:
            raise InvalidSpecError(
                "mig layout",
                f"rule max instances: {gpu.name} holds at most {p.max_instances} {p.name} "
                f"(the layout has {counts[p.name]})",
                fix="use fewer of it or a smaller profile",
            )
    compute_slices, memory_slices = gpu.mig_slices
    compute = sum(p.compute_slices for p, _ in wanted)
    if compute > compute_slices:
        raise InvalidSpecError(
            "mig layout",
            f"rule compute slices: the layout needs {compute} of {gpu.name}'s "
            f"{compute_slices} compute slices",
            fix="drop an instance or pick smaller profiles",
        )
    memory = sum(_memory_width(p) for p, _ in wanted)
    if memory > memory_slices:
        raise InvalidSpecError(
            "mig layout",
            f"rule memory slices: the layout needs {memory} of {gpu.name}'s "
            f"{memory_slices} memory slices",
            fix="drop an instance or pick profiles with less memory",
        )
    # largest first: the fewest choices fail fastest
    order = sorted(
        range(len(wanted)),
        key=lambda k: (wanted[k][1] is not None, _memory_width(wanted[k][0])),
        reverse=True,
    )
    placed: dict[int, int] = {}

    def place(i: int, mem: int, comp: int) -> bool:
        if i == len(order):
            return True
        k = order[i]
        profile, pinned = wanted[k]
        for start in (pinned,) if pinned is not None else profile.placements:
            inst = MigInstance(profile=profile, start=start)
            if not (inst.memory_mask & mem or inst.compute_mask & comp):
                placed[k] = start
                if place(i + 1, mem | inst.memory_mask, comp | inst.compute_mask):
                    return True
        return False

    if not place(0, 0, 0):
        allowed = ", ".join(
            f"{p.name} at {_starts(p)}" for p in dict.fromkeys(p for p, _ in wanted)
        )
        raise InvalidSpecError(
            "mig layout",
            f"rule placement: {' + '.join(items)} has no non-overlapping start offsets on "
            f"{gpu.name} ({allowed})",
            fix="see the valid layouts with `gpucast catalog mig --gpu " + gpu.name + "`",
        )
    instances = sorted(
        (MigInstance(profile=wanted[k][0], start=s) for k, s in placed.items()),
        key=lambda i: i.start,
    )
    return MigLayout(gpu=gpu.name, instances=tuple(instances))


# -- speed ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class MigShare:
    """A slice's share of its GPU: SMs (compute) and memory bandwidth, with where they come from."""

    profile: str
    compute_share: float
    bandwidth_share: float
    source: str


def mig_share(gpu: GpuSpec, profile: MigProfile) -> MigShare:
    """The fraction of ``gpu``'s SMs and memory bandwidth one ``profile`` instance owns.

    SMs: the instance's SM count over the GPU's (an A100 ``1g.5gb`` has 14 of 108; the 7
    compute slices hold 98 SMs, so even ``7g`` runs 9% below the whole GPU); compute slices
    over the GPU's (7; 4 on an A30) where the catalog has no SM count. Bandwidth: memory
    slices over the GPU's (8, each one eighth of the memory controllers and L2; 4 on an A30);
    memory / GPU memory where the slices are not published.
    """
    compute_slices, memory_slices = gpu.mig_slices
    if profile.sm_count is not None:
        compute = profile.sm_count / gpu.sm_count
        c_src = f"{profile.sm_count} of {gpu.sm_count} SMs"
    else:
        compute = profile.compute_slices / compute_slices
        c_src = f"{profile.compute_slices} of {compute_slices} compute slices (SM count unknown)"
    if profile.memory_slices is not None:
        bandwidth = profile.memory_slices / memory_slices
        b_src = f"{profile.memory_slices} of {memory_slices} memory slices"
    else:
        bandwidth = min(1.0, profile.memory_gib / gpu.memory_gib)
        b_src = f"{profile.memory_gib:g} of {gpu.memory_gib:g} GiB (memory slices unknown)"
    return MigShare(
        profile=profile.name,
        compute_share=compute,
        bandwidth_share=bandwidth,
        source=f"{gpu.name}/{profile.name}: {c_src}, {b_src}",
    )


def slice_throughput_ratio(share: MigShare, compute_fraction: float) -> float:
    """Throughput on the slice over throughput on the whole GPU, for a workload that spends
    ``compute_fraction`` of its full-GPU device time bound by compute and the rest by memory
    bandwidth (each part slows by its own share)."""
    if not 0.0 <= compute_fraction <= 1.0:
        raise InvalidSpecError("compute_fraction", "must be in [0, 1]", got=compute_fraction)
    time = compute_fraction / share.compute_share + (1.0 - compute_fraction) / share.bandwidth_share
    return 1.0 / time


# -- price ------------------------------------------------------------------------------------
def _weight(profile: MigProfile, slices: tuple[int, int]) -> Fraction:
    if profile.memory_slices is None:
        return Fraction(1, profile.max_instances)
    return max(
        Fraction(profile.compute_slices, slices[0]), Fraction(profile.memory_slices, slices[1])
    )


def layout_prices_usd_per_hour(
    gpu_price_usd_per_hour: float,
    profiles: Sequence[MigProfile],
    *,
    slices: tuple[int, int] = (COMPUTE_SLICES, MEMORY_SLICES),
) -> tuple[float, ...]:
    """The price of each instance of a layout: the GPU's price split by ``max(compute /
    compute slices, memory / memory slices)`` (``slices``: the GPU's
    :attr:`~gpucast.domain.catalog.GpuSpec.mig_slices`, 7 and 8 unless given; 1 /
    ``max_instances`` where memory slices are unknown), so the layout's instances together
    cost the whole GPU. One profile repeated ``max_instances`` times gives each the GPU's
    price over ``max_instances``, whatever ``slices``."""
    if not profiles:
        raise InvalidSpecError("mig layout", "is empty")
    weights = [_weight(p, slices) for p in profiles]
    total = sum(weights, Fraction(0))
    return tuple(
        gpu_price_usd_per_hour * (w / total).numerator / (w / total).denominator for w in weights
    )
