"""Start this node's ranks, watch them, and turn rank 0's gathered samples into a measurement."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpucast.domain.distributed import DistributedConfig, DistributedMeasurement, RankResult
from gpucast.domain.errors import InvalidSpecError, MeasurementError
from gpucast.domain.measurement import EnvironmentFingerprint
from gpucast.domain.workload import WorkloadOptions, WorkloadSpec
from gpucast.measure.distributed._proc import child_env, popen_tied, stop

#: Seconds the launcher allows for interpreter start and rendezvous on top of the job timeout.
STARTUP_SLACK_S = 120.0
#: Host memory one rank takes before its model: a Python process with torch loaded. The OOM
#: killer's report of a CPU rank (torch 2.13.0+cpu, mlp, QA 40): anon-rss 340,716 kB.
RANK_PROCESS_BYTES = 340_716 * 1024
_POLL_S = 0.05


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    useful = [line for line in text if line.strip() and not line.startswith("W")]
    return " | ".join((useful or text)[-lines:])


def _rank_error(out: Path, rank: int, log: Path, code: int) -> str:
    error_file = out.with_name(f"{out.name}.rank{rank}.error")
    if error_file.is_file():
        return error_file.read_text().split("\n", 1)[0]
    tail = _tail(log)
    return f"exit code {code}" + (f": {tail}" if tail else "")


def validate(spec: WorkloadSpec, config: DistributedConfig) -> None:
    """Check what can be checked before any process starts (workload name, device strings,
    each of this node's workers' batch against its device's memory)."""
    from gpucast.measure.devices import check_batch_fits, resolve_device
    from gpucast.measure.distributed.worker import device_for
    from gpucast.profile.profiler import user_workload_on_meta
    from gpucast.workloads import get_workload

    # a user's model as built on meta: its factory allocates nothing here (QA 41)
    options = dict(spec.options)
    workload = user_workload_on_meta(spec.name, options) or get_workload(spec.name, **options)
    for device in config.devices:
        if device not in ("auto", "cuda"):
            resolve_device(device)
    flag = "batch-size" if len(config.batch_sizes) == 1 else "batch-sizes"
    checked: set[tuple[int, str]] = set()  # each batch on each device once, not per rank
    for local_rank in range(config.nproc_per_node):
        rank = config.node_rank * config.nproc_per_node + local_rank
        if config.role_of(rank) == "worker":  # a batch too big failed inside the rank, exit 1
            device = device_for(config, rank, local_rank)
            if (config.batch_size_of(rank), str(device)) not in checked:
                checked.add((config.batch_size_of(rank), str(device)))
                check_batch_fits(
                    workload, config.batch_size_of(rank), device, flag=flag,
                    step=("train", spec.precision),
                )  # fmt: skip
    check_ranks_fit(config.nproc_per_node)  # after each rank's batch: the larger need
    if spec.precision == "fp16" and config.strategy == "ps":
        raise InvalidSpecError(
            "precision",
            "fp16 is not supported with the parameter server (no loss scaling across pushes)",
            fix="use --precision bf16 or fp32",
        )


def host_memory_bytes() -> float:
    """This host's physical memory (psutil; no torch, so a campaign driver can check a sweep's
    ``nprocs`` without importing it)."""
    import psutil

    return float(psutil.virtual_memory().total)


def check_ranks_fit(nproc: int, *, flag: str = "--nproc") -> None:
    """Refuse more ranks on this node than its memory holds, each a process with torch loaded
    (QA 40 C10: ``--nproc 1000`` on a 2-CPU, 23.5 GiB host started ranks for 10 minutes until
    the OOM killer stepped in; 64 ranks, the most a README run used, pass). ``flag`` is what
    the fix says to lower (a sweep's ``nprocs``: QA 40 C11)."""
    from gpucast.domain.limits import format_bytes

    host_bytes = host_memory_bytes()
    if nproc * RANK_PROCESS_BYTES > host_bytes:
        raise InvalidSpecError(
            "nproc",
            f"{nproc:,} processes on this node need about "
            f"{format_bytes(nproc * RANK_PROCESS_BYTES)} before any model (each rank is a "
            f"process with torch loaded, about {format_bytes(RANK_PROCESS_BYTES)}), more than "
            f"this host's {format_bytes(host_bytes)} of memory",
            got=nproc,
            fix=f"lower {flag} (at most {int(host_bytes // RANK_PROCESS_BYTES):,} fit)",
        )


def launch(
    spec: WorkloadSpec,
    config: DistributedConfig,
    *,
    optimizer: str = "sgd",
    workdir: Path | None = None,
) -> DistributedMeasurement | None:
    """Run this node's ``config.nproc_per_node`` ranks to completion.

    Returns the measurement on node 0 (rank 0 gathers every rank's samples) and ``None`` on
    other nodes. A rank that fails stops the others and raises :class:`MeasurementError`
    naming the rank and its error.
    """
    from gpucast.measure.api import canonical_spec

    spec = canonical_spec(spec)  # every rank builds, and the run is stored as, this spec
    validate(spec, config)
    port = config.master_port if config.master_port is not None else free_port()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpucast-")))
        job = workdir / "job.json"
        out = workdir / "result.json"
        job.write_text(
            json.dumps(
                {
                    "spec": spec.to_dict(),
                    "config": config.to_dict(),
                    "optimizer": optimizer,
                }
            )
        )
        threads = max(1, _cpu_count() // config.nproc_per_node)
        processes = []
        logs: list[Path] = []
        try:
            for local_rank in range(config.nproc_per_node):
                rank = config.node_rank * config.nproc_per_node + local_rank
                env = child_env(
                    {
                        "RANK": str(rank),
                        "WORLD_SIZE": str(config.world_size),
                        "LOCAL_RANK": str(local_rank),
                        "LOCAL_WORLD_SIZE": str(config.nproc_per_node),
                        "GROUP_RANK": str(config.node_rank),
                        "MASTER_ADDR": config.master_addr,
                        "MASTER_PORT": str(port),
                        "OMP_NUM_THREADS": str(threads),
                    }
                )
                log = workdir / f"rank{rank}.log"
                logs.append(log)
                handle = stack.enter_context(log.open("wb"))
                command = [
                    sys.executable,
                    "-m",
                    "gpucast.measure.distributed.worker",
                    "--job",
                    str(job),
                    "--out",
                    str(out),
                ]
                processes.append(popen_tied(command, env=env, stdout=handle, stderr=handle))
            _wait(processes, logs, out, config)
        finally:
            stop(processes)
        if config.node_rank != 0:
            return None
        if not out.is_file():
            raise MeasurementError("rank 0 finished without writing its result")
        measured = assemble(json.loads(out.read_text()))
    note = oversubscribed_warning(config.nproc_per_node, _cpu_count())
    if note is None:
        return measured
    return dataclasses.replace(measured, warnings=(*measured.warnings, note))


def oversubscribed_warning(nproc: int, cpus: int) -> str | None:
    """A line where this node ran more ranks than it has usable CPUs (QA session 36: 64 DDP
    ranks on 2 cores were stored with only a worker skew): the ranks took turns on the cores,
    so the step measures that contention, not the strategy."""
    if nproc <= cpus:
        return None
    return (
        f"{nproc} ranks ran on {cpus} usable CPU{'s' if cpus != 1 else ''} of this node: they "
        "took turns on the cores, so the step times measure that contention, not the "
        f"strategy; use --nproc {cpus} or fewer here"
    )


def _cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _wait(processes: list[Any], logs: list[Path], out: Path, config: DistributedConfig) -> None:
    deadline = time.monotonic() + config.timeout_s + STARTUP_SLACK_S
    first_rank = config.node_rank * config.nproc_per_node
    while True:
        codes = [p.poll() for p in processes]
        for index, code in enumerate(codes):
            if code not in (None, 0):
                rank = first_rank + index
                reason = _rank_error(out, rank, logs[index], code)
                stop(processes)
                raise MeasurementError(
                    f"{config.label} run failed on rank {rank}: {reason}",
                    fix="see the rank logs; rerun with fewer processes or another --batch-size"
                    if "memory" in reason.lower()
                    else None,
                )
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            stop(processes)
            limit_s = config.timeout_s + STARTUP_SLACK_S
            raise MeasurementError(
                f"{config.label} run did not finish within {limit_s:g} s",
                fix="check that every node started (--nnodes, --master-addr, --master-port)",
            )
        time.sleep(_POLL_S)


def assemble(data: dict[str, Any]) -> DistributedMeasurement:
    """Rank 0's gathered JSON to a :class:`DistributedMeasurement`."""
    from datetime import datetime

    spec = WorkloadSpec(
        name=data["spec"]["name"],
        batch_size=int(data["spec"]["batch_size"]),
        precision=data["spec"]["precision"],
        options=data["spec"].get("options", ()),
    )
    return DistributedMeasurement(
        spec=spec,
        config=DistributedConfig.from_dict(data["config"]),
        ranks=tuple(RankResult.from_dict(r) for r in data["ranks"]),
        n_parameters=int(data["n_parameters"]),
        n_tensors=int(data["n_tensors"]),
        environment=EnvironmentFingerprint.from_dict(data["environment"]),
        created_at=datetime.fromisoformat(data["created_at"]),
    )


def measure_distributed(
    workload: str,
    *,
    strategy: str,
    nproc: int,
    batch_sizes: tuple[int, ...] = (32,),
    devices: tuple[str, ...] = ("auto",),
    precision: str = "fp32",
    ps_shards: int = 1,
    sync: bool = True,
    steps: int = 20,
    warmup_steps: int = 5,
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    optimizer: str = "sgd",
    timeout_s: float = 300.0,
    options: WorkloadOptions = (),
) -> DistributedMeasurement | None:
    """Measure ``workload`` (built with ``options``) trained with ``strategy`` (``ddp``,
    ``fsdp``, ``ps``) over ``nproc`` processes on this node; see :class:`DistributedConfig`
    for the fields.

    ``batch_sizes``/``devices`` hold one value for every worker or one per worker.
    """
    config = DistributedConfig(
        strategy=strategy,  # type: ignore[arg-type]
        nproc_per_node=nproc,
        batch_sizes=tuple(batch_sizes),
        devices=tuple(devices),
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        ps_shards=ps_shards,
        sync=sync,
        steps=steps,
        warmup_steps=warmup_steps,
        timeout_s=timeout_s,
    )
    spec = WorkloadSpec(
        name=workload,
        batch_size=config.batch_sizes[0],
        precision=precision,  # type: ignore[arg-type]
        options=options,
    )
    return launch(spec, config, optimizer=optimizer)
