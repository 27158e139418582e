"""``gpucast.measure_train`` and ``gpucast.measure_infer``: time steps here, store the result.

A single-process run goes through the adaptive harness (:func:`gpucast.measure.measure`:
warm-up, synchronised timing, stop at the target CI or the time budget) and returns a
:class:`~gpucast.domain.measurement.Measurement`; ``measure_train(distributed="ddp" | "fsdp"
| "ps")`` launches a multi-process run over torch.distributed and returns a
:class:`~gpucast.domain.distributed.DistributedMeasurement`. Either is saved in the store
unless ``save=False``. Every input (numbers, device, workload, the store file itself) is
checked before a model is built or the store is written: bad input creates no file.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import as_flags, documented, fields_of, is_default, lower_text, option
from gpucast.domain.workload import (
    AUTO_PRECISION,
    PRECISIONS,
    TRAIN_PRECISION_DEFAULT,
    Precision,
    WorkloadOptions,
    WorkloadSpec,
    option_text,
    practitioner_precision,
    precision_shown,
    workload_options_field,
)

if TYPE_CHECKING:  # these pull in numpy/torch; annotations only here
    import torch

    from gpucast.domain.distributed import DistributedConfig, DistributedMeasurement
    from gpucast.domain.kernels import KernelTrace
    from gpucast.domain.measurement import Measurement
    from gpucast.measure.energy import PowerLimitControl
    from gpucast.measure.harness import Progress


def _check_number(name: str, value: float, *, low: float, high: float = math.inf) -> None:
    # the bounds of gpucast.measure.harness.StoppingRule (which imports torch)
    if not (math.isfinite(value) and low < value <= high):
        bound = f"> {low:g}" if high == math.inf else f"in ({low:g}, {high:g}]"
        raise InvalidSpecError(name, f"must be {bound}", got=value)


def check_min_samples(value: int) -> None:
    """``--min-samples``: in ``[2, MAX_SAMPLES]`` (a CI needs two steps; the stopping rule
    times at most ``MAX_SAMPLES``)."""
    from gpucast.domain.limits import MAX_SAMPLES

    if isinstance(value, bool) or value < 2:
        raise InvalidSpecError("min_samples", "must be >= 2", got=value)
    if value > MAX_SAMPLES:
        raise InvalidSpecError(
            "min_samples", f"must be <= {MAX_SAMPLES:,} (the most steps one run times)", got=value
        )


def timer_option(what: str) -> Any:
    """``--timer`` of a verb that times CPU steps (``what``: the things it times)."""
    return option(
        "wall",
        help=f"wall, or cpu: time {what} by this process's CPU time, steadier on a shared "
        "machine (--device cpu only; use with --threads 1).",
        example="cpu",
    )


def threads_option() -> Any:
    """``--threads`` of a verb that times CPU steps."""
    return option(
        None, help="torch intra-op threads while measuring (default: torch's).", example="1"
    )


def check_threads_and_timer(threads: int | None, timer: str, device: str) -> None:
    """``--threads`` (1 to this host's cores) and ``--timer`` (wall, or cpu on the CPU only),
    as every verb that times CPU steps takes them."""
    if timer not in ("wall", "cpu"):
        raise InvalidSpecError("timer", "must be wall or cpu", got=timer, fix="e.g. --timer cpu")
    cores = os.cpu_count() or 1
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= cores
    ):
        raise InvalidSpecError(
            "threads", f"must be an integer in [1, {cores}]", got=threads, fix="e.g. --threads 1"
        )
    if timer == "cpu" and device != "cpu":
        raise InvalidSpecError(
            "timer",
            "cpu times the host's CPU time, which a GPU step does not show",
            got=device,
            fix="pass --device cpu, or drop --timer cpu",
        )


def cpu_timer_note(threads: int) -> str:
    """What ``--timer cpu`` makes of a step time, said once per measurement."""
    note = "step times are this process's CPU time (--timer cpu), not wall-clock time"
    if threads > 1:
        note += (
            f", summed over {threads} threads (idle intra-op threads spin and count "
            "too; pass --threads 1 for times comparable to one core's)"
        )
    return note


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class _StepRequest:
    """What both measure verbs take: the workload, where to run it, when to stop."""

    workload: str = option(
        help="A built-in workload name or module:factory.", argument=True, example="mlp"
    )
    workload_options: WorkloadOptions = workload_options_field()
    device: str = option(
        "auto", help="cpu, cuda, cuda:N, or auto (a GPU if any).", example="cuda:0"
    )
    batch_size: int = option(32, help="Samples per step (>= 1).", example="32")
    precision: str = option(
        "fp32",
        parse=lower_text,
        help="fp32, bf16, fp16, or auto: bf16 on a GPU with bf16 units (compute capability "
        "8.0 on), fp32 elsewhere (the CPU included).",
        example="bf16",
    )
    target_ci: float = option(
        0.02,
        help="Stop when the 95% CI half-width is within this share of the mean.",
        example="0.02",
    )
    max_time_s: float = option(
        60.0,
        help="Wall-clock budget, warm-up included (at least --min-samples steps always run).",
        example="60",
    )
    min_samples: int = option(10, help="Measured steps before stopping (>= 2).", example="10")
    save: bool = option(
        True, negative="no-save", help="Write the result to the store (--no-save: do not)."
    )
    timer: str = timer_option("steps (and --kernels operator calls)")
    threads: int | None = threads_option()
    kernels: bool = option(
        False,
        negative="no-kernels",
        help="Also run 3 steps under torch.profiler and store per-operator (CPU) or "
        "per-kernel (GPU) times with their FLOPs, bytes and class (for gpucast predict "
        "kernels).",
    )

    def _check_steps(self) -> None:
        if self.precision not in (*PRECISIONS, AUTO_PRECISION):
            raise InvalidSpecError(
                "precision",
                f"must be one of {', '.join((*PRECISIONS, AUTO_PRECISION))}",
                got=self.precision,
                fix="e.g. --precision bf16 (auto: bf16 on a GPU with bf16 units, else fp32)",
            )
        # WorkloadSpec checks the name and the batch size (auto is chosen on the device)
        _ = self.spec_at("fp32" if self.precision == AUTO_PRECISION else self.precision)
        _check_number("target_ci", self.target_ci, low=0.0, high=1.0)
        _check_number("max_time_s", self.max_time_s, low=0.0)
        check_min_samples(self.min_samples)
        check_threads_and_timer(self.threads, self.timer, self.device)

    def spec_at(self, precision: str) -> WorkloadSpec:
        """The workload measured at ``precision`` (what :meth:`precision_on` chose)."""
        return WorkloadSpec(
            name=self.workload,
            batch_size=self.batch_size,
            precision=cast(Precision, precision),
            options=self.workload_options,
        )

    def precision_on(self, devices: tuple[torch.device, ...]) -> str:
        """The precision the run measures at on ``devices``: as given, or for ``auto`` what
        practitioners use (:func:`~gpucast.domain.workload.practitioner_precision`): bf16
        where every device has bf16 units, else fp32."""
        if self.precision != AUTO_PRECISION:
            return self.precision
        from gpucast.measure.devices import has_bf16_units

        return practitioner_precision(all(has_bf16_units(d) for d in devices))

    def precision_note(self, precision: str, devices: tuple[torch.device, ...]) -> str | None:
        """What chose ``precision`` on ``devices`` where ``auto`` did (``None`` where it was
        given)."""
        if self.precision != AUTO_PRECISION:
            return None
        if precision == "bf16":
            why = "bf16 units on the GPU"
        elif any(d.type == "cpu" for d in devices):
            why = "the CPU (auto picks bf16 on GPUs with bf16 units only)"
        else:
            why = "a GPU without bf16 units (before compute capability 8.0)"
        default = next(f.default for f in fields_of(type(self)) if f.name == "precision")
        return f"{precision_shown(precision, self.precision, default=default)}: {why}"


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureInferRequest(_StepRequest):
    """Inference steps to time (``gpucast measure infer``)."""

    VERB: ClassVar[str] = "measure infer"

    def __post_init__(self) -> None:
        with as_flags(type(self)):  # a domain check's field as the flag typed, with a fix
            self._check()

    def _check(self) -> None:
        self._check_steps()


#: MeasureTrainRequest fields that only a ``--distributed`` run reads. Their defaults are
#: ``None`` ("not given"; the distributed run's own default applies), so a single-process
#: run refuses any of them the user gave, even at its default value, rather than ignore it.
_DISTRIBUTED_ONLY = (
    "nproc", "nnodes", "node_rank", "master_addr", "master_port", "ps_shards", "sync",
    "batch_sizes", "devices", "steps", "warmup_steps",
)  # fmt: skip
#: _StepRequest fields that only a single-process run reads (its adaptive stop and clock).
_SINGLE_ONLY = ("target_ci", "max_time_s", "min_samples", "timer")
#: processes per node of a distributed run without --nproc
DEFAULT_NPROC = 2


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureTrainRequest(_StepRequest):
    """Training steps to time (``gpucast measure train``), on one process or distributed."""

    VERB: ClassVar[str] = "measure train"

    precision: str = option(
        TRAIN_PRECISION_DEFAULT,
        parse=lower_text,
        help="fp32, bf16, fp16, or auto: bf16 on a GPU with bf16 units (compute capability "
        "8.0 on), fp32 elsewhere (the CPU included) -- what the training verbs predict by "
        "default, so a default run calibrates a default prediction.",
        example="bf16",
    )
    distributed: str | None = option(
        None, help="ddp, fsdp or ps: a multi-process run via torch.distributed.", example="ddp"
    )
    nproc: int | None = option(
        None, help=f"Processes on this node (--distributed; default {DEFAULT_NPROC}).", example="2"
    )
    nnodes: int | None = option(
        None, help="Nodes in the job (--distributed; default 1).", example="2"
    )
    node_rank: int | None = option(
        None, help="This node's rank (--distributed; default 0).", example="0"
    )
    master_addr: str | None = option(
        None, help="Rendezvous host (--distributed; default 127.0.0.1).", example="10.0.0.1"
    )
    master_port: int | None = option(
        None, help="Rendezvous port (--distributed; default: a free port).", example="29500"
    )
    ps_shards: int | None = option(
        None, help="Parameter-server shards (--distributed ps; default 1).", example="1"
    )
    sync: bool | None = option(
        None, negative="async", help="Synchronous (default) or asynchronous PS (--distributed ps)."
    )
    batch_sizes: tuple[int, ...] = option(
        (),
        help="Per-worker batch sizes, e.g. 32,64 (heterogeneous runs; to measure several "
        "batches one after the other, a gpucast campaign over batch_sizes).",
        example="32,64",
    )
    devices: tuple[str, ...] = option(
        (), help="Per-worker devices, e.g. cuda:0,cpu (heterogeneous runs).", example="cuda:0,cpu"
    )
    steps: int | None = option(
        None, help="Measured steps per rank (--distributed; default 20).", example="20"
    )
    warmup_steps: int | None = option(
        None, help="Warm-up steps (--distributed; default 5).", example="5"
    )
    power_limits: tuple[float, ...] = option(
        (),
        help="GPU power limits (W) to measure at, one run each, e.g. 150,200,250 (needs "
        "permission to set the limit; the previous limit is restored).",
        example="150,200,250",
        item="float",
    )
    noise_scale: bool = option(
        False,
        negative="no-noise-scale",
        help="Also estimate the gradient noise scale (Pollux's grad_sqr/grad_var across "
        "micro-batches, at the built weights) and store it with the measurement; plan train "
        "then uses it as B_noise for this workload.",
    )
    noise_micro_batches: int = option(
        4, help="Micro-batches per step for --noise-scale (>= 2).", example="4"
    )

    def __post_init__(self) -> None:
        with as_flags(type(self)):  # a domain check's field as the flag typed, with a fix
            self._check()

    def _check(self) -> None:
        self._check_steps()
        self._check_mode()
        self.distributed_config()  # DistributedConfig checks the distributed flags
        for watts in self.power_limits:
            if isinstance(watts, bool) or not (math.isfinite(watts) and watts > 0):
                raise InvalidSpecError(
                    "power-limits",
                    "must be watts > 0",
                    got=watts,
                    fix="e.g. --power-limits 150,200,250",
                )
        if self.noise_scale:
            if self.distributed or self.power_limits:
                raise InvalidSpecError(
                    "noise-scale",
                    "is measured in a single-process run without a power sweep",
                    fix="drop --distributed/--power-limits, or measure the noise scale apart",
                )
            if (
                isinstance(self.noise_micro_batches, bool)
                or self.noise_micro_batches < 2
                or self.batch_size < self.noise_micro_batches
            ):
                raise InvalidSpecError(
                    "noise-micro-batches",
                    f"must be an integer in [2, --batch-size {self.batch_size}]",
                    got=self.noise_micro_batches,
                    fix="e.g. --noise-micro-batches 4 with --batch-size >= 4",
                )
        if self.threads is not None and self.distributed:
            raise InvalidSpecError(
                "threads",
                "applies to single-process runs",
                got=self.threads,
                fix="drop --threads, or set OMP_NUM_THREADS for the distributed workers",
            )
        if self.kernels and (self.distributed or self.power_limits):
            raise InvalidSpecError(
                "kernels",
                "profiles a single-process run without a power sweep",
                fix="drop --distributed/--power-limits, or measure --kernels apart",
            )
        if self.power_limits and self.distributed:
            raise InvalidSpecError(
                "power-limits",
                "sweeps one process only",
                fix="drop --distributed, or set the limit with `nvidia-smi -pl W` first",
            )

    def _check_mode(self) -> None:
        """One line for an option the run's mode does not read, rather than ignoring it."""
        if self.distributed is None:
            for name in _DISTRIBUTED_ONLY:
                if getattr(self, name) not in (None, ()):
                    flag = _flag(self, name)
                    stop = (
                        ": a single-process run measures until --target-ci or --max-time-s "
                        "(at least --min-samples steps)"
                        if name in ("steps", "warmup_steps")
                        else ""
                    )
                    raise InvalidSpecError(
                        flag.lstrip("-"),
                        "applies to distributed runs only",
                        got=getattr(self, name),
                        fix=f"add --distributed ddp|fsdp|ps, or drop {flag}{stop}",
                    )
            return
        for name in _SINGLE_ONLY:
            if not is_default(self, name):
                flag = _flag(self, name)
                raise InvalidSpecError(
                    flag.lstrip("-"),
                    "applies to single-process runs only",
                    got=getattr(self, name),
                    fix=f"drop {flag} (a distributed run measures --steps steps per rank after "
                    "--warmup-steps), or drop --distributed",
                )
        if self.distributed.strip().lower() != "ps":
            for name in ("ps_shards", "sync"):
                if getattr(self, name) is not None:
                    flag = "--async" if self.sync is False and name == "sync" else _flag(self, name)
                    raise InvalidSpecError(
                        flag.lstrip("-"),
                        "applies to --distributed ps only",
                        got=self.distributed,
                        fix=f"drop {flag}, or pass --distributed ps",
                    )

    def spec_at(self, precision: str) -> WorkloadSpec:
        batch = self.batch_sizes[0] if self.distributed and self.batch_sizes else self.batch_size
        return WorkloadSpec(
            name=self.workload,
            batch_size=batch,
            precision=cast(Precision, precision),
            options=self.workload_options,
        )

    def distributed_config(self) -> DistributedConfig | None:
        """How to launch the distributed run (``None`` for a single-process run)."""
        if self.distributed is None:
            return None
        from gpucast.domain.distributed import DistributedConfig

        given: dict[str, Any] = {
            "nnodes": self.nnodes, "node_rank": self.node_rank, "master_addr": self.master_addr,
            "master_port": self.master_port, "ps_shards": self.ps_shards, "sync": self.sync,
            "steps": self.steps, "warmup_steps": self.warmup_steps,
        }  # fmt: skip
        return DistributedConfig(
            strategy=self.distributed.strip().lower(),  # type: ignore[arg-type]
            nproc_per_node=DEFAULT_NPROC if self.nproc is None else self.nproc,
            batch_sizes=self.batch_sizes or (self.batch_size,),
            devices=self.devices or (self.device,),
            **{k: v for k, v in given.items() if v is not None},
        )


def _flag(request: object, name: str) -> str:
    return next(f.info.cli_flag for f in fields_of(type(request)) if f.name == name)


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureResult:
    """A measurement and, when saved, its run id and store.

    ``measurement`` is a :class:`~gpucast.domain.measurement.Measurement` (one process) or a
    :class:`~gpucast.domain.distributed.DistributedMeasurement`; it is ``None`` only on a node
    other than node 0 of a multi-node run (rank 0 gathers, returns and stores the result).
    """

    measurement: Measurement | DistributedMeasurement | None
    run_id: int | None
    db: Path | None
    node_rank: int = 0
    #: ``--power-limits``: one run per limit (``measurement`` is the first of them)
    sweep: tuple[PowerLimitRun, ...] = ()
    #: ``--kernels``: the step's operators (CPU) or kernels (GPU), stored with the run
    kernels: KernelTrace | None = None
    #: what chose the precision where ``--precision auto`` did (``None`` where it was given)
    precision_note: str | None = None
    #: ``-o`` options at the workload's built-in values, which the stored run leaves out
    options_note: str | None = None
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.measurement is None:
            return {
                "run_id": None,
                "node_rank": self.node_rank,
                "note": "rank 0 (node 0) holds and stores the result",
            }
        out = {**self.measurement.to_dict(), "run_id": self.run_id}
        if self.precision_note is not None:
            out["precision_note"] = self.precision_note
        if self.options_note is not None:
            out["options_note"] = self.options_note
        if self.sweep:
            out["power_sweep"] = [p.to_dict() for p in self.sweep]
        if self.kernels is not None:
            out["kernels"] = self.kernels.to_dict()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerLimitRun:
    """One run of a power-limit sweep."""

    power_limit_w: float
    measurement: Measurement
    run_id: int | None

    def to_dict(self) -> dict[str, Any]:
        m = self.measurement
        e = m.energy
        return {
            "power_limit_w": self.power_limit_w,
            "run_id": self.run_id,
            "median_s": m.median_s,
            "samples_per_s": m.samples_per_s,
            "gpu_energy_j_per_step": None if e is None else e.gpu_energy_j_per_step,
            "gpu_avg_power_w": None if e is None else e.gpu_avg_power_w,
        }


def measure_train(
    request: MeasureTrainRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    **options: Any,
) -> MeasureResult:
    """Time training steps (forward, backward, optimizer) of a workload on this machine.

    With ``distributed`` (``ddp``, ``fsdp``, ``ps``) launch ``nproc`` processes (NCCL on
    GPUs, gloo on the CPU) and measure step, compute and communication time, bytes and
    per-rank skew. ``on_progress`` gets the harness's progress (single process only).
    """
    request = resolve(MeasureTrainRequest, request, options)
    config = request.distributed_config()
    if config is not None:
        return _distributed(request, config, db)
    if request.power_limits:
        return _power_sweep(request, db, on_progress)
    return _single(request, "train", db, on_progress)


def _power_sweep(
    request: MeasureTrainRequest,
    db: Path | str | None,
    on_progress: Callable[[Progress], None] | None,
    *,
    control: PowerLimitControl | None = None,
) -> MeasureResult:
    """One measurement per power limit; the GPU's previous limit is restored afterwards, also
    when a run fails. ``control`` is injectable (tests fake NVML)."""
    from gpucast.domain.measurement import Measurement as SingleMeasurement
    from gpucast.measure.energy import open_power_limit_control

    control = control or open_power_limit_control(request.device)
    control.check(request.power_limits)
    runs: list[PowerLimitRun] = []
    db_used: Path | None = None
    for watts in request.power_limits:
        with control.at(watts):
            one = _single(request, "train", db, on_progress)
        assert isinstance(one.measurement, SingleMeasurement)
        runs.append(
            PowerLimitRun(
                power_limit_w=float(watts), measurement=one.measurement, run_id=one.run_id
            )
        )
        db_used = one.db
    first = runs[0]
    return MeasureResult(
        measurement=first.measurement,
        run_id=first.run_id,
        db=db_used,
        sweep=tuple(runs),
        precision_note=one.precision_note,
        options_note=one.options_note,
    )


def measure_infer(
    request: MeasureInferRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    **options: Any,
) -> MeasureResult:
    """Time inference steps (forward pass, no gradients) of a workload on this machine."""
    request = resolve(MeasureInferRequest, request, options)
    return _single(request, "infer", db, on_progress)


def _db_path(db: Path | str | None) -> Path:
    from gpucast.store import default_db_path

    return Path(db) if db is not None else default_db_path()


def _single(
    request: _StepRequest,
    mode: str,
    db: Path | str | None,
    on_progress: Callable[[Progress], None] | None,
) -> MeasureResult:
    from gpucast.measure import measure_kernels, resolve_device
    from gpucast.store import Store
    from gpucast.store.db import new_store
    from gpucast.workloads import get_workload
    from gpucast.workloads.user import is_user_spec

    # checked before a model is built or the store touched
    devices = (resolve_device(request.device),)
    precision = request.precision_on(devices)
    # a user's model is built by measure itself, after it is checked to fit as built on meta
    # (QA 41: its factory ran for real first, a 128 GiB MLP included)
    chosen = (
        None
        if is_user_spec(request.workload)
        else get_workload(request.workload, **dict(request.workload_options))
    )
    db_path = _db_path(db)
    import torch

    threads_before = torch.get_num_threads()
    store = Store(db_path).open() if request.save else None  # a bad db fails before measuring
    latest: list[Progress] = []  # the last state shown, restated as saving (QA 40 C3)

    def tracked(p: Progress) -> None:
        latest[:] = [p]
        if on_progress is not None:
            on_progress(p)

    try:
        if request.threads is not None:
            torch.set_num_threads(request.threads)
        threads = torch.get_num_threads()
        result, trace = measure_kernels(
            request.spec_at(precision),
            kernel_steps=3 if request.kernels else 0,
            clock=time.process_time if request.timer == "cpu" else None,
            mode=mode,
            device=request.device,
            target_ci=request.target_ci,
            max_time_s=request.max_time_s,
            min_samples=request.min_samples,
            workload=chosen,
            on_progress=tracked,
            noise_scale=isinstance(request, MeasureTrainRequest) and request.noise_scale,
            noise_micro_batches=request.noise_micro_batches
            if isinstance(request, MeasureTrainRequest)
            else 4,
        )
        if request.timer == "cpu":
            note = cpu_timer_note(threads)
            result = dataclasses.replace(result, warnings=(*result.warnings, note))
        if store is not None and latest and on_progress is not None:
            on_progress(saving(latest[0], store.busy_timeout_s))
        run_id = (
            None
            if store is None
            else _saved(lambda: store.save_measurement(result, kernels=trace), result.median_s)
        )
    finally:
        torch.set_num_threads(threads_before)
        if store is not None:
            store.close()
    return MeasureResult(
        measurement=result,
        run_id=run_id,
        db=None if store is None else db_path,
        kernels=trace,
        precision_note=request.precision_note(precision, devices),
        options_note=_options_note(request.workload_options, result.spec),
        new_store=new_store(store),
    )


def saving(last: Progress, store_wait_s: float) -> Progress:
    """``last`` (the measurement's final progress) restated as saving: a display said "... still
    train mlp: 10 samples, CI ..." for the minute a locked store held the save (QA 40 C3)."""
    return dataclasses.replace(last, phase="saving", note=None, store_wait_s=store_wait_s)


def _saved(save: Callable[[], int], median_s: float) -> int:
    """``save()``'s run id; a store that fails then (locked by another process past its busy
    timeout) says what was measured, not a bare store error: QA 40 C3, a measurement held in
    a locked store's queue was dropped with no figure of it."""
    from gpucast.domain.errors import StoreError
    from gpucast.domain.units import format_ms_sig

    try:
        return save()
    except StoreError as exc:
        raise StoreError(
            f"{exc.message}: the measurement (median step {format_ms_sig(median_s)} ms) was "
            "not saved",
            fix=f"{exc.fix}, and measure again" if exc.fix else "measure again",
        ) from exc


def _options_note(given: WorkloadOptions, stored: WorkloadSpec) -> str | None:
    """What a run's stored configuration left out of ``-o``: the options at the workload's
    built-in values (``workloads.canonical_options``), ``None`` where it left none."""
    kept = {key for key, _ in stored.options}
    dropped = [option_text(key, value) for key, value in given if key not in kept]
    if not dropped:
        return None
    are = "is" if len(dropped) == 1 else "are"
    return (
        f"-o {' -o '.join(dropped)} {are} {stored.name}'s built-in "
        f"{'value' if len(dropped) == 1 else 'values'}: stored as {stored.label!r}, which "
        "calibrates predictions of that configuration"
    )


def _distributed(
    request: MeasureTrainRequest, config: DistributedConfig, db: Path | str | None
) -> MeasureResult:
    from gpucast.measure import resolve_device
    from gpucast.measure.distributed.launcher import launch, validate
    from gpucast.store import Store
    from gpucast.store.campaigns import save_distributed
    from gpucast.store.db import new_store

    devices = tuple(resolve_device(d) for d in config.devices)
    precision = request.precision_on(devices)
    spec = request.spec_at(precision)
    validate(spec, config)
    db_path = _db_path(db)
    on_node_0 = config.node_rank == 0
    store = Store(db_path).open() if request.save and on_node_0 else None
    try:
        result = launch(spec, config)
        run_id = (
            None
            if store is None or result is None
            else _saved(lambda: save_distributed(store, result), result.median_step_s)
        )
    finally:
        if store is not None:
            store.close()
    return MeasureResult(
        measurement=result,
        run_id=run_id,
        db=None if store is None else db_path,
        node_rank=config.node_rank,
        precision_note=request.precision_note(precision, devices),
        options_note=None
        if result is None
        else _options_note(request.workload_options, result.spec),
        new_store=new_store(store),
    )
