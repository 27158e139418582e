"""What ``simulate serverless`` and ``plan serverless`` share as a request: the functions,
their invocations and the GPU they run on (:class:`ServerlessLoad`), its defaults and bounds,
and the checks of its fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucast.app._serverless_unit import UNIT_HELP, check_unit
from gpucast.domain.catalog import offers_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import allow_large_option, check_price, check_seed, check_work
from gpucast.domain.options import option, split_list
from gpucast.inputs.instance_ebs import check_gbps, check_instance_options

#: the GPU of the serverless verbs and ``simulate kaas`` without --gpu
DEFAULT_GPU = "T4"
#: functions a synthetic workload may have
MAX_SYNTHETIC = 100_000
#: minutes of a synthetic workload without --minutes (a day, as a trace's)
SYNTHETIC_MINUTES = 1440
#: most minutes of a synthetic workload (two weeks, as the trace)
MAX_MINUTES = 14 * 1440
#: Peak memory per generated function-minute of ``--synthetic N --minutes M`` (the int32
#: count table, the generator's draws, the simulator's arrays over the busy minutes, about a
#: fifth of them); measured: 5,000 functions x 5,760 minutes peak at 0.74 GB resident with
#: ``--policy histogram`` and ``plan serverless`` (~24 B each beyond the interpreter's 60 MB;
#: 31 B with int64 counts and indices, when 10,000 x 20,160 took 6 GB).
#: :func:`gpucast.domain.limits.check_work` refuses N x M above its ceilings (50 million
#: function-minutes or 2 GiB) without ``--allow-large``.
SYNTHETIC_BYTES_PER_FUNCTION_MINUTE = 26


def _positive_int(name: str, value: int | None, high: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidSpecError(name, f"must be an integer in [1, {high:,}]", got=value)


def _coldstart_runs(value: Any) -> tuple[str, ...]:
    """``--coldstart-run``: run ids (comma-separated or repeated) or ``latest``, normalised
    to text (``"3"``, ``"latest"``); checked by :func:`_check_coldstart_runs`."""
    return tuple(str(item).strip().lower() for item in split_list(value))


def _check_coldstart_runs(runs: tuple[str, ...]) -> None:
    from gpucast.inputs.coldstart import LATEST

    if LATEST in runs and len(runs) > 1:
        raise InvalidSpecError(
            "coldstart-run",
            f"give run ids or {LATEST}, not both",
            got=",".join(runs),
            fix="e.g. --coldstart-run latest, or --coldstart-run 3,7",
        )
    for item in runs:
        if item != LATEST and (not item.isdigit() or int(item) < 1):
            raise InvalidSpecError(
                "coldstart-run",
                f"must be run ids >= 1 (gpucast runs list --kind coldstart) or {LATEST}",
                got=item,
                fix="e.g. --coldstart-run 3",
            )
    if len(set(runs)) < len(runs):
        raise InvalidSpecError(
            "coldstart-run", "gives a run twice", got=",".join(runs), fix="give each run once"
        )


def _warmup(value: Any) -> float:
    """``--warmup``: seconds from ``"2h"``, ``"90m"``, ``"0"`` or a number of seconds (>= 0)."""
    from gpucast.domain.units import duration_s

    return duration_s(value, field="warmup", allow_zero=True)


def _check_trace_only(synthetic: bool, *, day: int | None, minutes: int | None) -> None:
    """``--day`` picks a day of a trace, ``--minutes`` the length of a generated workload:
    each given where the other kind of load is asked for is refused (one line, exit 2), not
    ignored."""
    if synthetic and day is not None:
        raise InvalidSpecError(
            "day",
            "picks a day of an Azure Functions 2019 trace (--trace DIR), and --synthetic N "
            "generates its own workload",
            got=day,
            fix="drop --day (--minutes sets the generated workload's length)",
        )
    if not synthetic and minutes is not None:
        raise InvalidSpecError(
            "minutes",
            "sets the length of a --synthetic workload, and a --trace is replayed whole",
            got=minutes,
            fix="drop --minutes (--warmup DURATION simulates a trace's start without counting it)",
        )


def _check_phase_s(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and 0 <= value <= 3600):
        raise InvalidSpecError(name, "must be in [0, 3600] s", got=value, fix=f"e.g. --{name} 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessLoad:
    """The functions, their invocations and the GPU they run on: what ``simulate serverless``
    and ``plan serverless`` share."""

    trace: Path | None = option(
        None,
        help="Folder of the Azure Functions 2019 trace (invocations_per_function_md.anon.dNN"
        ".csv and function_durations_percentiles.anon.dNN.csv; app_memory_percentiles.anon."
        "dNN.csv when it has it), or an Azure LLM inference "
        "trace (an AzureLLMInferenceTrace_*.csv file or a folder of them: one function per "
        "file, --models from llm_models.csv).",
        example="azure_functions_2019/",
    )
    synthetic: int | None = option(
        None,
        help="Generate N functions with the published characteristics instead of a trace.",
        example="1000",
    )
    day: int | None = option(
        None,
        help="Day of an Azure Functions 2019 trace to replay (1-14; default 1). Not for "
        "--synthetic or the Azure LLM trace (one recording, no days).",
        example="1",
    )
    minutes: int | None = option(
        None,
        help=f"Minutes of a --synthetic workload (default {SYNTHETIC_MINUTES:,}); a --trace "
        "is replayed whole (--warmup DURATION leaves its start uncounted).",
        example="1440",
    )
    gpu: str | None = option(
        None, help=f"Catalog GPU the functions run on (default {DEFAULT_GPU}).", example="T4"
    )
    models: tuple[str, ...] = option(
        ("resnet50",),
        help="Workloads the functions serve, assigned in turn (e.g. resnet50,bert-base).",
        example="resnet50,bert-base",
    )
    storage: str = option(
        "local-nvme",
        help="Where weights are read from on a cold start: a storage class of "
        "catalog/data/coldstart.csv (local-nvme, ebs-gp3, ebs-io2, s3, ...).",
        example="s3",
    )
    network_gbps: float | None = option(
        None, help="Instance network (Gbit/s) the weights cross (remote storage).", example="25"
    )
    instance: str | None = option(
        None,
        help="AWS instance type the functions run on (catalog/data/ebs_bandwidth.csv): weights "
        "from an EBS --storage also cross its dedicated EBS bandwidth (its maximum; said), as "
        "predict coldstart --instance.",
        example="g4dn.xlarge",
    )
    ebs_gbps: float | None = option(
        None,
        help="The instance's EBS bandwidth (Gbit/s) weights from an EBS --storage cross, your "
        "own figure (instead of --instance's).",
        example="16",
    )
    price: float | None = option(
        None,
        help="GPU price, US$/h (default: the cheapest on-demand offer of the GPU, per GPU).",
        example="0.53",
    )
    offers_file: Path | None = offers_option()
    durations: str = option(
        "model",
        help="How long an invocation runs: model (one forward pass of its model on the GPU) "
        "or trace (the trace's or generator's average duration, at least one forward pass; "
        "those are CPU functions' durations).",
        example="trace",
    )
    seed: int = option(0, help="Seed of the synthetic workload.")
    unit: str | None = option(None, help=UNIT_HELP, example="function")
    allow_large: bool = allow_large_option()
    coldstart_run: tuple[str, ...] = option(
        (),
        help="Measured cold starts in place of the predicted ones, phase by phase: stored "
        "`gpucast measure coldstart` runs (one per model of --models, comma-separated; "
        "gpucast runs list --kind coldstart) or latest (each model's newest run, one measured "
        "on --gpu first). Phases a run lacks (the container start) stay predicted.",
        example="3",
        parse=_coldstart_runs,
    )
    container_s: float | None = option(
        None,
        help="Runtime/container start of a cold start (s; default: the catalog's).",
        example="1",
    )
    cuda_context_s: float | None = option(
        None,
        help="CUDA context creation of a cold start (s; default: the catalog's, or a "
        "--coldstart-run's).",
        example="0.5",
    )
    billing: str = option(
        "instance",
        help="What serverless bills: instance (GPU-seconds while an instance is loaded, "
        "its keep-alive included: GPU serverless platforms) or execution (execution and "
        "cold-start seconds only).",
        example="execution",
    )
    # 0 by default: a warm-up must be shorter than the trace, and traces run from an hour (the
    # Azure LLM trace) to two weeks, so no fixed length suits every one; 0 also keeps the
    # figures users have. The `warm-up` assumption line says what 0 costs and how to ask.
    warmup_s: float = option(
        0.0,
        flag="warmup",
        kind="text",
        parse=_warmup,
        help="Simulate the trace's first DURATION (keep-alive state, histograms and loaded "
        "instances built as usual) but count nothing in it: cold starts, latency, GPU-hours "
        "and warm-but-idle memory come from the rest. Without one every function starts "
        "cold, its first call a cold start (default 0: none).",
        metavar="DURATION",
        example="1h",
    )

    def __post_init__(self) -> None:
        from gpucast.simulate.serverless import BILLINGS

        object.__setattr__(self, "warmup_s", _warmup(self.warmup_s))
        object.__setattr__(self, "coldstart_run", _coldstart_runs(self.coldstart_run))
        _check_coldstart_runs(self.coldstart_run)
        _check_phase_s("container-s", self.container_s)
        _check_phase_s("cuda-context-s", self.cuda_context_s)
        if self.billing not in BILLINGS:
            raise InvalidSpecError(
                "billing",
                f"must be one of {', '.join(BILLINGS)}",
                got=self.billing,
                fix="e.g. --billing execution to bill execution and cold starts only",
            )
        if (self.trace is None) == (self.synthetic is None):
            raise InvalidSpecError(
                "trace/synthetic",
                "give exactly one of --trace DIR and --synthetic N",
                fix="e.g. --synthetic 1000",
            )
        _positive_int("synthetic", self.synthetic, MAX_SYNTHETIC)
        _positive_int("minutes", self.minutes, MAX_MINUTES)
        _positive_int("day", self.day, 14)
        _check_trace_only(self.synthetic is not None, day=self.day, minutes=self.minutes)
        check_unit(self.unit, synthetic=self.synthetic is not None)
        if self.synthetic is not None:
            if self.minutes is None:
                object.__setattr__(self, "minutes", SYNTHETIC_MINUTES)
            assert self.minutes is not None
            check_work(
                "synthetic",
                float(self.synthetic) * self.minutes,
                what=f"function-minutes ({self.synthetic:,} functions x {self.minutes:,} minutes)",
                bytes_per_item=SYNTHETIC_BYTES_PER_FUNCTION_MINUTE,
                allow_large=self.allow_large,
                fix="lower --synthetic or --minutes",
            )
        if not self.models or any(not m.strip() for m in self.models):
            raise InvalidSpecError(
                "models", "needs workload names", fix="e.g. --models resnet50,mlp"
            )
        for m in self.models:  # plan serve's NAME:RATE: the functions' load is the trace's
            head, sep, tail = m.rpartition(":")
            if sep and head and tail.replace(".", "", 1).isdigit():
                raise InvalidSpecError(
                    "models", "takes workload names: the invocations come from --trace or "
                    "--synthetic, not a rate", got=m, fix=f"e.g. --models {head}",
                )  # fmt: skip
        check_seed(self.seed)
        check_gbps("network-gbps", self.network_gbps, "25")
        check_instance_options(self.instance, self.ebs_gbps)
        check_price(self.price)
        if self.durations not in ("model", "trace"):
            raise InvalidSpecError(
                "durations", "must be model or trace", got=self.durations,
                fix="e.g. --durations trace for the trace's own average durations",
            )  # fmt: skip
