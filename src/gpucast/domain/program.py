"""A measured run of any program (``gpucast measure cmd``), as frozen values that keep the raw
samples.

:class:`ResourceSeries` is what the sampler saw over one run of the program, every
``interval_s``: the CPU the program's process tree used (in cores), the machine's per-core
utilisation, the tree's resident memory, its cumulative disk and character I/O, the machine's
cumulative network bytes and, where NVML is present, the GPUs' utilisation, memory and power.
:class:`ProgramRun` is one run (status, exit code or signal, wall and CPU time, the work
metric, the stderr tail). :class:`ProgramMeasurement` is the whole measurement: every run, the
statistics of the measured runs' wall times, the machine description and the stop reason.
Statistics are derived from the samples in ``__post_init__``, never passed in. No I/O here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.measurement import EnvironmentFingerprint, ci_relative_halfwidth

#: How one run of a program ended.
RunStatus = Literal["ok", "exit", "signal", "timeout", "no_metric"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
#: Why a program measurement stopped: the harness's stopping rule, or a failed run.
ProgramStop = Literal["ci_reached", "time_budget", "sample_cap", "failed"]

#: Bump when the dict form of a program measurement changes shape.
PROGRAM_SCHEMA_VERSION = 1
#: The stderr lines kept per run.
STDERR_TAIL_LINES = 20


def metric_name(pattern: str) -> str:
    """The name of a work metric: the literal text before the regex's first group, without
    trailing ``=``/``:``/blanks (``'tx/s=(\\d+)'`` -> ``tx/s``); ``metric`` when there is none."""
    head = pattern.split("(", 1)[0]
    head = re.sub(r"\\(.)", r"\1", head).rstrip(" =:\t")
    return head.strip() or "metric"


def metric_is_rate(name: str) -> bool:
    """A metric whose name ends in ``/s`` (``tx/s``) is a rate: work units per second. Any
    other metric counts the work units one run does (``proofs``, ``MB``)."""
    return name.replace(" ", "").lower().endswith(("/s", "/sec", "persecond", "per_s"))


#: the fix of a bad ``--metric``: a pattern with one group around the number
_METRIC_FIX = r"e.g. --metric 'tx/s=(\d+\.?\d*)'"


def check_metric_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled metric regex; it must compile and have a capture group."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise InvalidSpecError(
            "metric", f"is not a valid regular expression ({exc})", got=pattern, fix=_METRIC_FIX
        ) from None
    if compiled.groups < 1:
        raise InvalidSpecError(
            "metric", "needs a capture group around the number", got=pattern, fix=_METRIC_FIX
        )
    return compiled


def _floats(values: Sequence[Any]) -> tuple[float, ...]:
    return tuple(float("nan") if v is None else float(v) for v in values)


def _opt_floats(values: Sequence[Any] | None) -> tuple[float, ...] | None:
    return None if values is None else _floats(values)


def _json_floats(values: Sequence[float] | None) -> list[float | None] | None:
    if values is None:
        return None
    return [v if math.isfinite(v) else None for v in values]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSeries:
    """Samples every ``interval_s`` over one run; every sequence has one value per ``t_s``.

    ``cpu_cores`` is the CPU time the process tree used in the interval ending at each sample,
    in cores (1.0 = one core busy); ``cpu_wait_cores`` the time its processes were runnable but
    waited for a CPU (Linux schedstat; other load on the machine), in cores;
    ``active_threads`` the threads that ran in the interval; ``runnable_tasks`` the tasks
    runnable on the whole machine at the sample (Linux ``procs_running``, the sampler's own
    thread and the program's included). ``core_util_pct`` is the
    machine's utilisation per core (other load included). Byte counters are cumulative from
    the run's start: ``read_bytes`` / ``write_bytes`` reached the storage device,
    ``read_chars`` / ``write_chars`` went through read/write calls (page cache included);
    ``net_*`` are machine-wide. GPU series are ``None`` without NVML. ``contention_s`` is
    cumulative too: the wall-clock seconds the program lost to *other* tasks holding the CPUs
    it would have had on a dedicated machine (per thread from schedstat; see
    :func:`gpucast.measure.program.contention_s`); ``()`` in runs stored before it existed.
    """

    interval_s: float
    t_s: tuple[float, ...]
    cpu_cores: tuple[float, ...]
    rss_bytes: tuple[float, ...]
    read_bytes: tuple[float, ...]
    write_bytes: tuple[float, ...]
    read_chars: tuple[float, ...]
    write_chars: tuple[float, ...]
    net_sent_bytes: tuple[float, ...]
    net_recv_bytes: tuple[float, ...]
    active_threads: tuple[float, ...] = ()
    cpu_wait_cores: tuple[float, ...] = ()
    runnable_tasks: tuple[float, ...] = ()
    contention_s: tuple[float, ...] = ()
    core_util_pct: tuple[tuple[float, ...], ...] = ()
    gpu_util_pct: tuple[float, ...] | None = None
    gpu_memory_bytes: tuple[float, ...] | None = None
    gpu_power_w: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.t_s)
        for name in (
            "cpu_cores", "rss_bytes", "read_bytes", "write_bytes", "read_chars", "write_chars",
            "net_sent_bytes", "net_recv_bytes", "active_threads", "cpu_wait_cores",
            "runnable_tasks", "contention_s", "gpu_util_pct", "gpu_memory_bytes", "gpu_power_w",
        ):  # fmt: skip
            values = getattr(self, name)
            if (
                values is not None
                and (
                    values
                    or name
                    not in ("active_threads", "cpu_wait_cores", "runnable_tasks", "contention_s")
                )
                and len(values) != n
            ):
                raise InvalidSpecError(
                    name, f"must have one value per sample ({n})", got=len(values)
                )
        if self.core_util_pct and len(self.core_util_pct) != n:
            raise InvalidSpecError("core_util_pct", f"must have one row per sample ({n})")
        if not (math.isfinite(self.interval_s) and self.interval_s > 0):
            raise InvalidSpecError("interval_s", "must be > 0", got=self.interval_s)

    @property
    def n_samples(self) -> int:
        return len(self.t_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval_s": self.interval_s,
            "t_s": list(self.t_s),
            "cpu_cores": _json_floats(self.cpu_cores),
            "rss_bytes": _json_floats(self.rss_bytes),
            "read_bytes": _json_floats(self.read_bytes),
            "write_bytes": _json_floats(self.write_bytes),
            "read_chars": _json_floats(self.read_chars),
            "write_chars": _json_floats(self.write_chars),
            "net_sent_bytes": _json_floats(self.net_sent_bytes),
            "net_recv_bytes": _json_floats(self.net_recv_bytes),
            "active_threads": _json_floats(self.active_threads),
            "cpu_wait_cores": _json_floats(self.cpu_wait_cores),
            "runnable_tasks": _json_floats(self.runnable_tasks),
            "contention_s": _json_floats(self.contention_s),
            "core_util_pct": [list(row) for row in self.core_util_pct],
            "gpu_util_pct": _json_floats(self.gpu_util_pct),
            "gpu_memory_bytes": _json_floats(self.gpu_memory_bytes),
            "gpu_power_w": _json_floats(self.gpu_power_w),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResourceSeries:
        return cls(
            interval_s=float(data["interval_s"]),
            t_s=_floats(data["t_s"]),
            cpu_cores=_floats(data["cpu_cores"]),
            rss_bytes=_floats(data["rss_bytes"]),
            read_bytes=_floats(data["read_bytes"]),
            write_bytes=_floats(data["write_bytes"]),
            read_chars=_floats(data["read_chars"]),
            write_chars=_floats(data["write_chars"]),
            net_sent_bytes=_floats(data["net_sent_bytes"]),
            net_recv_bytes=_floats(data["net_recv_bytes"]),
            active_threads=_floats(data.get("active_threads") or ()),
            cpu_wait_cores=_floats(data.get("cpu_wait_cores") or ()),
            runnable_tasks=_floats(data.get("runnable_tasks") or ()),
            contention_s=_floats(data.get("contention_s") or ()),
            core_util_pct=tuple(_floats(row) for row in data.get("core_util_pct") or ()),
            gpu_util_pct=_opt_floats(data.get("gpu_util_pct")),
            gpu_memory_bytes=_opt_floats(data.get("gpu_memory_bytes")),
            gpu_power_w=_opt_floats(data.get("gpu_power_w")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramRun:
    """One run of the program: how it ended, its times, its metric and its resource series.

    ``user_s``/``system_s`` are the CPU seconds of the program and every child it waited for
    (``wait4``'s rusage); ``max_rss_bytes`` the largest resident set among them.
    :attr:`dedicated_s` is the wall time less what other tasks on the machine cost it.
    """

    index: int
    warmup: bool
    status: RunStatus
    wall_s: float
    exit_code: int | None = None
    signal: int | None = None
    user_s: float = 0.0
    system_s: float = 0.0
    max_rss_bytes: float = 0.0
    metric_value: float | None = None
    stderr_tail: tuple[str, ...] = ()
    series: ResourceSeries | None = None

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise InvalidSpecError(
                "status", f"must be one of {', '.join(RUN_STATUSES)}", got=self.status
            )
        if not (math.isfinite(self.wall_s) and self.wall_s >= 0):
            raise InvalidSpecError("wall_s", "must be a finite number >= 0", got=self.wall_s)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s

    @property
    def contention_s(self) -> float | None:
        """Wall seconds lost to other tasks (the series' last cumulative value), or ``None``
        for a run stored without it."""
        if self.series is None or not self.series.contention_s:
            return None
        lost = self.series.contention_s[-1]
        return float(lost) if math.isfinite(lost) else None

    @property
    def dedicated_s(self) -> float | None:
        """The dedicated-equivalent run time: the wall time less :attr:`contention_s` (what
        the run would have taken with its cores to itself), or ``None`` without it."""
        lost = self.contention_s
        return None if lost is None else max(0.0, self.wall_s - lost)

    def failure(self, *, timeout_s: float | None = None, metric: str | None = None) -> str:
        """How the run failed, in a few words, with the last stderr line ('' when ok)."""
        if self.status == "ok":
            return ""
        if self.status == "exit":
            what = f"exited with code {self.exit_code}"
        elif self.status == "signal":
            what = f"was killed by signal {self.signal}"
        elif self.status == "timeout":
            limit = "" if timeout_s is None else f" of {timeout_s:g} s"
            what = f"ran past the timeout{limit} and was killed"
        else:
            # quoted as typed: repr would double a pattern's backslashes ('x=(\\d+)')
            what = f"never printed the metric '{metric}'" if metric else "printed no metric"
        last = next((line for line in reversed(self.stderr_tail) if line.strip()), "")
        return what + (f" (stderr: {last.strip()[:200]})" if last else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "warmup": self.warmup,
            "status": self.status,
            "wall_s": self.wall_s,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "user_s": self.user_s,
            "system_s": self.system_s,
            "max_rss_bytes": self.max_rss_bytes,
            "metric_value": self.metric_value,
            "stderr_tail": list(self.stderr_tail),
            "contention_s": self.contention_s,
            "dedicated_s": self.dedicated_s,
            "series": None if self.series is None else self.series.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProgramRun:
        series = data.get("series")
        metric = data.get("metric_value")
        return cls(
            index=int(data["index"]),
            warmup=bool(data["warmup"]),
            status=data["status"],
            wall_s=float(data["wall_s"]),
            exit_code=data.get("exit_code"),
            signal=data.get("signal"),
            user_s=float(data.get("user_s", 0.0)),
            system_s=float(data.get("system_s", 0.0)),
            max_rss_bytes=float(data.get("max_rss_bytes", 0.0)),
            metric_value=None if metric is None else float(metric),
            stderr_tail=tuple(str(s) for s in data.get("stderr_tail", ())),
            series=None if series is None else ResourceSeries.from_dict(series),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramMeasurement:
    """Every run of one program on this machine, with the statistics of the measured runs.

    Inputs: ``name`` (a label, by default the program's file name), ``command`` (argv),
    ``cores`` (the CPU ids the runs were pinned to; ``()``: not pinned, ``n_cores`` is then
    every CPU the process may use), ``runs`` (warm-up and measured, in order, the last one
    possibly failed), ``stop_reason``, ``metric_pattern``, ``timeout_s``, ``target_ci``,
    ``environment``, ``created_at`` and the harness's ``warnings``.

    Derived from the measured ``ok`` runs: ``n_samples``, ``median_s``, ``mean_s``, ``p5_s``,
    ``p95_s``, ``ci_halfwidth_rel`` (Student-t, ``inf`` below 2 runs), ``metric_median``
    and ``work_per_s`` (the metric for a rate; metric / wall time for a count; runs per
    second without a metric); ``dedicated_median_s`` the median dedicated-equivalent run
    time (:attr:`ProgramRun.dedicated_s`; ``None`` when a measured run lacks it) and
    ``contention_share`` the share of the measured wall time lost to other tasks.
    """

    name: str
    command: tuple[str, ...]
    n_cores: int
    runs: tuple[ProgramRun, ...]
    stop_reason: ProgramStop
    environment: EnvironmentFingerprint
    created_at: datetime
    cores: tuple[int, ...] = ()
    metric_pattern: str | None = None
    timeout_s: float | None = None
    target_ci: float = 0.05
    confidence: float = 0.95
    warnings: tuple[str, ...] = ()
    #: the host's CPU clock (psutil.cpu_freq: max, else current) and hardware threads per core
    cpu_clock_ghz: float | None = None
    threads_per_core: int = 1

    n_samples: int = field(init=False)
    median_s: float | None = field(init=False)
    mean_s: float | None = field(init=False)
    p5_s: float | None = field(init=False)
    p95_s: float | None = field(init=False)
    ci_halfwidth_rel: float | None = field(init=False)
    metric_median: float | None = field(init=False)
    work_per_s: float | None = field(init=False)
    dedicated_median_s: float | None = field(init=False)
    contention_share: float | None = field(init=False)

    def __post_init__(self) -> None:
        if not self.command or not self.command[0]:
            raise InvalidSpecError("command", "must name a program", fix="e.g. -- gzip -k file")
        if self.stop_reason not in get_args(ProgramStop):
            raise InvalidSpecError(
                "stop_reason",
                f"must be one of {', '.join(get_args(ProgramStop))}",
                got=self.stop_reason,
            )
        if isinstance(self.n_cores, bool) or self.n_cores < 1:
            raise InvalidSpecError("n_cores", "must be >= 1", got=self.n_cores)
        if self.created_at.tzinfo is None:
            raise InvalidSpecError("created_at", "must be timezone-aware")
        set_ = object.__setattr__
        measured = [r for r in self.runs if not r.warmup and r.ok]
        times = np.asarray([r.wall_s for r in measured], dtype=np.float64)
        set_(self, "n_samples", int(times.size))
        if times.size == 0:
            for name in (
                "median_s", "mean_s", "p5_s", "p95_s", "ci_halfwidth_rel", "metric_median",
                "work_per_s", "dedicated_median_s", "contention_share",
            ):  # fmt: skip
                set_(self, name, None)
            return
        p5, p50, p95 = (float(v) for v in np.percentile(times, [5, 50, 95]))
        mean = float(times.mean())
        std = float(times.std(ddof=1)) if times.size > 1 else 0.0
        set_(self, "median_s", p50)
        set_(self, "mean_s", mean)
        set_(self, "p5_s", p5)
        set_(self, "p95_s", p95)
        set_(
            self, "ci_halfwidth_rel", ci_relative_halfwidth(mean, std, times.size, self.confidence)
        )
        values = [r.metric_value for r in measured if r.metric_value is not None]
        metric = float(np.median(values)) if values else None
        set_(self, "metric_median", metric)
        if metric is None:
            work = 1.0 / p50 if p50 > 0 else None
        elif self.metric_is_rate:
            work = metric
        else:
            work = metric / p50 if p50 > 0 else None
        set_(self, "work_per_s", work)
        dedicated = [r.dedicated_s for r in measured]
        if all(d is not None for d in dedicated):
            kept = np.asarray(dedicated, dtype=np.float64)
            set_(self, "dedicated_median_s", float(np.median(kept)))
            set_(self, "contention_share", float(1.0 - kept.sum() / max(times.sum(), 1e-12)))
        else:
            set_(self, "dedicated_median_s", None)
            set_(self, "contention_share", None)

    @property
    def metric_name(self) -> str | None:
        return None if self.metric_pattern is None else metric_name(self.metric_pattern)

    @property
    def metric_is_rate(self) -> bool:
        name = self.metric_name
        return name is not None and metric_is_rate(name)

    @property
    def work_unit(self) -> str:
        """What one unit of work is: the metric's unit (``tx``), else one run."""
        name = self.metric_name
        if name is None:
            return "run"
        return name.rsplit("/", 1)[0].strip() or name if self.metric_is_rate else name

    @property
    def failed_run(self) -> ProgramRun | None:
        return next((r for r in self.runs if not r.ok), None)

    @property
    def status(self) -> str:
        return "failed" if self.failed_run is not None else "ok"

    @property
    def measured_runs(self) -> tuple[ProgramRun, ...]:
        return tuple(r for r in self.runs if not r.warmup and r.ok)

    def failure(self) -> str:
        run = self.failed_run
        if run is None:
            return ""
        return run.failure(timeout_s=self.timeout_s, metric=self.metric_pattern)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": PROGRAM_SCHEMA_VERSION,
            "name": self.name,
            "command": list(self.command),
            "n_cores": self.n_cores,
            "cores": list(self.cores),
            "status": self.status,
            "failure": self.failure() or None,
            "stop_reason": self.stop_reason,
            "metric_pattern": self.metric_pattern,
            "metric_name": self.metric_name,
            "metric_is_rate": self.metric_is_rate,
            "work_unit": self.work_unit,
            "timeout_s": self.timeout_s,
            "target_ci": self.target_ci,
            "confidence": self.confidence,
            "n_samples": self.n_samples,
            "median_s": self.median_s,
            "mean_s": self.mean_s,
            "p5_s": self.p5_s,
            "p95_s": self.p95_s,
            "ci_halfwidth_rel": None
            if self.ci_halfwidth_rel is None or not math.isfinite(self.ci_halfwidth_rel)
            else self.ci_halfwidth_rel,
            "metric_median": self.metric_median,
            "work_per_s": self.work_per_s,
            "dedicated_median_s": self.dedicated_median_s,
            "contention_share": self.contention_share,
            "environment": self.environment.to_dict(),
            "cpu_clock_ghz": self.cpu_clock_ghz,
            "threads_per_core": self.threads_per_core,
            "created_at": self.created_at.isoformat(),
            "warnings": list(self.warnings),
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProgramMeasurement:
        version = data.get("schema_version")
        if version != PROGRAM_SCHEMA_VERSION:
            raise InvalidSpecError(
                "schema_version",
                f"must be {PROGRAM_SCHEMA_VERSION} (a program measurement of another gpucast)",
                got=version,
            )
        timeout = data.get("timeout_s")
        clock = data.get("cpu_clock_ghz")
        return cls(
            cpu_clock_ghz=None if clock is None else float(clock),
            threads_per_core=int(data.get("threads_per_core", 1)),
            name=str(data["name"]),
            command=tuple(str(a) for a in data["command"]),
            n_cores=int(data["n_cores"]),
            cores=tuple(int(c) for c in data.get("cores", ())),
            runs=tuple(ProgramRun.from_dict(r) for r in data["runs"]),
            stop_reason=data["stop_reason"],
            metric_pattern=data.get("metric_pattern"),
            timeout_s=None if timeout is None else float(timeout),
            target_ci=float(data.get("target_ci", 0.05)),
            confidence=float(data.get("confidence", 0.95)),
            environment=EnvironmentFingerprint.from_dict(data["environment"]),
            created_at=datetime.fromisoformat(data["created_at"]),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
        )


#: The throughput a second hardware thread of a core adds to the first (SMT): a documented
#: prior (Intel quotes up to 30% for Hyper-Threading; 25% is taken), used to turn vCPUs into
#: the cores a CPU-bound program sees.
SMT_GAIN = 0.25


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuInstance:
    """A CPU server type of the catalog (``catalog/data/cpu_instances.csv``)."""

    provider: str
    region: str
    instance_type: str
    arch: str
    cpu: str
    vcpus: int
    threads_per_core: int
    clock_ghz: float
    memory_gib: float
    memory_bandwidth_gbs: float
    disk_mb_per_s: float
    on_demand_usd_per_hour: float
    source_url: str
    as_of: str
    note: str = ""

    def __post_init__(self) -> None:
        for name in (
            "clock_ghz", "memory_gib", "memory_bandwidth_gbs", "disk_mb_per_s",
            "on_demand_usd_per_hour",
        ):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a finite number > 0", got=value)
        if self.vcpus < 1 or self.threads_per_core < 1 or self.vcpus % self.threads_per_core:
            raise InvalidSpecError(
                "vcpus", "must be a positive multiple of threads_per_core", got=self.vcpus
            )

    @property
    def effective_cores(self) -> float:
        """Cores as a CPU-bound program sees them: physical cores, plus :data:`SMT_GAIN` of a
        core per extra hardware thread."""
        physical = self.vcpus / self.threads_per_core
        return physical * (1.0 + SMT_GAIN * (self.threads_per_core - 1))

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "region": self.region,
            "instance_type": self.instance_type,
            "arch": self.arch,
            "cpu": self.cpu,
            "vcpus": self.vcpus,
            "threads_per_core": self.threads_per_core,
            "effective_cores": self.effective_cores,
            "clock_ghz": self.clock_ghz,
            "memory_gib": self.memory_gib,
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
            "disk_mb_per_s": self.disk_mb_per_s,
            "on_demand_usd_per_hour": self.on_demand_usd_per_hour,
            "source_url": self.source_url,
            "as_of": self.as_of,
        }
