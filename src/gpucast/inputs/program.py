"""Model inputs of the program model: the measured host and the catalog targets as machines.

A stored program run (``measure cmd``) becomes a
:class:`~gpucast.predict.program.ProgramObservation` on the machine it ran on: the cores it was
given (hardware threads turned into cores with the SMT prior), the clock the run recorded,
and a memory bandwidth and disk throughput that psutil cannot measure -- given by the user or
the defaults below, each returned as an :class:`Assumption` the result lists.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.program import SMT_GAIN, CpuInstance, ProgramMeasurement
from gpucast.domain.provenance import Assumption
from gpucast.predict.program import (
    CpuMachine,
    ProgramObservation,
    ProgramProfile,
    characterise,
)

#: Host memory bandwidth when not given (GB/s): the model's per-core ceiling (10 GB/s per
#: busy core) binds first below 10 busy cores, so the figure matters only beyond that.
DEFAULT_HOST_MEMORY_BANDWIDTH_GBS = 100.0
#: Host disk throughput when not given (MB/s): the catalog's gp3 volume baseline, so a
#: program's I/O time is carried over unchanged to the catalog's instances.
DEFAULT_HOST_DISK_MB_PER_S = 125.0
#: Host clock when psutil reports none (GHz).
DEFAULT_HOST_CLOCK_GHZ = 2.5


def host_cores(n_cores: int, threads_per_core: int) -> float:
    """Cores as a CPU-bound program sees ``n_cores`` logical CPUs (the SMT prior)."""
    tpc = max(1, threads_per_core)
    return n_cores / tpc * (1.0 + SMT_GAIN * (tpc - 1))


def host_machine(
    m: ProgramMeasurement,
    *,
    memory_bandwidth_gbs: float | None = None,
    disk_mb_per_s: float | None = None,
    background_tasks: float = 0.0,
) -> tuple[CpuMachine, list[Assumption]]:
    """The machine (cores given to the run) that measured ``m``, with ``background_tasks``
    other runnable tasks (the profile's), and what was assumed."""
    notes: list[Assumption] = []
    clock = m.cpu_clock_ghz
    if clock is None:
        clock = DEFAULT_HOST_CLOCK_GHZ
        notes.append(
            Assumption(
                name="host clock",
                value=f"{clock:g} GHz",
                source="psutil reported no CPU frequency",
            )
        )
    if memory_bandwidth_gbs is None:
        memory_bandwidth_gbs = DEFAULT_HOST_MEMORY_BANDWIDTH_GBS
        notes.append(
            Assumption(
                name="host memory bandwidth",
                value=f"{memory_bandwidth_gbs:g} GB/s",
                source="not measurable with psutil; below 10 busy cores the per-core ceiling "
                "(10 GB/s per core) binds first",
                override="--host-memory-bandwidth-gbs",
            )
        )
    if disk_mb_per_s is None:
        disk_mb_per_s = DEFAULT_HOST_DISK_MB_PER_S
        notes.append(
            Assumption(
                name="host disk throughput",
                value=f"{disk_mb_per_s:g} MB/s",
                source="the catalog's EBS gp3 baseline: I/O time carried over unchanged",
                override="--host-disk-mb-per-s",
            )
        )
    machine = CpuMachine(
        name=f"{m.environment.host} ({m.n_cores} CPU{'s' if m.n_cores != 1 else ''})",
        cores=host_cores(m.n_cores, m.threads_per_core),
        host_cpus=max(
            host_cores(m.environment.cpu_cores, m.threads_per_core),
            host_cores(m.n_cores, m.threads_per_core),
        ),
        background_tasks=background_tasks,
        clock_ghz=clock,
        memory_bandwidth_gbs=memory_bandwidth_gbs,
        disk_mb_per_s=disk_mb_per_s,
    )
    return machine, notes


def target_machine(instance: CpuInstance) -> CpuMachine:
    return CpuMachine(
        name=instance.instance_type,
        cores=instance.effective_cores,
        clock_ghz=instance.clock_ghz,
        memory_bandwidth_gbs=instance.memory_bandwidth_gbs,
        disk_mb_per_s=instance.disk_mb_per_s,
    )


def observation(
    m: ProgramMeasurement,
    *,
    memory_bandwidth_gbs: float | None = None,
    disk_mb_per_s: float | None = None,
    dedicated: bool = True,
) -> tuple[ProgramObservation, ProgramProfile, list[Assumption]]:
    """``m`` as an observation of the program model, its profile, and what was assumed.

    With ``dedicated`` (the default) and runs that recorded their contention, the
    observation is the median *dedicated-equivalent* run time on the cores the runs were
    given, with no background load: what the program would take on a machine of its own,
    like a catalog instance. Otherwise (``dedicated=False``, or runs stored before the
    contention was recorded) it is the median wall time on a machine shared with the
    profile's background tasks (the fair-share term of the model)."""
    if m.n_samples == 0 or m.median_s is None:
        raise InvalidSpecError(
            "run",
            f"program {m.name!r} has no successful measured run",
            fix="measure it again (gpucast measure cmd) and pass that run id",
        )
    profile = characterise(m)
    if profile is None:
        raise InvalidSpecError(
            "run",
            f"program {m.name!r} has no resource samples to split its time by",
            fix="measure it again with a shorter --sample-interval",
        )
    use_dedicated = dedicated and m.dedicated_median_s is not None
    machine, notes = host_machine(
        m,
        memory_bandwidth_gbs=memory_bandwidth_gbs,
        disk_mb_per_s=disk_mb_per_s,
        background_tasks=0.0 if use_dedicated else profile.background_tasks,
    )
    if dedicated and not use_dedicated:
        notes.append(
            Assumption(
                name="measured run time",
                value="the wall time on a shared machine, corrected by the fair-share term",
                source="the run was stored without its contention (an older gpucast): "
                "measure it again for a dedicated-equivalent run time",
                override="gpucast measure cmd",
            )
        )
    obs = ProgramObservation.of(m, profile, machine, dedicated=use_dedicated)
    return obs, profile, notes


def same_program(measurements: Sequence[ProgramMeasurement]) -> None:
    """Refuse runs of different programs (different argv) in one prediction."""
    commands = {m.command for m in measurements}
    if len(commands) > 1:
        names = ", ".join(sorted({m.name for m in measurements}))
        raise InvalidSpecError(
            "runs",
            f"must all be runs of one command (got {len(commands)} different: {names})",
            fix="pass the run ids of one program measured on different cores or machines",
        )
