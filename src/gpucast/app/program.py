"""``gpucast.measure_cmd``: measure any program here and store it, with its resource profile.

``measure_cmd(command=["gzip", "-k", "-f", "data.bin"], repeats=5, cores=1)`` runs the program
through :mod:`gpucast.measure.program` (warm-up, measured runs until the harness's stopping
rule, psutil and NVML sampling, the work metric from its output), characterises it
(:func:`gpucast.predict.program.characterise`) and saves both in the store as a run of kind
``program``. Bad input (an empty or missing command, a metric regex without a group, more
cores than this machine lets us use) fails before anything runs or is stored. A run that
fails (non-zero exit, a signal, the timeout, the metric never printed) ends the measurement;
it is stored as failed, with its stderr tail, and the verb raises :class:`ProgramFailedError`
(exit code 2 when no run succeeded) naming the run id.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidInputError, InvalidSpecError, MeasurementError
from gpucast.domain.options import documented, option
from gpucast.domain.provenance import Assumption
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpucast.domain.program import ProgramMeasurement
    from gpucast.measure.harness import Progress


class ProgramFailedError(InvalidInputError):
    """Every run of the program failed: nothing was measured (stored as a failed run)."""


class ProgramPartlyFailedError(MeasurementError):
    """A run failed after others had succeeded: stored as failed, with the good runs."""


def _argv(value: Any) -> tuple[str, ...]:
    """The program and its arguments as given: a sequence is kept word for word (no comma
    splitting), a text is one word."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def _number_or_none(flag: str, kind: type) -> Any:
    """A parser of ``flag``: ``none`` (any case) or a number of ``kind``, else one line."""

    def parse(value: Any) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "")):
            return None
        if isinstance(value, bool):
            raise InvalidSpecError(flag, "must be a number or none", got=value)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidSpecError(flag, "must be a number or none", got=value) from None
        if kind is int:
            if not (math.isfinite(number) and number.is_integer()):
                raise InvalidSpecError(flag, "must be a whole number or none", got=value)
            return int(number)
        return number

    return parse


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureCmdRequest:
    """A program to run and measure (``gpucast measure cmd -- PROGRAM ARGS``)."""

    VERB: ClassVar[str] = "measure cmd"

    command: tuple[str, ...] = option(
        help="The program and its arguments, after `--`.",
        argument=True,
        parse=_argv,
        metavar="PROGRAM [ARGS]...",
        example="gzip -k -f data.bin",
    )
    repeats: int = option(
        5, help="Measured runs at least (more until the CI target or --max-time-s).", example="5"
    )
    warmup: int = option(1, help="Warm-up runs before the measured ones (>= 0).", example="1")
    timeout_s: float | None = option(
        None,
        flag="timeout",
        parse=_number_or_none("timeout", float),
        help="Kill a run after this many seconds (stored as a failed run).",
        example="600",
    )
    metric: str | None = option(
        None,
        help="Regex whose first group is the work metric in the program's output; a name "
        "ending in /s is a rate (units per second), else the units one run does.",
        example=r"'tx/s=(\d+\.?\d*)'",
    )
    cores: int | None = option(
        None,
        parse=_number_or_none("cores", int),
        help="Pin every run to this many CPUs (os.sched_setaffinity); default: not pinned.",
        example="2",
    )
    name: str | None = option(
        None, help="A label for the run (default: the program's file name).", example="gzip"
    )
    target_ci: float = option(
        0.05,
        help="Stop when the 95% CI half-width of the mean run time is within this share.",
        example="0.05",
    )
    max_time_s: float = option(
        300.0,
        help="Wall-clock budget for measured runs (at least --repeats runs always run).",
        example="300",
    )
    sample_interval_s: float = option(
        0.1, flag="sample-interval", help="Seconds between resource samples.", example="0.1"
    )
    save: bool = option(
        True, negative="no-save", help="Write the result to the store (--no-save: do not)."
    )

    def __post_init__(self) -> None:
        if not self.command or not self.command[0].strip():
            raise InvalidSpecError(
                "command", "is required", fix="put the program after --: measure cmd -- gzip f"
            )
        for field, value, low in (("repeats", self.repeats, 1), ("warmup", self.warmup, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidSpecError(
                    field, f"must be an integer >= {low}", got=value, fix=f"e.g. --{field} 5"
                )
        if self.repeats > 10_000:
            raise InvalidSpecError(
                "repeats", "must be <= 10000", got=self.repeats, fix="e.g. --repeats 5"
            )
        if self.warmup > 1000:
            raise InvalidSpecError(
                "warmup", "must be <= 1000", got=self.warmup, fix="e.g. --warmup 1"
            )
        if self.timeout_s is not None and not (
            math.isfinite(self.timeout_s) and 0 < self.timeout_s <= 7 * 86400
        ):
            raise InvalidSpecError(
                "timeout",
                "must be seconds in (0, 604800]",
                got=self.timeout_s,
                fix="e.g. --timeout 600",
            )
        if self.metric is not None:
            from gpucast.domain.program import check_metric_pattern

            check_metric_pattern(self.metric)
        if self.cores is not None and (isinstance(self.cores, bool) or self.cores < 1):
            raise InvalidSpecError(
                "cores", "must be an integer >= 1", got=self.cores,
                fix="e.g. --cores 2, or leave it out (every core)",
            )  # fmt: skip
        if not (math.isfinite(self.target_ci) and 0 < self.target_ci <= 1):
            raise InvalidSpecError(
                "target-ci", "must be in (0, 1] (a share of the mean)", got=self.target_ci,
                fix="e.g. --target-ci 0.05 (the 95% interval within 5% of the mean)",
            )  # fmt: skip
        if not (math.isfinite(self.max_time_s) and 0 < self.max_time_s <= 30 * 86400):
            raise InvalidSpecError(
                "max-time-s", "must be in (0, 2592000]", got=self.max_time_s,
                fix="e.g. --max-time-s 300",
            )  # fmt: skip
        if not (math.isfinite(self.sample_interval_s) and 0.01 <= self.sample_interval_s <= 60):
            raise InvalidSpecError(
                "sample-interval", "must be in [0.01, 60] seconds", got=self.sample_interval_s,
                fix="e.g. --sample-interval 0.1",
            )  # fmt: skip
        if self.name is not None and not self.name.strip():
            raise InvalidSpecError("name", "must not be empty", fix="e.g. --name gzip")

    @property
    def label(self) -> str:
        return self.name.strip() if self.name else Path(self.command[0]).name


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureCmdResult:
    """The measurement, its profile (``None`` without samples) and, when saved, its run id."""

    measurement: ProgramMeasurement
    profile: dict[str, Any] | None
    run_id: int | None
    db: Path | None
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**program_result(self.measurement, self.profile), "run_id": self.run_id}


def program_result(m: ProgramMeasurement, profile: dict[str, Any] | None) -> dict[str, Any]:
    """What the store keeps for a program run (and ``--json`` prints)."""
    return {**m.to_dict(), "profile": profile}


def _check_command(command: tuple[str, ...]) -> None:
    program = command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise InvalidSpecError(
                "command",
                f"{program!r} is not an executable file",
                fix="check the path, or chmod +x it",
            )
    elif shutil.which(program) is None:
        raise InvalidSpecError(
            "command",
            f"{program!r} was not found on PATH",
            fix="check the spelling, or give the program's path",
        )


def _cpus(cores: int | None) -> tuple[int, ...]:
    if cores is None:
        return ()
    allowed = sorted(os.sched_getaffinity(0))
    if cores > len(allowed):
        raise InvalidSpecError(
            "cores",
            f"must be at most the {len(allowed)} CPU(s) this process may use",
            got=cores,
            fix=f"e.g. --cores {len(allowed)}",
        )
    return tuple(allowed[:cores])


def measure_cmd(
    request: MeasureCmdRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    **options: Any,
) -> MeasureCmdResult:
    """Run a program ``repeats`` times or more, sample its resource use, store the result."""
    import re

    from gpucast.measure.environment import fingerprint
    from gpucast.measure.program import ProgramSpec, host_cpu, measure_program
    from gpucast.predict.program import characterise
    from gpucast.store import Store, default_db_path
    from gpucast.store.db import new_store

    request = resolve(MeasureCmdRequest, request, options)
    _check_command(request.command)
    cpus = _cpus(request.cores)
    db_path = Path(db) if db is not None else default_db_path()
    store = Store(db_path).open() if request.save else None  # a bad db fails before running
    try:
        import torch

        spec = ProgramSpec(
            command=request.command,
            cpus=cpus,
            timeout_s=request.timeout_s,
            metric=None if request.metric is None else re.compile(request.metric),
            interval_s=request.sample_interval_s,
        )
        clock, threads_per_core = host_cpu()
        measurement = measure_program(
            spec,
            name=request.label,
            repeats=request.repeats,
            warmup=request.warmup,
            target_ci=request.target_ci,
            max_time_s=request.max_time_s,
            environment=fingerprint(torch.device("cpu")),
            on_progress=on_progress,
            cpu_clock_ghz=clock,
            threads_per_core=threads_per_core,
        )
        found = characterise(measurement)
        profile = None if found is None else found.to_dict()
        run_id = (
            None
            if store is None
            else store.save_program(measurement, program_result(measurement, profile))
        )
    finally:
        if store is not None:
            store.close()
    if measurement.failed_run is not None:
        where = f"; stored as failed run {run_id}" if run_id is not None else ""
        text = f"command {request.label!r}: a run {measurement.failure()}{where}"
        fix = (
            f"see `gpucast runs show {run_id}` for the stderr tail"
            if run_id is not None
            else "run it by hand to see its output"
        )
        if measurement.n_samples == 0:
            raise ProgramFailedError(text, fix=fix)
        raise ProgramPartlyFailedError(
            text + f" after {count_of(measurement.n_samples, 'good measured run')}", fix=fix
        )
    return MeasureCmdResult(
        measurement=measurement,
        profile=profile,
        run_id=run_id,
        db=None if store is None else db_path,
        new_store=new_store(store),
    )


# -- predict cmd -----------------------------------------------------------------------------
#: The most a measuring machine's memory may read (GB/s): two 12-channel DDR5 sockets read
#: ~900, a Xeon Max's HBM ~1,000 a socket (the catalog's fastest CPU offer: 460.8); 10,000
#: leaves room for any host, not for 10 PB/s.
MAX_HOST_MEMORY_BANDWIDTH_GBS = 10_000.0
#: The most its disk may give (MB/s): ``plan train``'s NVMe ceiling, 1,000 GB/s a node
#: (:data:`gpucast.domain.plan.MAX_NVME_GBPS`).
MAX_HOST_DISK_MB_PER_S = 1_000_000.0


def _positive_or_none(flag: str, maximum: float, unit: str, example: str) -> Any:
    parse = _number_or_none(flag, float)

    def checked(value: Any) -> float | None:
        number = parse(value)
        if number is not None and not (math.isfinite(number) and 0 < number <= maximum):
            raise InvalidSpecError(
                flag, f"must be a number in (0, {maximum:,.0f}] {unit} or none", got=value,
                fix=f"e.g. --{flag} {example}, or leave it out for the default",
            )  # fmt: skip
        return None if number is None else float(number)

    return checked


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictCmdRequest:
    """Stored program runs to predict from (``gpucast predict cmd RUN_ID...``)."""

    VERB: ClassVar[str] = "predict cmd"

    runs: tuple[int, ...] = option(
        help="Run ids of one program (gpucast measure cmd), on one or more core counts or "
        "machines.",
        argument=True,
        metavar="RUN_ID...",
        example="3",
    )
    instances: tuple[str, ...] = option(
        (), help="Only these CPU instance types of the catalog.", example="c7g.large,c7i.large"
    )
    arch: str | None = option(None, help="Only x86_64 or arm64 instances.", example="arm64")
    host_memory_bandwidth_gbs: float | None = option(
        None,
        parse=_positive_or_none(
            "host-memory-bandwidth-gbs", MAX_HOST_MEMORY_BANDWIDTH_GBS, "GB/s", "100"
        ),
        help="The measuring machine's memory bandwidth (GB/s); default: an assumption shown "
        "with the result.",
        example="100",
    )
    host_disk_mb_per_s: float | None = option(
        None,
        parse=_positive_or_none("host-disk-mb-per-s", MAX_HOST_DISK_MB_PER_S, "MB/s", "500"),
        help="The measuring machine's disk throughput (MB/s); default: the catalog's volume "
        "baseline (I/O time unchanged).",
        example="500",
    )

    def __post_init__(self) -> None:
        if not self.runs:
            raise InvalidSpecError("runs", "needs at least one run id", fix="e.g. predict cmd 3")
        if len(self.runs) > 1000:
            raise InvalidSpecError("runs", "must be at most 1000 run ids", got=len(self.runs))
        for run in self.runs:
            if isinstance(run, bool) or not isinstance(run, int) or run < 1:
                raise InvalidSpecError("runs", "must be run ids >= 1", got=run)
        if self.arch is not None and self.arch not in ("x86_64", "arm64"):
            raise InvalidSpecError(
                "arch", "must be x86_64 or arm64 (the catalog's CPU instances)", got=self.arch,
                fix="e.g. --arch arm64, or leave it out (both)",
            )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramPrediction:
    """One catalog instance: the program's predicted run time, work rate and cost."""

    instance: dict[str, Any]
    run_time_s: float
    work_per_s: float
    usd_per_run: float
    usd_per_unit: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance["instance_type"],
            "provider": self.instance["provider"],
            "region": self.instance["region"],
            "arch": self.instance["arch"],
            "vcpus": self.instance["vcpus"],
            "on_demand_usd_per_hour": self.instance["on_demand_usd_per_hour"],
            "run_time_s": self.run_time_s,
            "work_per_s": self.work_per_s,
            "usd_per_run": self.usd_per_run,
            "usd_per_unit": self.usd_per_unit,
            "source_url": self.instance["source_url"],
            "as_of": self.instance["as_of"],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictCmdResult:
    """Predictions on every chosen instance (cheapest per unit of work first)."""

    program: str
    work_unit: str
    runs: tuple[int, ...]
    measured: tuple[dict[str, Any], ...]
    thread_demand: float | None
    predictions: tuple[ProgramPrediction, ...]
    assumptions: tuple[Assumption, ...]
    validation: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "work_unit": self.work_unit,
            "runs": list(self.runs),
            "measured": list(self.measured),
            "thread_demand": self.thread_demand,
            "predictions": [p.to_dict() for p in self.predictions],
            "assumptions": [a.to_dict() for a in self.assumptions],
            "validation": self.validation,
        }

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([p.to_dict() for p in self.predictions])


def predict_cmd(
    request: PredictCmdRequest | None = None, /, *, db: Path | str | None = None, **options: Any
) -> PredictCmdResult:
    """Predict a measured program's run time and cost per unit of work on catalog CPU
    instances, from its measured bottleneck mix (:mod:`gpucast.predict.program`)."""
    from gpucast.catalog.cpu_instances import cpu_instances
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.program import observation, same_program, target_machine
    from gpucast.predict.program import ProgramModel
    from gpucast.store import Store, default_db_path

    request = resolve(PredictCmdRequest, request, options)
    chosen = cpu_instances(request.instances, arch=request.arch)
    if not chosen:
        raise InvalidSpecError(
            "arch", "leaves no catalog instance", got=request.arch, fix="drop --arch"
        )
    db_path = Path(db) if db is not None else default_db_path()
    with Store(db_path).open(create=False) as store:
        measurements = [store.get_run(run).program() for run in request.runs]
    same_program(measurements)
    observations = []
    measured = []
    notes: dict[str, Assumption] = {}
    for run_id, m in zip(request.runs, measurements, strict=True):
        obs, profile, assumed = observation(
            m,
            memory_bandwidth_gbs=request.host_memory_bandwidth_gbs,
            disk_mb_per_s=request.host_disk_mb_per_s,
        )
        observations.append(obs)
        measured.append(
            {
                "run_id": run_id,
                "machine": obs.machine.to_dict(),
                "median_s": m.median_s,
                "dedicated_median_s": m.dedicated_median_s,
                "contention_share": m.contention_share,
                "observed_s": obs.wall_s,
                "bound_by": profile.bound_by,
                "shares": profile.shares,
                "thread_demand": profile.thread_demand,
            }
        )
        for a in assumed:
            notes.setdefault(a.name, a)
    model = ProgramModel().fit(observations)
    times = model.predict([target_machine(i) for i in chosen])
    first = measurements[0]
    # units of work one run does: the metric for a count, rate x time for a rate, else 1 run
    units = [
        (m.work_per_s or 0.0) * (m.median_s or 0.0) if m.metric_pattern else 1.0
        for m in measurements
    ]
    units_per_run = float(sorted(units)[len(units) // 2]) or 1.0
    predictions = sorted(
        (
            ProgramPrediction(
                instance=inst.to_dict(),
                run_time_s=float(t),
                work_per_s=units_per_run / float(t),
                usd_per_run=inst.on_demand_usd_per_hour * float(t) / 3600.0,
                usd_per_unit=inst.on_demand_usd_per_hour * float(t) / 3600.0 / units_per_run,
            )
            for inst, t in zip(chosen, times, strict=True)
        ),
        key=lambda p: p.usd_per_unit,
    )
    lost = [m.contention_share for m in measurements if m.contention_share is not None]
    if lost:
        notes["dedicated"] = Assumption(
            name="dedicated machine",
            value="run times are for an instance of the program's own; measured from the "
            "runs' dedicated-equivalent time (wall time less the "
            + ", ".join(f"{x:.0%}" for x in lost)
            + " other tasks took, per thread from schedstat)",
            source="gpucast.measure.program.contention_s",
        )
    hosts = sorted({urlsplit(str(i.source_url)).netloc or str(i.source_url) for i in chosen})
    dates = sorted({str(i.as_of) for i in chosen})
    notes["prices"] = Assumption(  # the text output named none (QA 37 V; the JSON has each)
        name="prices",
        value="on-demand US$ per hour of each instance, from the catalog",
        source="catalog/data/cpu_instances.csv: each row's source_url ("
        + ", ".join(hosts)
        + ") as of "
        + (dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"),
    )
    notes["SMT"] = Assumption(
        name="SMT",
        value="a second hardware thread adds 25% of a core",
        source="prior (Intel quotes up to 30% for Hyper-Threading)",
    )
    notes["gpu time"] = Assumption(
        name="GPU and idle time",
        value="carried over unchanged",
        source="the program model scales CPU, memory and I/O time only",
    )
    if model.demand is None:
        notes["thread demand"] = Assumption(
            name="thread demand",
            value="the threads seen busy in each run",
            source="one core count measured; measure at another (--cores) to fit it",
            override="more runs at other --cores",
        )
    check = validation_for("program-model", (), "fp32", 1)
    return PredictCmdResult(
        program=first.name,
        work_unit=first.work_unit,
        runs=request.runs,
        measured=tuple(measured),
        thread_demand=model.demand,
        predictions=tuple(predictions),
        assumptions=tuple(notes.values()),
        validation={
            "model": "program-model",
            "error": check.error,
            "data": check.data,
            "command": check.command,
        },
    )
