"""Distributed training runs as frozen values: what to launch and what every rank measured.

:class:`DistributedConfig` says how to launch (strategy, process counts, rendezvous, PS
shards, per-rank batch sizes and devices, step counts). :class:`RankResult` keeps one rank's
raw per-step samples; :class:`DistributedMeasurement` joins the ranks and derives the
statistics the CLI prints and the cluster-scaling model is fitted on, always from the raw
samples, never passed in. No I/O, no clock.

Definitions (per measured step; "worker" = a rank that trains, "PS" = a parameter-server rank)

* ``step_time_s`` of a worker: wall time of one training step including its communication.
  A synchronous step (DDP, FSDP, synchronous PS) ends when the slowest worker ends, so the
  run's step time per step is the maximum over workers; an asynchronous PS has no common step,
  so its run step time is each worker's own step time (pooled).
* ``compute_s``: the same step without communication (DDP: the step under ``no_sync``; FSDP:
  an unsharded local replica; PS: forward and backward before the push).
* ``communication_s``: the time the communication takes when timed on its own (DDP, FSDP:
  the same collectives run back to back after a barrier; PS: push plus pull).
* ``exposed_communication_s``: ``step - compute`` -- the part of the step the communication
  (and waiting for stragglers) adds; ``overlapped_communication_s`` is what hid under compute.
* ``bytes_per_step``: bytes one worker sends per step (mean over workers); see
  ``bytes_received_per_step`` for the other direction.
* skew: the slowest worker's median compute time over the fastest's, minus 1.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.measurement import EnvironmentFingerprint
from gpucast.domain.workload import WorkloadSpec, options_from_json, options_to_json

Strategy = Literal["ddp", "fsdp", "ps"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
Role = Literal["worker", "ps"]
ROLES: tuple[str, ...] = get_args(Role)
Backend = Literal["auto", "gloo", "nccl"]
BACKENDS: tuple[str, ...] = get_args(Backend)

#: Bump when the dict form of a distributed measurement changes shape.
DISTRIBUTED_SCHEMA_VERSION = 1
#: Worker skew above this is flagged as a straggler warning.
STRAGGLER_SKEW = 0.10


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(name, "must be an integer", got=value)
    if value < low:
        raise InvalidSpecError(name, f"must be >= {low}", got=value)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributedConfig:
    """How to launch one distributed measurement (torchrun semantics).

    ``nproc_per_node`` processes run on each of ``nnodes`` nodes; the world size is their
    product. Under ``ps`` the first ``ps_shards`` ranks are parameter-server shards and the
    rest are workers; under ``ddp``/``fsdp`` every rank is a worker. ``batch_sizes`` and
    ``devices`` hold one entry for all workers or one per worker (heterogeneous runs);
    a device ``auto`` means ``cuda:LOCAL_RANK`` when CUDA is available, else ``cpu``.
    ``sync`` only matters for ``ps``. ``steps`` are measured after ``warmup_steps``.
    """

    strategy: Strategy
    nproc_per_node: int
    batch_sizes: tuple[int, ...]
    devices: tuple[str, ...] = ("auto",)
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None  # None: pick a free port (single node only)
    ps_shards: int = 1
    sync: bool = True
    steps: int = 20
    warmup_steps: int = 5
    backend: Backend = "auto"
    timeout_s: float = 300.0
    bucket_cap_mb: float = 25.0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InvalidSpecError(
                "distributed", f"must be one of {', '.join(STRATEGIES)}", got=self.strategy
            )
        _int_at_least("nproc", self.nproc_per_node, 1)
        _int_at_least("nnodes", self.nnodes, 1)
        _int_at_least("node_rank", self.node_rank, 0)
        if self.node_rank >= self.nnodes:
            raise InvalidSpecError(
                "node_rank", f"must be < --nnodes ({self.nnodes})", got=self.node_rank
            )
        if self.master_port is not None and not 1 <= self.master_port <= 65535:
            raise InvalidSpecError("master_port", "must be in 1..65535", got=self.master_port)
        if self.nnodes > 1 and self.master_port is None:
            raise InvalidSpecError(
                "master_port", "is required with --nnodes > 1", fix="pass --master-port 29500"
            )
        _int_at_least("ps_shards", self.ps_shards, 1)
        _int_at_least("steps", self.steps, 2)
        _int_at_least("warmup_steps", self.warmup_steps, 0)
        if self.backend not in BACKENDS:
            raise InvalidSpecError(
                "backend", f"must be one of {', '.join(BACKENDS)}", got=self.backend
            )
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise InvalidSpecError("timeout_s", "must be a finite number > 0", got=self.timeout_s)
        if not (math.isfinite(self.bucket_cap_mb) and self.bucket_cap_mb > 0):
            raise InvalidSpecError("bucket_cap_mb", "must be > 0", got=self.bucket_cap_mb)
        workers = self.n_workers
        if workers < 1:
            raise InvalidSpecError(
                "ps_shards",
                f"leaves no worker: {self.world_size} processes, {self.ps_shards} PS shard(s)",
                got=self.ps_shards,
                fix="raise --nproc or lower --ps-shards",
            )
        if self.strategy != "ps" and workers < 2 and self.nnodes == 1:
            raise InvalidSpecError(
                "nproc", f"{self.strategy} needs at least 2 processes", got=self.nproc_per_node
            )
        for name, values in (("batch_sizes", self.batch_sizes), ("devices", self.devices)):
            if len(values) not in (1, workers):
                raise InvalidSpecError(
                    name,
                    f"needs 1 value or one per worker ({workers})",
                    got=",".join(str(v) for v in values),
                )
        for b in self.batch_sizes:
            _int_at_least("batch_sizes", b, 1)
        for d in self.devices:
            if not isinstance(d, str) or not d:
                raise InvalidSpecError("devices", "must be device strings", got=d)

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def n_ps(self) -> int:
        return self.ps_shards if self.strategy == "ps" else 0

    @property
    def n_workers(self) -> int:
        return self.world_size - self.n_ps

    def role_of(self, rank: int) -> Role:
        return "ps" if rank < self.n_ps else "worker"

    def worker_index(self, rank: int) -> int:
        """0-based index among workers of a worker ``rank``."""
        return rank - self.n_ps

    def batch_size_of(self, rank: int) -> int:
        i = self.worker_index(rank)
        return self.batch_sizes[0] if len(self.batch_sizes) == 1 else self.batch_sizes[i]

    def device_of(self, rank: int) -> str:
        i = self.worker_index(rank)
        return self.devices[0] if len(self.devices) == 1 else self.devices[i]

    @property
    def label(self) -> str:
        """``ddp``, ``fsdp``, ``ps-sync`` or ``ps-async``."""
        if self.strategy == "ps":
            return "ps-sync" if self.sync else "ps-async"
        return self.strategy

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "nproc_per_node": self.nproc_per_node,
            "batch_sizes": list(self.batch_sizes),
            "devices": list(self.devices),
            "nnodes": self.nnodes,
            "node_rank": self.node_rank,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
            "ps_shards": self.ps_shards,
            "sync": self.sync,
            "steps": self.steps,
            "warmup_steps": self.warmup_steps,
            "backend": self.backend,
            "timeout_s": self.timeout_s,
            "bucket_cap_mb": self.bucket_cap_mb,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DistributedConfig:
        port = data.get("master_port")
        return cls(
            strategy=data["strategy"],
            nproc_per_node=int(data["nproc_per_node"]),
            batch_sizes=tuple(int(b) for b in data["batch_sizes"]),
            devices=tuple(str(d) for d in data.get("devices", ("auto",))),
            nnodes=int(data.get("nnodes", 1)),
            node_rank=int(data.get("node_rank", 0)),
            master_addr=str(data.get("master_addr", "127.0.0.1")),
            master_port=None if port is None else int(port),
            ps_shards=int(data.get("ps_shards", 1)),
            sync=bool(data.get("sync", True)),
            steps=int(data.get("steps", 20)),
            warmup_steps=int(data.get("warmup_steps", 5)),
            backend=data.get("backend", "auto"),
            timeout_s=float(data.get("timeout_s", 300.0)),
            bucket_cap_mb=float(data.get("bucket_cap_mb", 25.0)),
        )


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _check_samples(name: str, values: tuple[float, ...], *, positive: bool) -> None:
    for v in values:
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            bound = "> 0" if positive else ">= 0"
            raise InvalidSpecError(name, f"every sample must be a finite number {bound}", got=v)


@dataclass(frozen=True, slots=True, kw_only=True)
class RankResult:
    """What one rank measured, step by step (the warm-up steps are dropped).

    Workers fill ``step_times_s``, ``compute_times_s`` and ``comm_times_s`` (one per measured
    step; see the module docstring); a PS rank fills ``service_times_s`` (its busy time per
    update it served) and ``wall_time_s`` (from its first to its last update).
    """

    rank: int
    role: Role
    device: str
    host: str
    batch_size: int = 0  # 0 for a PS rank
    step_times_s: tuple[float, ...] = ()
    compute_times_s: tuple[float, ...] = ()
    comm_times_s: tuple[float, ...] = ()
    bytes_sent_per_step: float = 0.0
    bytes_received_per_step: float = 0.0
    service_times_s: tuple[float, ...] = ()
    wall_time_s: float = 0.0
    n_parameters: int = 0  # parameters this rank holds (a PS: its shard)

    median_step_s: float = field(init=False)
    median_compute_s: float = field(init=False)
    median_comm_s: float = field(init=False)
    ps_utilization: float | None = field(init=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidSpecError("role", f"must be one of {', '.join(ROLES)}", got=self.role)
        set_ = object.__setattr__
        for name in ("step_times_s", "compute_times_s", "comm_times_s", "service_times_s"):
            values = tuple(float(v) for v in getattr(self, name))
            _check_samples(name, values, positive=name == "step_times_s")
            set_(self, name, values)
        if self.role == "worker":
            n = len(self.step_times_s)
            if n < 2:
                raise InvalidSpecError("step_times_s", "a worker needs >= 2 measured steps", got=n)
            if len(self.compute_times_s) != n or len(self.comm_times_s) != n:
                raise InvalidSpecError(
                    "compute_times_s", "needs one sample per measured step", got=n
                )
        set_(self, "median_step_s", _median(self.step_times_s))
        set_(self, "median_compute_s", _median(self.compute_times_s))
        set_(self, "median_comm_s", _median(self.comm_times_s))
        util = None
        if self.role == "ps" and self.wall_time_s > 0:
            util = min(math.fsum(self.service_times_s) / self.wall_time_s, 1.0)
        set_(self, "ps_utilization", util)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "role": self.role,
            "device": self.device,
            "host": self.host,
            "batch_size": self.batch_size,
            "median_step_s": self.median_step_s,
            "median_compute_s": self.median_compute_s,
            "median_comm_s": self.median_comm_s,
            "ps_utilization": self.ps_utilization,
            "bytes_sent_per_step": self.bytes_sent_per_step,
            "bytes_received_per_step": self.bytes_received_per_step,
            "n_parameters": self.n_parameters,
            "wall_time_s": self.wall_time_s,
            "step_times_s": list(self.step_times_s),
            "compute_times_s": list(self.compute_times_s),
            "comm_times_s": list(self.comm_times_s),
            "service_times_s": list(self.service_times_s),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankResult:
        return cls(
            rank=int(data["rank"]),
            role=data["role"],
            device=str(data["device"]),
            host=str(data.get("host", "")),
            batch_size=int(data.get("batch_size", 0)),
            step_times_s=tuple(data.get("step_times_s", ())),
            compute_times_s=tuple(data.get("compute_times_s", ())),
            comm_times_s=tuple(data.get("comm_times_s", ())),
            bytes_sent_per_step=float(data.get("bytes_sent_per_step", 0.0)),
            bytes_received_per_step=float(data.get("bytes_received_per_step", 0.0)),
            service_times_s=tuple(data.get("service_times_s", ())),
            wall_time_s=float(data.get("wall_time_s", 0.0)),
            n_parameters=int(data.get("n_parameters", 0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributedMeasurement:
    """A distributed training run: the config, every rank's samples, derived statistics.

    ``n_parameters``/``n_tensors`` describe the model (for the scaling model). Derived in
    ``__post_init__``: ``step_times_s`` (the run's per-step times, see the module docstring),
    ``median_step_s``, ``mean_step_s``, ``compute_s``, ``communication_s``,
    ``exposed_communication_s``, ``overlapped_communication_s`` (medians over workers of
    their medians), ``bytes_per_step``, ``bytes_received_per_step``, ``skew``,
    ``straggler_rank``, ``samples_per_s``, ``worker_steps_per_s`` (the cluster speed in the
    scaling model's unit: worker steps per second) and ``ps_utilization`` (busiest shard).
    """

    spec: WorkloadSpec
    config: DistributedConfig
    ranks: tuple[RankResult, ...]
    n_parameters: int
    n_tensors: int
    environment: EnvironmentFingerprint
    created_at: datetime
    warnings: tuple[str, ...] = ()

    step_times_s: tuple[float, ...] = field(init=False)
    median_step_s: float = field(init=False)
    mean_step_s: float = field(init=False)
    compute_s: float = field(init=False)
    communication_s: float = field(init=False)
    exposed_communication_s: float = field(init=False)
    overlapped_communication_s: float = field(init=False)
    bytes_per_step: float = field(init=False)
    bytes_received_per_step: float = field(init=False)
    skew: float = field(init=False)
    straggler_rank: int = field(init=False)
    samples_per_s: float = field(init=False)
    worker_steps_per_s: float = field(init=False)
    ps_utilization: float | None = field(init=False)

    def __post_init__(self) -> None:
        if self.created_at.tzinfo is None:
            raise InvalidSpecError("created_at", "must be timezone-aware")
        ranks = tuple(sorted(self.ranks, key=lambda r: r.rank))
        if [r.rank for r in ranks] != list(range(self.config.world_size)):
            raise InvalidSpecError(
                "ranks", f"needs one result per rank 0..{self.config.world_size - 1}"
            )
        workers = [r for r in ranks if r.role == "worker"]
        if len(workers) != self.config.n_workers:
            raise InvalidSpecError("ranks", f"needs {self.config.n_workers} worker results")
        set_ = object.__setattr__
        set_(self, "ranks", ranks)
        n_steps = min(len(w.step_times_s) for w in workers)
        if self.config.strategy == "ps" and not self.config.sync:
            steps = tuple(t for w in workers for t in w.step_times_s)
        else:
            steps = tuple(max(w.step_times_s[i] for w in workers) for i in range(n_steps))
        set_(self, "step_times_s", steps)
        set_(self, "median_step_s", _median(steps))
        set_(self, "mean_step_s", math.fsum(steps) / len(steps))
        compute = _median([w.median_compute_s for w in workers])
        comm = _median([w.median_comm_s for w in workers])
        exposed = max(_median([w.median_step_s for w in workers]) - compute, 0.0)
        set_(self, "compute_s", compute)
        set_(self, "communication_s", comm)
        set_(self, "exposed_communication_s", exposed)
        set_(self, "overlapped_communication_s", max(comm - exposed, 0.0))
        set_(
            self, "bytes_per_step", math.fsum(w.bytes_sent_per_step for w in workers) / len(workers)
        )
        set_(
            self,
            "bytes_received_per_step",
            math.fsum(w.bytes_received_per_step for w in workers) / len(workers),
        )
        fastest = min(workers, key=lambda w: w.median_compute_s)
        slowest = max(workers, key=lambda w: w.median_compute_s)
        skew = (
            slowest.median_compute_s / fastest.median_compute_s - 1
            if fastest.median_compute_s > 0
            else 0.0
        )
        set_(self, "skew", skew)
        set_(self, "straggler_rank", slowest.rank)
        worker_means = [math.fsum(w.step_times_s) / len(w.step_times_s) for w in workers]
        set_(self, "worker_steps_per_s", math.fsum(1.0 / m for m in worker_means))
        set_(
            self,
            "samples_per_s",
            math.fsum(w.batch_size / m for w, m in zip(workers, worker_means, strict=True)),
        )
        utils = [r.ps_utilization for r in ranks if r.ps_utilization is not None]
        set_(self, "ps_utilization", max(utils) if utils else None)
        notes = list(self.warnings)
        if skew > STRAGGLER_SKEW:
            note = (
                f"worker skew {skew:.0%}: rank {slowest.rank} computes slowest "
                f"(median {slowest.median_compute_s * 1e3:.3g} ms vs "
                f"{fastest.median_compute_s * 1e3:.3g} ms on rank {fastest.rank})"
            )
            if note not in notes:
                notes.append(note)
        set_(self, "warnings", tuple(notes))

    @property
    def workers(self) -> tuple[RankResult, ...]:
        return tuple(r for r in self.ranks if r.role == "worker")

    @property
    def global_batch_size(self) -> int:
        return sum(w.batch_size for w in self.workers)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: the summary the CLI prints first, then the config and the ranks."""
        return {
            "schema_version": DISTRIBUTED_SCHEMA_VERSION,
            "kind": "distributed",
            "workload": self.spec.name,
            "workload_options": options_to_json(self.spec.options),
            "batch_size": self.spec.batch_size,
            "precision": self.spec.precision,
            "mode": "train",
            "strategy": self.config.label,
            "world_size": self.config.world_size,
            "workers": self.config.n_workers,
            "ps_shards": self.config.n_ps,
            "global_batch_size": self.global_batch_size,
            "step_time_s": {
                "median": self.median_step_s,
                "mean": self.mean_step_s,
                "min": min(self.step_times_s),
                "max": max(self.step_times_s),
            },
            "compute_s": self.compute_s,
            "communication_s": self.communication_s,
            "exposed_communication_s": self.exposed_communication_s,
            "overlapped_communication_s": self.overlapped_communication_s,
            "bytes_per_step": self.bytes_per_step,
            "bytes_received_per_step": self.bytes_received_per_step,
            "skew": self.skew,
            "straggler_rank": self.straggler_rank,
            "samples_per_s": self.samples_per_s,
            "worker_steps_per_s": self.worker_steps_per_s,
            "ps_utilization": self.ps_utilization,
            "n_parameters": self.n_parameters,
            "n_tensors": self.n_tensors,
            "created_at": self.created_at.isoformat(),
            "warnings": list(self.warnings),
            "config": self.config.to_dict(),
            "environment": self.environment.to_dict(),
            "step_times_s": list(self.step_times_s),
            "ranks": [r.to_dict() for r in self.ranks],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DistributedMeasurement:
        spec = WorkloadSpec(
            name=str(data["workload"]),
            batch_size=int(data["batch_size"]),
            precision=data.get("precision", "fp32"),
            options=options_from_json(data.get("workload_options")),
        )
        return cls(
            spec=spec,
            config=DistributedConfig.from_dict(data["config"]),
            ranks=tuple(RankResult.from_dict(r) for r in data["ranks"]),
            n_parameters=int(data["n_parameters"]),
            n_tensors=int(data["n_tensors"]),
            environment=EnvironmentFingerprint.from_dict(data["environment"]),
            created_at=datetime.fromisoformat(str(data["created_at"])),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
        )
