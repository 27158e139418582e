"""Effective all-reduce bandwidth of a set of GPUs on one server, from its links.

NCCL runs an all-reduce as rings: each ring visits every GPU of the job once, and each GPU
sends to the next over the route between them. Several rings run at once, splitting the
data, and each direction of a link carries the rings that cross it. The bus bandwidth of the
set (``2 (n-1)/n`` x bytes / time, what ``nccl-tests`` reports as *busbw*) is the most ring
bandwidth the links carry: a linear programme over every directed Hamiltonian ring of the set
(``(n-1)!``: 5,040 for 8 GPUs), each hop on its widest route (the highest bottleneck, then the
fewest hops; never through another GPU), every directed link at most its bandwidth.

NCCL builds its rings on NVLink when the set's NVLink links alone can carry a ring, else on
PCIe and CPU links; the two kinds are not added (:func:`allreduce_bandwidth_gb_per_s`).

* A DGX-1 V100 (hybrid cube mesh): 8 GPUs give 150 GB/s (three edge-disjoint Hamiltonian
  rings, both ways, on 6 NVLinks per GPU), a fully connected quad 100 GB/s, an NV2 pair 50
  GB/s; GPUs with no NVLink between them fall back to PCIe and QPI (16 GB/s).
* On an NVSwitch board every set gets the per-GPU NVLink bandwidth.
* :func:`link_sum_gb_per_s` is the published-style bound: the least, over the set's GPUs, of
  the bandwidth of its direct links to the others (NVIDIA quotes links x 25 GB/s).

Pure: numbers and :class:`~gpucast.domain.topology.ServerTopology` in, numbers out.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Iterable

import numpy as np
from scipy.optimize import linprog

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.topology import ServerTopology, is_gpu
from gpucast.predict.comm import hierarchical_collective_s

Route = tuple[tuple[str, str], ...]  # directed links, in order


def widest_route(
    topology: ServerTopology, src: str, dst: str, *, nvlink_only: bool = False
) -> tuple[float, Route] | None:
    """The route ``src`` -> ``dst`` with the highest bottleneck (then fewest hops) that passes
    through switches and CPUs only (``nvlink_only``: over NVLink links only), and its
    bottleneck GB/s; None when there is none."""
    best: dict[str, tuple[float, int]] = {src: (float("inf"), 0)}
    prev: dict[str, str] = {}
    heap: list[tuple[float, int, str]] = [(-float("inf"), 0, src)]
    while heap:
        neg_bw, hops, node = heapq.heappop(heap)
        if node == dst:
            break
        if (-neg_bw, -hops) < (best[node][0], -best[node][1]):
            continue
        if node != src and is_gpu(node):
            continue  # GPUs do not forward
        for nxt, gbps in topology.neighbours(node, nvlink_only=nvlink_only):
            cand = (min(-neg_bw, gbps), hops + 1)
            old = best.get(nxt)
            if old is None or (cand[0], -cand[1]) > (old[0], -old[1]):
                best[nxt] = cand
                prev[nxt] = node
                heapq.heappush(heap, (-cand[0], cand[1], nxt))
    if dst not in prev:
        return None
    path = [dst]
    while path[-1] != src:
        path.append(prev[path[-1]])
    path.reverse()
    return best[dst][0], tuple(itertools.pairwise(path))


def _check_gpus(topology: ServerTopology, gpus: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(gpus))
    unknown = [g for g in chosen if g not in topology.gpus]
    if unknown:
        raise InvalidSpecError(
            "gpus",
            f"{unknown[0]} is not a GPU of {topology.name} ({', '.join(topology.gpus)})",
        )
    return chosen


def allreduce_bandwidth_gb_per_s(topology: ServerTopology, gpus: Iterable[str]) -> float:
    """Bus bandwidth (GB/s) of a ring all-reduce over ``gpus``: the most ring bandwidth the
    links carry (see the module docstring); ``inf`` for one GPU (nothing to send)."""
    chosen = tuple(sorted(_check_gpus(topology, gpus), key=topology.gpus.index))
    return _ring_bandwidth(topology, chosen)


@functools.lru_cache(maxsize=4096)
def _ring_bandwidth(topology: ServerTopology, gpus: tuple[str, ...]) -> float:
    if len(gpus) < 2:
        return float("inf")
    # NCCL builds its rings on NVLink when the NVLink links alone connect them, else on
    # PCIe/CPU links: rings of both kinds do not add up
    fast = _ring_lp(topology, gpus, nvlink_only=True)
    return fast if fast > 0 else _ring_lp(topology, gpus, nvlink_only=False)


def _ring_lp(topology: ServerTopology, gpus: tuple[str, ...], *, nvlink_only: bool) -> float:
    n = len(gpus)
    routes: dict[tuple[str, str], Route] = {}
    for u in gpus:
        for v in gpus:
            if u != v:
                found = widest_route(topology, u, v, nvlink_only=nvlink_only)
                if found is not None:
                    routes[(u, v)] = found[1]
    edges: dict[tuple[str, str], int] = {}
    capacity: list[float] = []
    for link in topology.links:
        for d in ((link.a, link.b), (link.b, link.a)):
            edges[d] = len(capacity)
            capacity.append(link.gb_per_s)
    first, rest = gpus[0], gpus[1:]
    rings = [
        ring
        for ring in ((first, *perm) for perm in itertools.permutations(rest))
        if all((u, v) in routes for u, v in zip(ring, ring[1:] + ring[:1], strict=True))
    ]
    if n == 2:
        rings = rings[:1]
    if not rings:
        return 0.0
    use = np.zeros((len(capacity), len(rings)))
    for j, ring in enumerate(rings):
        for u, v in zip(ring, ring[1:] + ring[:1], strict=True):
            for d in routes[(u, v)]:
                use[edges[d], j] += 1.0
    result = linprog(
        -np.ones(len(rings)),
        A_ub=use,
        b_ub=np.asarray(capacity),
        bounds=(0, None),
        method="highs",
    )
    if not result.success:  # pragma: no cover - a feasible bounded LP (x = 0 is feasible)
        raise InvalidSpecError(f"topology {topology.name}", "ring bandwidth LP failed")
    return float(-result.fun)


def link_sum_gb_per_s(topology: ServerTopology, gpus: Iterable[str]) -> float:
    """The least, over the GPUs of the set, of the bandwidth of their direct links to each
    other (links x GB/s per link, one direction): the figure NVIDIA's link counts give.
    A GPU whose only link is to a switch counts that link (NVSwitch boards)."""
    chosen = set(_check_gpus(topology, gpus))
    if len(chosen) < 2:
        return float("inf")
    totals = []
    for g in chosen:
        direct = [bw for nxt, bw in topology.neighbours(g) if nxt in chosen]
        switched = [bw for nxt, bw in topology.neighbours(g) if nxt == "nvswitch"]
        totals.append(sum(direct) + sum(switched))
    return min(totals)


def allreduce_time_s(
    topology: ServerTopology,
    gpus: Iterable[str],
    data_bytes: float,
    *,
    hop_latency_s: float = 5e-6,
) -> float:
    """Seconds for a ring all-reduce of ``data_bytes`` over ``gpus``
    (:func:`gpucast.predict.comm.hierarchical_collective_s` at the set's bus bandwidth)."""
    chosen = _check_gpus(topology, gpus)
    if len(chosen) < 2:
        return 0.0
    bw = allreduce_bandwidth_gb_per_s(topology, chosen)
    gbit = bw * 8.0
    return float(
        hierarchical_collective_s(data_bytes, len(chosen), len(chosen), gbit, gbit, hop_latency_s)
    )
