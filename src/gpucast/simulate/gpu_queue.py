"""A job queue on one shared multi-GPU server: how placement changes its throughput.

Data-parallel training jobs arrive (Poisson) asking for 1, 2, 4 or 8 GPUs and wait in one
FIFO queue; whenever GPUs free up the head job starts on the set a placement policy picks
(``place(free, k)``, injected: :func:`gpucast.plan.placement.choose_gpus` in the app) and
runs ``steps`` steps of ``compute_s`` plus a ring all-reduce of its gradients on that set
(:func:`gpucast.predict.topology.allreduce_time_s`; not overlapped with compute, so the links
show fully). Its GPUs stay with it until it ends. The result is the makespan, jobs per hour
and the mean job completion time.

:data:`SYNTHETIC_MIX` is the job mix the benchmark and ``plan placement --jobs`` use: three
data-parallel models with their fp32 gradient sizes (ResNet-50 25.6 M, VGG-16 138 M,
BERT-large 340 M parameters) and an assumed per-GPU step time of a V100-class GPU. It is a
synthetic queue, not a trace. Pure: the randomness is a numpy Generator.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.topology import ServerTopology
from gpucast.predict.topology import allreduce_bandwidth_gb_per_s, allreduce_time_s

#: (name, gradient bytes, compute seconds per step) of the synthetic mix
SYNTHETIC_MIX: tuple[tuple[str, float, float], ...] = (
    ("resnet50", 25.6e6 * 4, 0.12),
    ("vgg16", 138e6 * 4, 0.15),
    ("bert-large", 340e6 * 4, 0.35),
)
#: how many GPUs a job asks for, and how often
SIZES: tuple[int, ...] = (1, 2, 4, 8)
SIZE_WEIGHTS: tuple[float, ...] = (0.25, 0.35, 0.3, 0.1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    job_id: int
    model: str
    gpus: int
    steps: int
    compute_s: float
    gradient_bytes: float
    arrival_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueResult:
    policy: str
    jobs: int
    makespan_s: float
    jobs_per_hour: float
    mean_completion_s: float  # arrival to end
    mean_allreduce_gb_per_s: float | None  # over multi-GPU jobs (None: there were none)


def synthetic_jobs(
    rng: np.random.Generator,
    n: int,
    *,
    max_gpus: int = 8,
    load: float = 0.9,
    steps: tuple[int, int] = (500, 3000),
) -> tuple[Job, ...]:
    """``n`` jobs from :data:`SYNTHETIC_MIX` arriving as a Poisson process whose offered load
    (GPU-seconds of compute per second over ``max_gpus``) is ``load``."""
    if n < 1:
        raise InvalidSpecError("jobs", "must be >= 1", got=n)
    sizes = np.array([s for s in SIZES if s <= max_gpus])
    weights = np.array([w for s, w in zip(SIZES, SIZE_WEIGHTS, strict=True) if s <= max_gpus])
    k = rng.choice(sizes, size=n, p=weights / weights.sum())
    which = rng.integers(0, len(SYNTHETIC_MIX), size=n)
    step_counts = rng.integers(steps[0], steps[1] + 1, size=n)
    compute = np.array([SYNTHETIC_MIX[i][2] for i in which])
    mean_gpu_s = float(np.mean(k * step_counts * compute))
    gaps = rng.exponential(mean_gpu_s / (load * max_gpus), size=n)
    arrivals = np.cumsum(gaps) - gaps[0]
    return tuple(
        Job(
            job_id=i,
            model=SYNTHETIC_MIX[int(which[i])][0],
            gpus=int(k[i]),
            steps=int(step_counts[i]),
            compute_s=float(compute[i]),
            gradient_bytes=SYNTHETIC_MIX[int(which[i])][1],
            arrival_s=float(arrivals[i]),
        )
        for i in range(n)
    )


def simulate_queue(
    topology: ServerTopology,
    jobs: Sequence[Job],
    place: Callable[[tuple[str, ...], int], tuple[str, ...]],
    *,
    policy: str,
) -> QueueResult:
    """Run ``jobs`` through one FIFO queue on ``topology`` with ``place`` choosing the GPUs."""
    if not jobs:
        raise InvalidSpecError("jobs", "must not be empty")
    too_big = [j for j in jobs if j.gpus > len(topology.gpus)]
    if too_big:
        raise InvalidSpecError(
            "jobs", f"job {too_big[0].job_id} asks for {too_big[0].gpus} GPUs", fix="fewer GPUs"
        )
    order = sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
    free = set(topology.gpus)
    running: list[tuple[float, int, tuple[str, ...]]] = []
    queue: list[Job] = []
    t = 0.0
    nxt = 0
    done: list[float] = []
    bandwidths: list[float] = []
    arrival_of = {j.job_id: j.arrival_s for j in order}
    while nxt < len(order) or queue or running:
        arrival = order[nxt].arrival_s if nxt < len(order) else float("inf")
        finish = running[0][0] if running else float("inf")
        if arrival <= finish:
            t = arrival
            queue.append(order[nxt])
            nxt += 1
        else:
            t, job_id, gpus = heapq.heappop(running)
            free.update(gpus)
            done.append(t - arrival_of[job_id])
        while queue and queue[0].gpus <= len(free):
            job = queue.pop(0)
            ordered = tuple(g for g in topology.gpus if g in free)
            gpus = place(ordered, job.gpus)
            free.difference_update(gpus)
            comm = allreduce_time_s(topology, gpus, job.gradient_bytes)
            if job.gpus > 1:
                bandwidths.append(allreduce_bandwidth_gb_per_s(topology, gpus))
            heapq.heappush(running, (t + job.steps * (job.compute_s + comm), job.job_id, gpus))
    makespan = t - order[0].arrival_s
    return QueueResult(
        policy=policy,
        jobs=len(order),
        makespan_s=makespan,
        jobs_per_hour=len(order) / makespan * 3600.0,
        mean_completion_s=float(np.mean(done)),
        mean_allreduce_gb_per_s=float(np.mean(bandwidths)) if bandwidths else None,
    )
