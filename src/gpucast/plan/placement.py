"""Which GPUs of a shared server a job gets: topology-aware (MAPA-like) or first-fit.

A job asks for ``k`` GPUs of the ones free. MAPA (Ranganath et al., SC'21) scores every
candidate set by the all-reduce bandwidth it would get and by how much it fragments what is
left; gpucast does the same with its own two numbers:

* **bandwidth**: the set's ring all-reduce bus bandwidth
  (:func:`gpucast.predict.topology.allreduce_bandwidth_gb_per_s`) over the best of the
  candidates (1.0 for the best set, 1.0 for every set of one GPU);
* **fragmentation**: the share of the free GPUs' direct-link bandwidth the choice cuts --
  links between the chosen GPUs and the ones left free, which neither side can use any more.

``score = bandwidth - fragmentation_weight x fragmentation``; the highest wins, ties go to
the lowest GPU numbers. ``first-fit`` takes the ``k`` lowest-numbered free GPUs. Pure.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.topology import ServerTopology
from gpucast.predict.topology import allreduce_bandwidth_gb_per_s

POLICIES: tuple[str, ...] = ("mapa", "first-fit")
DEFAULT_FRAGMENTATION_WEIGHT = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """One candidate set of GPUs with its bandwidth, fragmentation and score."""

    gpus: tuple[str, ...]
    bandwidth_gb_per_s: float  # inf for one GPU
    fragmentation: float
    score: float


def _direct_gb_per_s(topology: ServerTopology, inside: set[str], outside: set[str]) -> float:
    total = 0.0
    for link in topology.links:
        if (link.a in inside and link.b in outside) or (link.b in inside and link.a in outside):
            total += link.gb_per_s
    return total


def fragmentation(topology: ServerTopology, free: Sequence[str], chosen: Sequence[str]) -> float:
    """The share of the free GPUs' GPU-to-GPU link bandwidth that choosing ``chosen`` cuts."""
    free_set = set(free)
    chosen_set = set(chosen)
    internal = _direct_gb_per_s(topology, free_set, free_set)
    if internal <= 0:
        return 0.0
    return _direct_gb_per_s(topology, chosen_set, free_set - chosen_set) / internal


def _check(topology: ServerTopology, free: Sequence[str], k: int) -> tuple[str, ...]:
    unknown = [g for g in free if g not in topology.gpus]
    if unknown:
        raise InvalidSpecError(
            "free", f"{unknown[0]} is not a GPU of {topology.name} ({', '.join(topology.gpus)})"
        )
    ordered = tuple(sorted(set(free), key=topology.gpus.index))
    if not 1 <= k <= len(ordered):
        raise InvalidSpecError(
            "gpus",
            f"a job needs 1..{len(ordered)} of the {len(ordered)} free GPUs of {topology.name}",
            got=k,
            fix="ask for fewer GPUs or free more (--free)",
        )
    return ordered


def rank_placements(
    topology: ServerTopology,
    free: Sequence[str],
    k: int,
    *,
    fragmentation_weight: float = DEFAULT_FRAGMENTATION_WEIGHT,
) -> tuple[Placement, ...]:
    """Every ``k``-GPU set of ``free``, best MAPA score first."""
    ordered = _check(topology, free, k)
    sets = list(itertools.combinations(ordered, k))
    bws = [allreduce_bandwidth_gb_per_s(topology, s) for s in sets]
    best = max(bws)
    out = []
    for s, bw in zip(sets, bws, strict=True):
        norm = 1.0 if best == float("inf") else bw / best
        frag = fragmentation(topology, ordered, s)
        out.append(
            Placement(
                gpus=s,
                bandwidth_gb_per_s=bw,
                fragmentation=frag,
                score=norm - fragmentation_weight * frag,
            )
        )
    rank = {s: i for i, s in enumerate(sets)}
    return tuple(sorted(out, key=lambda p: (-p.score, rank[p.gpus])))


def choose_gpus(
    topology: ServerTopology,
    free: Sequence[str],
    k: int,
    *,
    policy: str = "mapa",
    fragmentation_weight: float = DEFAULT_FRAGMENTATION_WEIGHT,
) -> Placement:
    """The set ``policy`` (``mapa`` or ``first-fit``) gives a ``k``-GPU job."""
    if policy == "first-fit":
        ordered = _check(topology, free, k)
        chosen = ordered[:k]
        return Placement(
            gpus=chosen,
            bandwidth_gb_per_s=allreduce_bandwidth_gb_per_s(topology, chosen),
            fragmentation=fragmentation(topology, ordered, chosen),
            score=0.0,
        )
    if policy != "mapa":
        raise InvalidSpecError("policy", f"must be one of {', '.join(POLICIES)}", got=policy)
    return rank_placements(topology, free, k, fragmentation_weight=fragmentation_weight)[0]
