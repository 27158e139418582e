"""Program characterisation (phases, shares, burstiness) and the cross-hardware model."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from gpucast.domain.measurement import EnvironmentFingerprint
from gpucast.domain.program import ProgramMeasurement, ProgramRun, ResourceSeries
from gpucast.predict.program import (
    PHASE_CLASSES,
    CpuMachine,
    ProgramModel,
    ProgramObservation,
    characterise,
    classify,
    phases,
    scale,
)

ENV = EnvironmentFingerprint(
    host="h", os="o", python_version="3", cpu_model="c", cpu_cores=2, torch_threads=1,
    torch_version="2",
)  # fmt: skip


def _series(cpu, *, rss=None, read=None, gpu=None, threads=None, wait=None) -> ResourceSeries:
    n = len(cpu)
    t = tuple(0.1 * (i + 1) for i in range(n))
    zeros = (0.0,) * n
    return ResourceSeries(
        interval_s=0.1, t_s=t, cpu_cores=tuple(cpu), rss_bytes=tuple(rss or (1e7,) * n),
        read_bytes=zeros, write_bytes=zeros, read_chars=tuple(read or zeros),
        write_chars=zeros, net_sent_bytes=zeros, net_recv_bytes=zeros,
        active_threads=tuple(threads or (1.0,) * n), cpu_wait_cores=tuple(wait or zeros),
        gpu_util_pct=None if gpu is None else tuple(gpu),
    )  # fmt: skip


def _names(classes: np.ndarray) -> list[str]:
    return [PHASE_CLASSES[i] for i in classes]


def test_each_interval_is_classed_by_what_the_program_did() -> None:
    read = np.cumsum([0, 0, 0, 0, 20e6, 20e6, 20e6, 0, 0, 0]).tolist()  # 200 MB/s reads
    s = _series(
        [1.0, 1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 0.0, 0.0, 0.0],
        read=read,
        rss=[1e7] * 8 + [2e9, 2e9],
    )
    names = _names(classify(s, n_cores=2))
    assert names[:4] == ["cpu"] * 4
    assert names[4:7] == ["io"] * 3
    assert names[7] == "idle"


def test_busy_with_a_large_resident_set_is_memory_and_busy_gpu_is_gpu() -> None:
    s = _series([1.0] * 4, rss=[2e9] * 4)
    assert _names(classify(s, n_cores=2)) == ["memory"] * 4
    g = _series([0.1] * 4, gpu=[90.0] * 4)
    assert _names(classify(g, n_cores=2)) == ["gpu"] * 4


def test_waiting_for_a_cpu_counts_as_cpu_demand() -> None:
    """Half a core used and half waited for on a shared machine is still CPU-bound."""
    s = _series([0.3] * 4, wait=[0.5] * 4)
    assert _names(classify(s, n_cores=2)) == ["cpu"] * 4
    alone = _series([0.3] * 4)
    assert _names(classify(alone, n_cores=2)) == ["idle"] * 4


def test_a_single_thread_on_two_cores_is_cpu_bound_at_one_core() -> None:
    s = _series([1.0] * 4, threads=[1.0] * 4)
    assert _names(classify(s, n_cores=2)) == ["cpu"] * 4
    two = _series([1.0] * 4, threads=[2.0] * 4)
    assert _names(classify(two, n_cores=2)) == ["cpu"] * 4  # 1.0 >= 0.5 x 2
    four = _series([0.8] * 4, threads=[4.0] * 4)
    assert _names(classify(four, n_cores=2)) == ["idle"] * 4


def test_short_blips_join_the_phase_before() -> None:
    idx = PHASE_CLASSES.index
    classes = np.array([idx("cpu")] * 5 + [idx("io")] + [idx("cpu")] * 5 + [idx("idle")] * 4)
    t = [0.1 * (i + 1) for i in range(classes.size)]
    got = phases(classes, t)
    assert [p[2] for p in got] == ["cpu", "idle"]
    assert got[0][0] == 0.0 and got[-1][1] == pytest.approx(t[-1])
    assert got[0][1] == pytest.approx(got[1][0])


def test_a_phase_is_named_by_most_of_its_samples() -> None:
    """A short run: 1 idle then 2 cpu samples read 'phases: idle' beside 'bound by cpu'
    (the first short run took the others in under its own name; QA 35 R #22)."""
    idx = PHASE_CLASSES.index
    classes = np.array([idx("idle"), idx("cpu"), idx("cpu")])
    got = phases(classes, [0.1, 0.2, 0.3])
    assert got == [(0.0, pytest.approx(0.3), "cpu")]
    mixed = np.array([idx("idle")] * 4 + [idx("cpu")] * 2 + [idx("idle")] * 4)
    assert [p[2] for p in phases(mixed, [0.1 * (i + 1) for i in range(10)])] == ["idle"]


def _measurement(series: list[ResourceSeries]) -> ProgramMeasurement:
    runs = tuple(
        ProgramRun(index=i, warmup=i == 0, status="ok", wall_s=1.0, series=s)
        for i, s in enumerate(series)
    )
    return ProgramMeasurement(
        name="p", command=("p",), n_cores=2, runs=runs, stop_reason="ci_reached",
        environment=ENV, created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip


def test_characterise_summarises_the_measured_runs() -> None:
    bursty = _series([2.0, 0.0, 2.0, 0.0, 2.0, 0.0, 2.0, 0.0], threads=[2.0] * 8)
    steady = _series([1.0] * 8, threads=[2.0] * 8)
    warm = _series([0.0] * 8)  # the warm-up run is left out
    p = characterise(_measurement([warm, bursty, bursty]))
    assert p is not None
    assert p.burstiness > 0.9 and p.cpu_cores_peak == 2.0
    assert p.thread_demand == 2.0
    q = characterise(_measurement([warm, steady]))
    assert q is not None and q.burstiness == pytest.approx(0.0, abs=1e-9)
    assert q.bound_by == "cpu" and q.shares["cpu"] == pytest.approx(1.0)
    assert sum(q.shares.values()) == pytest.approx(1.0)


def test_shares_are_of_the_dedicated_time_when_the_contention_is_known() -> None:
    # 3 CPU-busy intervals of 0.1 s that waited half their time, then 4 of disk reads: on a
    # machine of its own the CPU part takes half as long
    read = np.cumsum([0, 0, 0, 0, 20e6, 20e6, 20e6, 20e6]).tolist()
    base = _series([0.5] * 4 + [0.0] * 4, read=read, wait=[0.5] * 4 + [0.0] * 4)
    lost = np.cumsum([0.0, 0.05, 0.05, 0.05, 0.0, 0.0, 0.0, 0.0]).tolist()
    contended = ResourceSeries.from_dict({**base.to_dict(), "contention_s": lost})
    p = characterise(_measurement([base, contended]))
    q = characterise(_measurement([base, base]))
    assert p is not None and q is not None
    assert q.shares["cpu"] == pytest.approx(0.3 / 0.7)
    assert p.shares["cpu"] == pytest.approx(0.15 / 0.55)


def _machine(cores: float, clock: float = 2.0, bw: float = 100.0, disk: float = 100.0):
    return CpuMachine(
        name="m", cores=cores, clock_ghz=clock, memory_bandwidth_gbs=bw, disk_mb_per_s=disk
    )


def test_scale_moves_each_share_by_its_own_resource() -> None:
    cpu = ProgramObservation(
        machine=_machine(1), wall_s=10.0, shares={"cpu": 1.0}, thread_demand=4.0
    )
    assert scale(cpu, _machine(2), 4.0) == pytest.approx(5.0)  # twice the cores
    assert scale(cpu, _machine(8), 4.0) == pytest.approx(2.5)  # demand caps at 4
    assert scale(cpu, _machine(1, clock=4.0), 4.0) == pytest.approx(5.0)
    io = ProgramObservation(machine=_machine(1), wall_s=10.0, shares={"io": 1.0}, thread_demand=1)
    assert scale(io, _machine(1, disk=200.0), 1.0) == pytest.approx(5.0)
    idle = ProgramObservation(
        machine=_machine(1), wall_s=10.0, shares={"idle": 1.0}, thread_demand=1
    )
    assert scale(idle, _machine(64, clock=5.0), 1.0) == pytest.approx(10.0)
    mem = ProgramObservation(
        machine=_machine(1, bw=100.0), wall_s=10.0, shares={"memory": 1.0}, thread_demand=1
    )
    # one core draws PER_CORE_BANDWIDTH_GBS whatever the socket: no gain from more bandwidth
    assert scale(mem, _machine(1, bw=400.0), 1.0) == pytest.approx(10.0)


def test_fit_finds_the_thread_demand_from_two_core_counts() -> None:
    shares = {"cpu": 0.9, "idle": 0.1}
    # a program that uses 1.5 cores: 1 core -> 10 s; 2 cores -> 0.9*10/1.5 + 1 = 7 s
    one = ProgramObservation(machine=_machine(1), wall_s=10.0, shares=shares, thread_demand=1.0)
    two = ProgramObservation(machine=_machine(2), wall_s=7.0, shares=shares, thread_demand=1.0)
    model = ProgramModel().fit([one, two])
    assert model.demand == pytest.approx(1.5, abs=0.05)
    assert model.predict([_machine(4)])[0] == pytest.approx(7.0, rel=0.02)
    alone = ProgramModel().fit([one])
    assert alone.demand is None
    assert alone.predict([_machine(2)])[0] == pytest.approx(10.0)  # its own demand: 1 thread


def test_a_loaded_machine_gives_its_fair_share_whatever_the_pinning() -> None:
    """With 4 other runnable tasks on 2 CPUs, a 4-thread program gets 2 x 4/8 = 1 core
    pinned to 1 or to 2 cores; on a dedicated machine it gets both."""
    loaded_1 = CpuMachine(
        name="l1", cores=1, clock_ghz=2, memory_bandwidth_gbs=100, disk_mb_per_s=100,
        host_cpus=2, background_tasks=4,
    )  # fmt: skip
    loaded_2 = CpuMachine(
        name="l2", cores=2, clock_ghz=2, memory_bandwidth_gbs=100, disk_mb_per_s=100,
        host_cpus=2, background_tasks=4,
    )  # fmt: skip
    assert loaded_1.available_cores(4.0) == pytest.approx(1.0)
    assert loaded_2.available_cores(4.0) == pytest.approx(1.0)
    assert _machine(2).available_cores(4.0) == 2.0
    obs = ProgramObservation(machine=loaded_1, wall_s=8.0, shares={"cpu": 1.0}, thread_demand=4)
    assert scale(obs, loaded_2, 4.0) == pytest.approx(8.0)
    assert scale(obs, _machine(2), 4.0) == pytest.approx(4.0)  # a dedicated 2-core machine


def test_a_machine_needs_sane_numbers() -> None:
    from gpucast.domain.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError, match="clock_ghz"):
        _machine(1, clock=float("nan"))
    with pytest.raises(InvalidSpecError, match="host_cpus"):
        CpuMachine(
            name="x", cores=4, clock_ghz=2, memory_bandwidth_gbs=1, disk_mb_per_s=1, host_cpus=2
        )
