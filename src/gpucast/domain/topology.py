"""A multi-GPU server's links as a graph: GPUs, switches and CPUs joined by links.

Nodes named ``gpu<N>`` are GPUs; every other node (``nvswitch``, ``pcie0``, ``cpu1``) is a
switch or a CPU that forwards traffic. A link is full duplex: ``gb_per_s`` is its bandwidth
in each direction (links x GB/s per link). Traffic between two GPUs may cross switches and
CPUs but never another GPU (NCCL does not forward through a GPU outside the job), so every
pair of GPUs needs such a route; a topology where one has none is rejected with the GPU it
cannot reach. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError

_GPU = re.compile(r"^gpu(\d+)$")

#: The kinds of link a topology may hold: NVLink 2/3/4 (GPU to GPU or NVSwitch), PCIe 3/4
#: (GPU to switch or CPU) and the socket-to-socket QPI/UPI.
LINK_KINDS: tuple[str, ...] = ("nvlink2", "nvlink3", "nvlink4", "pcie3", "pcie4", "qpi", "upi")


def is_gpu(node: str) -> bool:
    return _GPU.match(node) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A full-duplex link between two nodes: ``links`` lanes of ``gb_per_s_per_link`` GB/s each
    way (``kind``: one of :data:`LINK_KINDS`)."""

    a: str
    b: str
    kind: str
    links: int
    gb_per_s_per_link: float

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise InvalidSpecError("topology link", f"joins {self.a} to itself")
        if self.kind not in LINK_KINDS:
            raise InvalidSpecError(
                f"link {self.a}-{self.b} kind",
                f"must be one of {', '.join(LINK_KINDS)}",
                got=self.kind,
                fix="e.g. nvlink3 for an A100's NVLink, pcie4 for a GPU on a PCIe 4 switch",
            )
        if self.links < 1:
            raise InvalidSpecError(f"link {self.a}-{self.b}", "links must be >= 1", got=self.links)
        bw = self.gb_per_s_per_link
        if not (math.isfinite(bw) and 0 < bw < 1e5):
            raise InvalidSpecError(
                f"link {self.a}-{self.b}", "gb_per_s_per_link must be in (0, 1e5) GB/s", got=bw
            )

    @property
    def gb_per_s(self) -> float:
        return self.links * self.gb_per_s_per_link


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerTopology:
    """One server: its GPUs (``gpu0``..), switches and CPUs, and the links between them."""

    name: str
    links: tuple[Link, ...]
    source: str = ""
    #: The catalog GPUs the server is built for (a DGX-1's NVLink 2 is a V100's); empty: any GPU.
    gpu_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.gpus:
            raise InvalidSpecError(f"topology {self.name}", "has no GPU nodes (gpu0, gpu1, ...)")
        seen: set[frozenset[str]] = set()
        for link in self.links:
            pair = frozenset((link.a, link.b))
            if pair in seen:
                raise InvalidSpecError(
                    f"topology {self.name}",
                    f"link {link.a}-{link.b} is listed twice",
                    fix="give one row per pair with its number of links",
                )
            seen.add(pair)
        gpus = self.gpus
        for g in gpus:
            reach = self._reachable_without_gpus(g)
            missing = [h for h in gpus if h not in reach]
            if missing:
                # name the GPU with the fewest routes: the one that is cut off
                worst = min(
                    gpus, key=lambda x: (len(self._reachable_without_gpus(x) & set(gpus)), x)
                )
                # a GPU it cannot reach (not one it reaches: a ring's gpu3 is gpu0's neighbour)
                cut_off = self._reachable_without_gpus(worst)
                other = next(h for h in gpus if h not in cut_off)
                raise InvalidSpecError(
                    f"topology {self.name}",
                    f"{worst} is disconnected: no route to {other} that does not pass "
                    "through another GPU",
                    fix=f"add {worst}'s PCIe/switch links",
                )

    @property
    def nodes(self) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for link in self.links:
            out[link.a] = None
            out[link.b] = None
        return tuple(out)

    @property
    def gpus(self) -> tuple[str, ...]:
        """GPU nodes in index order."""
        found = {n for n in self.nodes if is_gpu(n)}
        return tuple(sorted(found, key=lambda n: int(n[3:])))

    def neighbours(self, node: str, *, nvlink_only: bool = False) -> tuple[tuple[str, float], ...]:
        """(neighbour, GB/s each way) of ``node`` (``nvlink_only``: over NVLink links only)."""
        out = []
        for link in self.links:
            if nvlink_only and not link.kind.startswith("nvlink"):
                continue
            if link.a == node:
                out.append((link.b, link.gb_per_s))
            elif link.b == node:
                out.append((link.a, link.gb_per_s))
        return tuple(out)

    def _reachable_without_gpus(self, start: str) -> set[str]:
        seen = {start}
        frontier = [start]
        while frontier:
            node = frontier.pop()
            for nxt, _ in self.neighbours(node):
                if nxt in seen:
                    continue
                seen.add(nxt)
                if not is_gpu(nxt):
                    frontier.append(nxt)
        return seen
