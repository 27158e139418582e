"""Run any program, sample what it uses, time it with the harness's stopping rule.

One run (:func:`run_once`) starts the program in its own session (so a timeout kills the
whole process group), its stdout and stderr going to temporary files (no pipe can fill and
block it), pinned to ``cpus`` with ``os.sched_setaffinity`` where asked. While it runs, the
sampler reads every ``interval_s`` with psutil: the CPU time, resident memory and I/O
counters of the process and every descendant (counters of descendants that already exited
are kept, so they never go backwards), the CPU threads that ran in the interval, the
machine's per-core utilisation and network bytes, and the GPUs through NVML where present.
``os.wait4`` reaps the program and gives its rusage (CPU time of every child it waited for,
peak RSS). The work metric is the first group of the last match of its regex in the output.

:func:`measure_program` runs warm-up and measured runs through
:func:`gpucast.measure.harness.run_adaptive`; the first run that fails (non-zero exit,
signal, timeout, metric never printed) stops it, and is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal as signal_module
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from gpucast.domain.errors import InvalidInputError
from gpucast.domain.program import (
    STDERR_TAIL_LINES,
    ProgramMeasurement,
    ProgramRun,
    ProgramStop,
    ResourceSeries,
    RunStatus,
)
from gpucast.measure.harness import Progress, StoppingRule, run_adaptive

#: Output kept from the end of stdout/stderr to find the metric and the error.
OUTPUT_TAIL_BYTES = 256 * 1024
#: Samples kept per run; longer runs are thinned evenly (the first and last always kept).
MAX_SERIES_SAMPLES = 2000

Clock = Callable[[], float]

#: Linux's ``waitid(WNOWAIT)`` tells that a child exited and leaves it unreaped, so its final
#: schedstat and counters can still be read.
_CAN_PEEK = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")
_PEEK = (os.WEXITED | os.WNOHANG | os.WNOWAIT) if _CAN_PEEK else 0


def _import_psutil() -> Any:
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        raise InvalidInputError(
            "measuring a program needs psutil", fix="pip install psutil"
        ) from None
    return psutil


class GpuReaders:
    """NVML readers for every GPU of the machine (utilisation and power averaged and summed,
    memory summed); :meth:`open` returns ``None`` without NVML or a GPU."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles

    @classmethod
    def open(cls) -> GpuReaders | None:
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            count = int(pynvml.nvmlDeviceGetCount())
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception:  # NVMLError: no driver, no GPU
            return None
        if not handles:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return None
        return cls(pynvml, handles)

    def read(self) -> tuple[float, float, float]:
        """(mean utilisation %, memory used bytes, power W) over the GPUs (NaN: not reported)."""
        util: list[float] = []
        memory: list[float] = []
        power: list[float] = []
        nvml = self._nvml
        for handle in self._handles:
            with contextlib.suppress(Exception):
                util.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            with contextlib.suppress(Exception):
                memory.append(float(nvml.nvmlDeviceGetMemoryInfo(handle).used))
            with contextlib.suppress(Exception):
                power.append(float(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0)
        return (
            float(np.mean(util)) if util else float("nan"),
            float(np.sum(memory)) if memory else float("nan"),
            float(np.sum(power)) if power else float("nan"),
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def _procs_running() -> float:
    """Tasks runnable on the whole machine right now (Linux /proc/stat), else NaN."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("procs_running"):
                    return float(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return float("nan")


def _thread_schedstats(pid: int) -> dict[int, tuple[float, float]]:
    """Per thread of process ``pid``: (seconds on a CPU, seconds runnable but waiting for
    one), from Linux ``/proc/PID/task/TID/schedstat`` (``/proc/PID/schedstat`` is the main
    thread's alone); empty where unreadable (not Linux, exited)."""
    out: dict[int, tuple[float, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as handle:
                fields = handle.read().split()
            out[int(tid)] = (float(fields[0]) / 1e9, float(fields[1]) / 1e9)
        except (OSError, IndexError, ValueError):
            continue
    return out


def contention_s(run_s: np.ndarray, wait_s: np.ndarray, interval_s: float, cores: float) -> float:
    """Seconds of an interval of ``interval_s`` that a program lost to *other* tasks, from
    its threads' time on a CPU (``run_s``) and waiting for one (``wait_s``) in it.

    On a dedicated machine with ``cores`` CPUs, a program keeping ``k`` threads runnable
    (``k = max(1, sum(run + wait) / interval)``) still waits ``run x (k/cores - 1)`` per
    thread when ``k > cores`` (its own threads queue for the cores); the rest of each
    thread's wait was caused by other tasks. Spread over the ``k`` threads that ran side by
    side, that foreign wait is the wall time the interval lost. Exact for one thread (its
    wait), for ``k`` equal threads on ``cores`` CPUs with any load beside them, and for
    threads that run one after another; it over-counts threads that are runnable at the
    same time for only part of the interval (a shorter sampling interval narrows that).
    """
    run = np.maximum(np.asarray(run_s, dtype=np.float64), 0.0)
    wait = np.maximum(np.asarray(wait_s, dtype=np.float64), 0.0)
    if interval_s <= 0 or run.size == 0:
        return 0.0
    k = max(1.0, float(np.sum(run + wait)) / interval_s)
    own = run * max(0.0, k / max(cores, 1e-9) - 1.0)
    foreign = float(np.sum(np.maximum(0.0, wait - own)))
    return min(interval_s, foreign / k)


class _TreeSampler:
    """Cumulative counters of a process tree, keeping those of descendants that exited."""

    def __init__(self, psutil: Any, pid: int, gpus: GpuReaders | None, cores: int = 1) -> None:
        self._psutil = psutil
        self._root = psutil.Process(pid)
        self._last: dict[int, tuple[float, ...]] = {}  # pid -> last counters seen
        self._threads: dict[tuple[int, int], float] = {}  # (pid, tid) -> cpu seconds
        # (pid, tid) -> (run s, wait s) from schedstat; totals over every thread seen
        self._sched: dict[tuple[int, int], tuple[float, float]] = {}
        self._cores = max(1, cores)
        # without per-thread schedstat (not Linux) the contention is unknown, not zero
        self._has_schedstat = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat")
        self._t_last: float | None = None
        self._wait_total = 0.0
        self._lost_total = 0.0
        self._gpus = gpus
        self.rows: list[list[float]] = []
        self.cores: list[list[float]] = []
        net = psutil.net_io_counters()
        self._net0 = (0.0, 0.0) if net is None else (float(net.bytes_sent), float(net.bytes_recv))
        psutil.cpu_percent(percpu=True)  # primes the per-core counters

    def _processes(self) -> list[Any]:
        try:
            return [self._root, *self._root.children(recursive=True)]
        except self._psutil.Error:
            return []

    def sample(self, t_s: float) -> None:
        psutil = self._psutil
        rss = 0.0
        active_threads = 0
        processes = self._processes()
        run_d: list[float] = []
        wait_d: list[float] = []
        for proc in processes:  # schedstat first: it stays readable while the root is a zombie
            for tid, (run, wait) in _thread_schedstats(proc.pid).items():
                key = (proc.pid, tid)
                run0, wait0 = self._sched.get(key, (0.0, 0.0))
                run_d.append(max(0.0, run - run0))
                wait_d.append(max(0.0, wait - wait0))
                self._sched[key] = (run, wait)
        interval = t_s - (self._t_last if self._t_last is not None else 0.0)
        self._t_last = t_s
        self._wait_total += float(np.sum(wait_d)) if wait_d else 0.0
        self._lost_total += contention_s(
            np.asarray(run_d), np.asarray(wait_d), interval, float(self._cores)
        )
        for proc in processes:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    rss += float(proc.memory_info().rss)
                    io = proc.io_counters() if hasattr(proc, "io_counters") else None
                    threads = proc.threads()
            except psutil.Error:  # exited or not ours between listing and reading
                continue
            counters = (
                float(times.user + times.system),
                0.0,  # waiting time: summed over threads above (schedstat)
                float(getattr(io, "read_bytes", 0.0)),
                float(getattr(io, "write_bytes", 0.0)),
                float(getattr(io, "read_chars", getattr(io, "read_bytes", 0.0))),
                float(getattr(io, "write_chars", getattr(io, "write_bytes", 0.0))),
            )
            self._last[proc.pid] = counters
            for thread in threads:
                key = (proc.pid, int(thread.id))
                cpu = float(thread.user_time + thread.system_time)
                if cpu > self._threads.get(key, 0.0) + 1e-9:
                    active_threads += 1
                self._threads[key] = cpu
        totals = np.sum(np.array(list(self._last.values()) or [(0.0,) * 6]), axis=0)
        net = psutil.net_io_counters()
        sent, recv = (
            (0.0, 0.0)
            if net is None
            else (float(net.bytes_sent) - self._net0[0], float(net.bytes_recv) - self._net0[1])
        )
        gpu = self._gpus.read() if self._gpus is not None else (np.nan, np.nan, np.nan)
        totals[1] = self._wait_total
        self.rows.append(
            [t_s, *(float(v) for v in totals), rss, sent, recv, float(active_threads), *gpu,
             _procs_running(), self._lost_total]
        )  # fmt: skip
        self.cores.append([float(v) for v in psutil.cpu_percent(percpu=True)])

    def series(self, interval_s: float, total_cpu_s: float | None) -> ResourceSeries:
        # columns: t, cpu, run delay, read/write bytes, read/write chars, rss, net sent/recv,
        # active threads, GPU util/memory/power, machine-wide runnable tasks, contention
        table = np.array(self.rows, dtype=np.float64).reshape(-1, 16)
        if total_cpu_s is not None and table.shape[0] > 1:
            # rusage counts children too short-lived for the sampler to see: their CPU time
            # is spread over the run in proportion to time, so the series adds up to it.
            seen = float(np.max(table[:, 1]))
            missing = max(0.0, total_cpu_s - seen)
            span = table[-1, 0] - table[0, 0]
            if missing > 0 and span > 0:
                table[:, 1] = np.maximum.accumulate(table[:, 1]) + missing * (
                    (table[:, 0] - table[0, 0]) / span
                )
        keep = _thin(table.shape[0])
        t = table[:, 0]
        dt = np.diff(t, prepend=0.0)
        cpu_cum = np.maximum.accumulate(table[:, 1])
        cpu_cores = np.divide(
            np.diff(cpu_cum, prepend=0.0), dt, out=np.zeros_like(dt), where=dt > 0
        )
        wait_cores = np.divide(
            np.diff(np.maximum.accumulate(table[:, 2]), prepend=0.0),
            dt,
            out=np.zeros_like(dt),
            where=dt > 0,
        )
        cores = np.array(self.cores, dtype=np.float64) if self.cores else np.zeros((0, 0))
        gpu_present = table.shape[0] > 0 and bool(np.any(np.isfinite(table[:, 11:14])))

        def col(values: np.ndarray) -> tuple[float, ...]:
            return tuple(float(v) for v in values[keep])

        def cumulative(i: int) -> tuple[float, ...]:
            return col(np.maximum.accumulate(table[:, i]))

        return ResourceSeries(
            interval_s=interval_s,
            t_s=col(t),
            cpu_cores=col(cpu_cores),
            cpu_wait_cores=col(wait_cores),
            rss_bytes=col(table[:, 7]),
            read_bytes=cumulative(3),
            write_bytes=cumulative(4),
            read_chars=cumulative(5),
            write_chars=cumulative(6),
            net_sent_bytes=col(table[:, 8]),
            net_recv_bytes=col(table[:, 9]),
            active_threads=col(table[:, 10]),
            runnable_tasks=col(table[:, 14]),
            contention_s=cumulative(15) if self._has_schedstat else (),
            core_util_pct=tuple(tuple(float(v) for v in row) for row in cores[keep])
            if cores.size
            else (),
            gpu_util_pct=col(table[:, 11]) if gpu_present else None,
            gpu_memory_bytes=col(table[:, 12]) if gpu_present else None,
            gpu_power_w=col(table[:, 13]) if gpu_present else None,
        )


def _thin(n: int) -> np.ndarray:
    if n <= MAX_SERIES_SAMPLES:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, MAX_SERIES_SAMPLES).round().astype(np.int64))


def _tail(handle: IO[bytes]) -> str:
    handle.flush()
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - OUTPUT_TAIL_BYTES))
    return handle.read().decode("utf-8", errors="replace")


def find_metric(pattern: re.Pattern[str] | None, text: str) -> float | None:
    """The first group of the last match of ``pattern`` in ``text`` as a number, or ``None``."""
    if pattern is None:
        return None
    value: float | None = None
    for match in pattern.finditer(text):
        with contextlib.suppress(TypeError, ValueError):
            number = float(match.group(1).replace(",", ""))
            if np.isfinite(number):
                value = number
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramSpec:
    """What to run and how: argv, CPU ids to pin to, timeout, metric, sampling interval."""

    command: tuple[str, ...]
    cpus: tuple[int, ...] = ()
    timeout_s: float | None = None
    metric: re.Pattern[str] | None = None
    interval_s: float = 0.1
    cwd: Path | None = None
    env: dict[str, str] | None = None


def run_once(spec: ProgramSpec, *, index: int = 0, warmup: bool = False) -> ProgramRun:
    """Run the program once; see the module docstring."""
    psutil = _import_psutil()
    gpus = GpuReaders.open()
    cpus = set(spec.cpus)

    def pin() -> None:  # in the child, before exec
        if cpus:
            os.sched_setaffinity(0, cpus)

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(
                list(spec.command),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=pin if cpus else None,
                cwd=spec.cwd,
                env=spec.env,
            )
        except OSError as exc:
            if gpus is not None:
                gpus.close()
            raise InvalidInputError(
                f"command {spec.command[0]!r}: cannot start it ({exc.strerror})",
                fix="check the program's name and that it is executable",
            ) from None
        sampler = _TreeSampler(
            psutil, proc.pid, gpus, len(cpus) if cpus else len(os.sched_getaffinity(0))
        )
        # one sample at the start and one after the exit: even a program that ends before
        # the first interval has a series (of two samples)
        sampler.sample(time.perf_counter() - started)
        status: RunStatus = "ok"
        rusage: Any = None
        wait_status = 0
        ended: float | None = None
        try:
            next_sample = started + spec.interval_s
            while True:
                if _CAN_PEEK:
                    if os.waitid(os.P_PID, proc.pid, _PEEK) is not None:
                        # exited, not reaped: its threads' last counters are read first
                        ended = time.perf_counter() - started
                        sampler.sample(ended)
                        _, wait_status, rusage = os.wait4(proc.pid, 0)
                        break
                else:  # pragma: no cover - no waitid (not Linux)
                    pid, wait_status, rusage = os.wait4(proc.pid, os.WNOHANG)
                    if pid == proc.pid:
                        break
                now = time.perf_counter()
                if now >= next_sample:
                    sampler.sample(now - started)
                    next_sample += spec.interval_s
                if spec.timeout_s is not None and now - started > spec.timeout_s:
                    status = "timeout"
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal_module.SIGKILL)
                    _, wait_status, rusage = os.wait4(proc.pid, 0)
                    break
                time.sleep(min(0.005, max(0.0, next_sample - time.perf_counter())))
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal_module.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.wait4(proc.pid, 0)
            raise
        finally:
            if gpus is not None:
                gpus.close()
        wall_s = time.perf_counter() - started if ended is None else ended
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        # the program's own process group may still hold children it did not wait for
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal_module.SIGKILL)
        if ended is None:
            sampler.sample(wall_s)
        stdout, stderr = _tail(out), _tail(err)
    cpu_s = float(rusage.ru_utime + rusage.ru_stime)
    exit_code: int | None = None
    killed_by: int | None = None
    if os.WIFSIGNALED(wait_status):
        killed_by = os.WTERMSIG(wait_status)
        if status == "ok":
            status = "signal"
    else:
        exit_code = os.WEXITSTATUS(wait_status)
        if status == "ok" and exit_code != 0:
            status = "exit"
    metric = find_metric(spec.metric, stdout + "\n" + stderr)
    if status == "ok" and spec.metric is not None and metric is None:
        status = "no_metric"
    return ProgramRun(
        index=index,
        warmup=warmup,
        status=status,
        wall_s=wall_s,
        exit_code=exit_code,
        signal=killed_by,
        user_s=float(rusage.ru_utime),
        system_s=float(rusage.ru_stime),
        max_rss_bytes=float(rusage.ru_maxrss) * 1024.0,  # Linux reports KiB
        metric_value=metric,
        stderr_tail=tuple(stderr.splitlines()[-STDERR_TAIL_LINES:]),
        series=sampler.series(spec.interval_s, cpu_s),
    )


class _RunFailed(Exception):
    pass


def measure_program(
    spec: ProgramSpec,
    *,
    name: str,
    repeats: int,
    warmup: int,
    target_ci: float,
    max_time_s: float,
    environment: Any,
    on_progress: Callable[[Progress], None] | None = None,
    runner: Callable[..., ProgramRun] = run_once,
    cpu_clock_ghz: float | None = None,
    threads_per_core: int = 1,
) -> ProgramMeasurement:
    """Warm-up runs, then measured runs until the harness's rule stops (at least
    ``repeats``, the CI within ``target_ci`` or ``max_time_s`` spent); a failed run stops it.
    ``warmup`` 0 runs none; ``runner`` is injectable (tests)."""
    runs: list[ProgramRun] = []
    notes: list[str] = []
    stop: ProgramStop = "failed"

    def one(is_warmup: bool) -> float:
        run = runner(spec, index=len(runs), warmup=is_warmup)
        runs.append(run)
        if not run.ok:
            raise _RunFailed
        return run.wall_s

    def step() -> float:
        return one(False)

    try:
        if repeats == 1:
            for _ in range(warmup):
                one(True)
            step()
            stop = "sample_cap"
        else:
            # run_adaptive always starts with one warm-up run: it is the last of ``warmup``,
            # or, with ``warmup`` 0, a measured run (marked below).
            for _ in range(max(0, warmup - 1)):
                one(True)
            raw = run_adaptive(
                step,
                StoppingRule(
                    target_ci=target_ci,
                    max_time_s=max_time_s,
                    min_samples=max(2, repeats - (1 if warmup == 0 else 0)),
                    max_samples=max(repeats, 10_000),
                    warmup_window=1,
                    max_warmup_steps=1,
                    cut_text="--repeats {n}",
                ),
                timer=_own_time,
                on_progress=on_progress,
            )
            stop = raw.stop_reason
    except _RunFailed:
        stop = "failed"
    first = max(0, warmup - 1)  # where run_adaptive's warm-up run is
    if repeats > 1 and warmup > 0 and len(runs) > first:
        runs[first] = dataclasses.replace(runs[first], warmup=True)
    if stop == "time_budget":
        notes.append(
            f"the time budget ({max_time_s:g} s) ran out before the CI reached "
            f"±{target_ci:.0%}: raise --max-time-s for a tighter interval"
        )
    return ProgramMeasurement(
        name=name,
        command=spec.command,
        n_cores=len(spec.cpus) if spec.cpus else len(os.sched_getaffinity(0)),
        cores=tuple(sorted(spec.cpus)),
        runs=tuple(runs),
        stop_reason=stop,
        metric_pattern=None if spec.metric is None else spec.metric.pattern,
        timeout_s=spec.timeout_s,
        target_ci=target_ci,
        environment=environment,
        created_at=datetime.now(UTC),
        warnings=tuple(notes),
        cpu_clock_ghz=cpu_clock_ghz,
        threads_per_core=threads_per_core,
    )


def host_cpu() -> tuple[float | None, int]:
    """This machine's CPU clock in GHz (psutil.cpu_freq: the maximum where the OS reports one,
    else the current) and its hardware threads per core (logical / physical CPUs)."""
    psutil = _import_psutil()
    clock: float | None = None
    with contextlib.suppress(Exception):
        freq = psutil.cpu_freq()
        if freq is not None:
            mhz = float(freq.max) if freq.max else float(freq.current)
            clock = mhz / 1000.0 if mhz > 0 else None
    logical = psutil.cpu_count(logical=True) or 1
    physical = psutil.cpu_count(logical=False) or logical
    return clock, max(1, round(logical / physical))


def _own_time(step: Callable[[], object]) -> float:
    """The harness's timer: the run's own wall time (measured around the process)."""
    value = step()
    assert isinstance(value, float)
    return value
