"""``gpucast.plan_placement``: which GPUs of a shared server a job should get.

The server's links come from a built-in topology (``dgx1-v100``, ``hgx-a100``, ``hgx-h100``,
``pcie-8gpu-2socket``, ``pcie-4gpu-2socket``) or a topology CSV. Every ``gpus``-sized set of
the free GPUs is scored by its all-reduce bandwidth and the fragmentation it leaves
(:mod:`gpucast.plan.placement`); ``jobs=N`` also runs a synthetic queue of N data-parallel
jobs through the server with the topology-aware allocator and with first-fit
(:mod:`gpucast.simulate.gpu_queue`) and reports the throughput ratio.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_seed
from gpucast.domain.options import documented, option

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.plan.placement import Placement
    from gpucast.simulate.gpu_queue import QueueResult

MAX_JOBS = 5000


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanPlacementRequest:
    """A job's GPU count on a shared server (``gpucast plan placement``)."""

    VERB: ClassVar[str] = "plan placement"

    topology: str = option(
        help="A built-in server topology (dgx1-v100, hgx-a100, hgx-h100, pcie-8gpu-2socket, "
        "pcie-4gpu-2socket) or a topology CSV file.",
        example="dgx1-v100",
    )
    gpus: int = option(2, help="GPUs the job needs.", example="4")
    free: tuple[str, ...] = option(
        (), help="The free GPUs (default: all), e.g. gpu0,gpu3,gpu4.", example="gpu0,gpu3,gpu4"
    )
    fragmentation_weight: float = option(
        0.5, help="Weight of fragmentation against bandwidth in the score.", example="0.5"
    )
    jobs: int = option(
        0, help="Also simulate a synthetic queue of this many jobs (0: no simulation).",
        example="200",
    )  # fmt: skip
    seed: int = option(0, help="Seed of the simulated queue.", example="1")
    top: int = option(10, help="Candidate sets to list.", example="5")

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= 64:
            raise InvalidSpecError("gpus", "must be 1..64", got=self.gpus, fix="e.g. --gpus 2")
        w = self.fragmentation_weight
        if not (w == w and 0.0 <= w <= 10.0):
            raise InvalidSpecError(
                "fragmentation-weight", "must be in [0, 10]", got=w,
                fix="e.g. --fragmentation-weight 1",
            )  # fmt: skip
        if not 0 <= self.jobs <= MAX_JOBS:
            raise InvalidSpecError(
                "jobs", f"must be 0..{MAX_JOBS}", got=self.jobs,
                fix="e.g. --jobs 200, or 0 for no simulated queue",
            )  # fmt: skip
        check_seed(self.seed)
        twice = sorted({g for g in self.free if self.free.count(g) > 1})
        if twice:
            raise InvalidSpecError(
                "free", f"lists {', '.join(twice)} twice", got=",".join(self.free),
                fix="name each free GPU once, e.g. --free gpu0,gpu3,gpu4",
            )  # fmt: skip
        if not 1 <= self.top <= 1000:
            raise InvalidSpecError("top", "must be 1..1000", got=self.top, fix="e.g. --top 5")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementResult:
    topology: str
    source: str
    gpus: int
    free: tuple[str, ...]
    candidates: tuple[Placement, ...]  # best first
    mapa: Placement
    first_fit: Placement
    queue: tuple[QueueResult, ...]  # (mapa, first-fit) when jobs > 0
    assumptions: dict[str, str]

    @property
    def throughput_ratio(self) -> float | None:
        if not self.queue:
            return None
        return self.queue[0].jobs_per_hour / self.queue[1].jobs_per_hour

    def to_dict(self) -> dict[str, Any]:
        def row(p: Placement) -> dict[str, Any]:
            out = asdict(p)
            out["gpus"] = list(p.gpus)
            bw = p.bandwidth_gb_per_s
            out["bandwidth_gb_per_s"] = None if bw == float("inf") else bw
            return out

        return {
            "topology": self.topology,
            "source": self.source,
            "gpus": self.gpus,
            "free": list(self.free),
            "mapa": row(self.mapa),
            "first_fit": row(self.first_fit),
            "candidates": [row(c) for c in self.candidates],
            "queue": [asdict(q) for q in self.queue],
            "throughput_ratio": self.throughput_ratio,
            "assumptions": dict(self.assumptions),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate set."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["candidates"])


def plan_placement(
    request: PlanPlacementRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlacementResult:
    """The GPUs a job should get on a shared server (topology-aware vs first-fit), and with
    ``jobs=N`` the throughput of a simulated queue under both."""
    import numpy as np

    from gpucast.inputs.topology import resolve_topology
    from gpucast.plan.placement import choose_gpus, rank_placements
    from gpucast.simulate.gpu_queue import simulate_queue, synthetic_jobs

    request = resolve(PlanPlacementRequest, request, options, config)
    topology = resolve_topology(request.topology)
    free = request.free or topology.gpus
    w = request.fragmentation_weight
    ranked = rank_placements(topology, free, request.gpus, fragmentation_weight=w)
    first_gpus = choose_gpus(topology, free, request.gpus, policy="first-fit").gpus
    # its MAPA score among the ranked sets (choose_gpus leaves first-fit's at 0.0: QA 40 M #5)
    first = next(p for p in ranked if p.gpus == first_gpus)
    queue: tuple[QueueResult, ...] = ()
    if request.jobs:
        jobs = synthetic_jobs(
            np.random.default_rng(request.seed), request.jobs, max_gpus=len(topology.gpus)
        )

        def placer(policy: str) -> Callable[[tuple[str, ...], int], tuple[str, ...]]:
            def place(free: tuple[str, ...], k: int) -> tuple[str, ...]:
                return choose_gpus(topology, free, k, policy=policy, fragmentation_weight=w).gpus

            return place

        queue = tuple(
            simulate_queue(topology, jobs, placer(policy), policy=policy)
            for policy in ("mapa", "first-fit")
        )
    assumptions = {
        "bandwidth": "ring all-reduce bus bandwidth from the links (NVLink rings when NVLink "
        "alone connects the set, else PCIe/CPU links); not measured on this server",
    }
    if request.jobs:
        assumptions["queue"] = (
            "synthetic Poisson queue at 90% offered load: ResNet-50 / VGG-16 / BERT-large "
            "data-parallel jobs on 1/2/4/8 GPUs, fp32 gradients, assumed V100-class step "
            "times, all-reduce not overlapped with compute, FIFO without backfilling"
        )
    return PlacementResult(
        topology=topology.name,
        source=topology.source,
        gpus=request.gpus,
        free=tuple(g for g in topology.gpus if g in set(free)),
        candidates=ranked[: request.top],
        mapa=ranked[0],
        first_fit=first,
        queue=queue,
        assumptions=assumptions,
    )
