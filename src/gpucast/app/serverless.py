"""``gpucast.simulate_serverless``: GPU functions under a keep-alive policy (issue #19).

Invocations come from a folder of the Azure Functions 2019 trace (``--trace DIR``, one day)
or are generated with the published characteristics (``--synthetic N``); each function serves
one of ``--models`` (assigned in turn: function i serves model i mod len(models)) on a
``--gpu``: the model's inference memory is held while the instance is loaded, a cold start
costs the model's predicted cold start (container, CUDA context, weights through
``--storage``/``--network-gbps``/PCIe, first call), and an invocation runs one forward pass of
the model (``--durations trace``: the trace's average duration, at least that). The keep-alive
``--policy`` (``fixed:10m``, ``histogram``, ``prewarm``) decides when instances are loaded
(:func:`gpucast.simulate.serverless.simulate_keep_alive`, vectorised over per-minute counts).
On an Azure Functions 2019 trace the unit of keep-alive is the application by default
(``--unit app``: an app's functions share one instance loading each distinct model once, and
the trace's app memory is counted while it idles; :mod:`gpucast.inputs.serverless_apps`);
``--unit function`` gives each function its own instance.

A measured cold start replaces the predicted one, phase by phase: ``--coldstart-run ID`` (a
stored ``gpucast measure coldstart`` run; one per model, comma-separated) or
``--coldstart-run latest`` (:mod:`gpucast.inputs.coldstart`); ``--container-s`` and
``--cuda-context-s`` set those phases outright, for every model.

Reported: cold-start rate, p50/p99 latency, GPU-hours billed (``--billing``, as ``plan
serverless`` bills: ``instance``, loaded instances with their keep-alive, by default, or
``execution``, execution plus cold starts), warm-but-idle memory-time, and costs at the
GPU's price: what the billed hours cost, and what the memory held warm while idle costs (its
share of the GPU's memory x the GPU's price).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._serverless_unit import UNIT_HELP, check_unit
from gpucast.domain.catalog import offers_option
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.gpu_memory import usable_gib
from gpucast.domain.limits import (
    allow_large_option,
    check_pool_gpus,
    check_price,
    check_seed,
    check_work,
)
from gpucast.domain.options import (
    default_mark,
    defaults_used,
    documented,
    lower_text,
    option,
    split_list,
)
from gpucast.domain.units import format_duration, format_slo_latency
from gpucast.inputs.instance_ebs import check_gbps, check_instance_options

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.provenance import Validation
    from gpucast.inputs.coldstart import StoredColdStart
    from gpucast.inputs.serverless import GpuFunction, ServerlessTrace
    from gpucast.plan.serverless import AlwaysOnSizing, ServerlessPlan
    from gpucast.simulate.serverless import PoolResult, ServerlessResult

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

#: the GPU of the serverless verbs and ``simulate kaas`` without --gpu
DEFAULT_GPU = "T4"
#: the SLO of ``plan serverless`` without --slo
DEFAULT_SLO = "p99<2s"
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


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServerlessRequest(ServerlessLoad):
    """A serverless GPU workload to simulate (``gpucast simulate serverless``)."""

    VERB: ClassVar[str] = "simulate serverless"

    policy: str = option(
        "fixed:10m",
        help="Keep-alive: fixed:DURATION (e.g. fixed:10m; counted in whole minutes, the "
        "trace's bins: fixed:30s runs as 1 min), histogram (hybrid histogram, Shahrad et al. "
        "ATC'20) or prewarm (from predicted arrivals).",
        example="histogram",
    )
    pool_gpus: int | None = option(
        None,
        help="Also simulate the functions multiplexed on a pool of N such GPUs: models cached "
        "in GPU memory (LRU), all kept in host memory and swapped in over PCIe on a miss "
        "(Torpor-style).",
        example="4",
    )
    slo: str | None = option(
        None,
        parse=lower_text,
        help="Latency SLO of an invocation, cold starts included, as plan serverless's: "
        "pNN<LATENCY (ms or s); prints the share of invocations within LATENCY and whether "
        "the pNN latency is (an LLM request beyond the context window: a miss).",
        example="p99<500ms",
    )

    def __post_init__(self) -> None:
        ServerlessLoad.__post_init__(self)
        check_pool_gpus(self.pool_gpus)
        from gpucast.app.serve import parse_slo
        from gpucast.domain.serverless import parse_policy

        parse_policy(self.policy)
        if self.slo is not None:
            parse_slo(self.slo)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServerlessResult:
    """The simulated day(s): totals, per-model figures, sources and assumptions."""

    result: ServerlessResult
    functions: tuple[GpuFunction, ...]
    gpu: str
    gpu_memory_gib: float
    price_usd_per_hour: float
    price_source: str
    trace_source: str
    arrival_process: str = ""
    warnings: tuple[str, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)
    pool: PoolResult | None = None
    pool_gpus: int | None = None
    billing: str = "instance"
    #: what one instance serves (``app`` or ``function``), the trace's applications (None:
    #: it has none) and each unit's own memory in MB (``--unit app``; NaN: unknown)
    unit: str = "function"
    apps: dict[str, Any] | None = None
    host_memory_mb: FloatArray | None = None
    #: the flags whose default set the result (``--gpu``)
    defaults: tuple[str, ...] = ()
    #: ``--slo``: percentile, latency_s, the latency at the percentile, the share of
    #: invocations within latency_s and whether the SLO is met (None: no --slo)
    slo: dict[str, Any] | None = None
    #: the keep-alive simulator's validated error (:func:`_keepalive_validation`), as
    #: ``plan serverless`` names it (None: not given, the API's older callers)
    validation: Validation | None = None
    #: the predicted cold start's validated error (:func:`_coldstart_validation`; None when
    #: every model's cold start was measured)
    cold_start_validation: Validation | None = None
    #: each model whose cold start a stored run measured: that run's provenance
    cold_start_measured: dict[str, str] = field(default_factory=dict)

    @property
    def billed_gpu_hours(self) -> float:
        """GPU-hours billed under :attr:`billing` (``plan serverless``'s bill)."""
        return self.result.bill_s(self.billing) / 3600.0

    @property
    def warm_idle_gib_hours(self) -> float:
        return float(self.result.wasted_memory_gib_s.sum()) / 3600.0

    @property
    def warm_idle_app_memory_mb_hours(self) -> float | None:
        """The apps' own memory (the trace's ``AverageAllocatedMb``) x the time each was loaded
        while idle, in MB-hours (``--unit app`` with a memory file; apps without a row not
        counted), else None."""
        import numpy as np

        mb, idle = self.host_memory_mb, self.result.idle_s
        if mb is None or idle is None or not np.isfinite(mb).any():
            return None
        known = np.isfinite(mb)
        return float((idle[known] * mb[known]).sum()) / 3600.0

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        idle_gpu_hours = self.warm_idle_gib_hours / self.gpu_memory_gib
        return {
            **r.to_dict(),
            "rejected_beyond_context": 0 if r.rejected is None else int(r.rejected.sum()),
            "unit": self.unit,
            "units": len(r.functions),
            "functions": _functions(self.apps, len(r.functions)),
            "apps": self.apps,
            "gpu": self.gpu,
            "defaults": list(self.defaults),
            "arrival_process": self.arrival_process,
            "billing": self.billing,
            "billed_gpu_s": r.bill_s(self.billing),
            "billed_gpu_hours": self.billed_gpu_hours,
            "execution_gpu_hours": r.billed_s / 3600.0,
            "instance_gpu_hours": r.instance_s / 3600.0,
            "warm_idle_gib_hours": self.warm_idle_gib_hours,
            "warm_idle_gpu_hours": idle_gpu_hours,
            "warm_idle_app_memory_mb_hours": self.warm_idle_app_memory_mb_hours,
            "price_usd_per_hour": self.price_usd_per_hour,
            "cost_usd": self.billed_gpu_hours * self.price_usd_per_hour,
            "warm_idle_cost_usd": idle_gpu_hours * self.price_usd_per_hour,
            "models": _model_dicts(
                self.functions,
                r.functions if self.unit == "function" else None,
                _functions(self.apps, len(r.functions)),
            ),
            "pool": self._pool_dict(),
            "slo": self.slo,
            "validation": None if self.validation is None else self.validation.to_dict(),
            "cold_start_validation": None
            if self.cold_start_validation is None
            else self.cold_start_validation.to_dict(),
            "cold_start_measured": dict(self.cold_start_measured),
            "sources": {"trace": self.trace_source, "price": self.price_source},
            "warnings": list(self.warnings),
            "assumptions": dict(self.assumptions),
        }

    def _pool_dict(self) -> dict[str, Any] | None:
        if self.pool is None:
            return None
        return {
            **self.pool.to_dict(),
            "cost_usd": self.pool.gpu_hours * self.price_usd_per_hour,
        }


def _functions(apps: dict[str, Any] | None, units: int) -> int:
    """The functions of the trace: its apps' functions, else one per unit."""
    return int(apps["functions"]) if apps is not None else units


def served_by(k: int, models: int, names: Sequence[str] | None, functions: int) -> str:
    """Which functions the ``k``-th of ``models`` function models serves (function ``i``
    serves model ``i mod models``), in words: ``function conv`` (one model a function, the
    Azure LLM trace), ``functions f0, f2, f4, ... (10 of 20)`` or, without the functions'
    names (``--unit app`` groups them), ``10 of 20 functions (i mod 2 = 0)``."""
    if names is not None and len(names) == models:
        return f"function {names[k]}"
    if models == 1:
        return "the function" if functions == 1 else f"all {functions:,} functions"
    served = range(k, functions, models)
    if names is None or len(names) != functions:
        return f"{len(served):,} of {functions:,} functions (i mod {models} = {k})"
    shown = ", ".join(names[i] for i in served[:3]) + (", ..." if len(served) > 3 else "")
    return f"function{'s' if len(served) != 1 else ''} {shown} ({len(served):,} of {functions:,})"


def _model_dicts(
    functions: tuple[GpuFunction, ...], names: Sequence[str] | None, count: int
) -> list[dict[str, Any]]:
    """Each function model's figures, its cold start phase by phase (measured or predicted),
    and the functions it serves (:func:`served_by`; ``names``: the functions', ``count`` of
    them)."""
    return [
        {
            "model": f.model,
            "served_by": served_by(k, len(functions), names, count),
            "memory_gib": f.memory_gib,
            "weight_bytes": f.weight_bytes,
            "forward_s": f.forward_s,
            "cold_start_s": f.cold_start_s,
            "cold_start": f.cold_start_dict(),
            "gpus": f.gpus,
            "source": f.source,
        }
        for k, f in enumerate(functions)
    ]


def _price(gpu: str, given: float | None, offers_path: Path | None) -> tuple[float, str]:
    from gpucast.catalog import load_catalog, offers_file

    if given is not None:
        return given, f"--price {given:g} US$/h"
    offers = load_catalog(offers_file(offers_path)).find_offers(gpu=gpu)
    if not offers:
        raise InvalidInputError(
            f"--gpu {gpu}: no cloud offer in the catalog to price it", fix="pass --price US$/h"
        )
    best = min(offers, key=lambda o: o.on_demand_usd_per_hour / o.gpus)
    per_gpu = best.on_demand_usd_per_hour / best.gpus
    return per_gpu, (
        f"{per_gpu:.4g} US$/h per GPU: {best.provider} {best.instance_type} in {best.region} "
        f"on demand ({best.source_url}, as of {best.as_of})"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Load:
    """A :class:`ServerlessLoad` resolved: counts, per-function figures, GPU and price."""

    trace: ServerlessTrace
    functions: tuple[GpuFunction, ...]
    gpu: GpuSpec
    price: float
    price_source: str
    exec_s: FloatArray
    cold_s: FloatArray
    memory_gib: FloatArray
    swap_s: FloatArray
    pcie_gbs: float
    #: each unit's service times at equally likely points (an LLM trace, apps whose functions
    #: differ), else None
    exec_spread: FloatArray | None = None
    warnings: tuple[str, ...] = ()
    #: what a row of ``trace.counts`` is (``app`` or ``function``), the trace's applications
    #: (:func:`~gpucast.inputs.serverless_apps.app_summary`; None: it has none) and each
    #: unit's own memory (MB; ``--unit app`` only)
    unit: str = "function"
    apps: dict[str, Any] | None = None
    host_memory_mb: FloatArray | None = None
    #: the GPUs each unit's instance holds (a language model split over several), None: one
    instance_gpus: FloatArray | None = None
    #: ``(units, bins)`` requests beyond the model's context window, rejected at arrival by
    #: every deployment (an Azure LLM trace; None: none): not invocations, misses in every
    #: latency percentile and SLO share (:func:`gpucast.simulate.serverless.with_rejected`)
    rejected: IntArray | None = None

    @property
    def gpus(self) -> FloatArray:
        """The GPUs of each unit's instance."""
        import numpy as np

        if self.instance_gpus is None:
            return np.ones(self.trace.counts.shape[0])
        return self.instance_gpus


def _llm_functions(
    request: ServerlessLoad, trace: ServerlessTrace, gpu: GpuSpec, storage: str
) -> tuple[tuple[GpuFunction, ...], FloatArray, IntArray, IntArray, tuple[str, ...]]:
    """One :func:`~gpucast.inputs.serverless.llm_gpu_function` per function of an LLM trace
    (function i serves model i mod len(models)), their service-time quantiles, the counts of
    the requests served (those within the model's context window) and of those rejected
    (beyond it) per function and bin, and warnings."""
    import numpy as np

    from gpucast.inputs.llm_serving import is_llm_model
    from gpucast.inputs.serverless import llm_gpu_function
    from gpucast.simulate.serverless import service_quantiles

    for m in request.models:
        if not is_llm_model(m):
            raise InvalidSpecError(
                "models",
                f"{m} is not a language model of llm_models.csv: the requests of an Azure LLM "
                "trace are priced by their tokens",
                fix="e.g. --models llama-2-7b",
            )
    if request.durations == "trace":
        raise InvalidSpecError(
            "durations",
            "the Azure LLM trace has no durations: each request's service time comes from "
            "its tokens",
            fix="drop --durations",
        )
    if request.coldstart_run:
        raise InvalidSpecError(
            "coldstart-run",
            "the functions of an Azure LLM trace serve language models of llm_models.csv, "
            "whose cold starts `measure coldstart` does not measure",
            fix="drop --coldstart-run (--container-s and --cuda-context-s apply)",
        )
    funcs, services, warnings = [], [], []
    n_bins = int(trace.counts.shape[1])
    counts = np.zeros((len(trace.tokens), n_bins), dtype=np.int64)
    rejected = np.zeros_like(counts)
    for i, (bins, inp, out) in enumerate(trace.tokens):
        model = request.models[i % len(request.models)]
        f, service, notes = llm_gpu_function(
            model, gpu, storage=storage, network_gbps=request.network_gbps,
            instance=request.instance, ebs_gbps=request.ebs_gbps, input_tokens=inp,
            output_tokens=out, container_s=request.container_s,
            cuda_context_s=request.cuda_context_s,
        )  # fmt: skip
        served = ~np.isnan(service)
        counts[i] = np.bincount(bins[served], minlength=n_bins)
        rejected[i] = np.bincount(bins[~served], minlength=n_bins)
        funcs.append(f)
        services.append(service[served])
        warnings += [f"{trace.names[i]}: {n}" for n in notes]
    return tuple(funcs), service_quantiles(services), counts, rejected, tuple(warnings)


def _load(request: ServerlessLoad, db: Path | str | None = None) -> _Load:
    import numpy as np

    from gpucast.catalog import load_catalog
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.inputs.instance_ebs import check_instance
    from gpucast.inputs.llm_serving import is_llm_model
    from gpucast.inputs.serverless import gpu_function, synthetic_trace, trace_from_path

    catalog = load_catalog()
    gpu = catalog.gpu(request.gpu or DEFAULT_GPU)
    storage = request.storage.strip().lower()
    load_coldstart_facts().get("storage", storage)
    check_instance(request.instance, gpu, catalog)
    price, price_source = _price(gpu.name, request.price, request.offers_file)
    if request.trace is not None:
        trace = trace_from_path(request.trace, request.day or 1)
        _check_recording(request, trace)
    else:
        assert request.synthetic is not None and request.minutes is not None
        trace = synthetic_trace(request.synthetic, minutes=request.minutes, seed=request.seed)
    pcie = load_coldstart_facts().get("link", f"pcie{gpu.pcie_generation}").value
    if trace.tokens:
        funcs, spread, served, rejected, notes = _llm_functions(request, trace, gpu, storage)
        return _Load(
            trace=dataclasses.replace(trace, counts=served),
            rejected=rejected if rejected.any() else None,
            functions=funcs,
            gpu=gpu,
            price=price,
            price_source=price_source,
            exec_s=np.array([f.forward_s for f in funcs]),
            cold_s=np.array([f.cold_start_s for f in funcs]),
            memory_gib=np.array([f.memory_gib for f in funcs]),
            # each GPU of an instance swaps its shard in over its own link, as it loads it
            swap_s=np.array([f.weight_bytes / (pcie * 1e9 * f.gpus) for f in funcs]),
            pcie_gbs=pcie,
            exec_spread=spread,
            warnings=trace.warnings + notes,
            instance_gpus=np.array([float(f.gpus) for f in funcs]),
        )
    for m in request.models:
        if is_llm_model(m):
            raise InvalidSpecError(
                "models",
                f"{m} is a language model: its requests need token counts, which "
                f"{'a generated workload' if request.trace is None else 'this trace'} has not",
                fix="give --trace an Azure LLM inference trace (AzureLLMInferenceTrace_*.csv), "
                "or a DNN workload (e.g. resnet50)",
            )
    measured, measured_notes = _stored_cold_starts(request, gpu, db)
    funcs = tuple(
        gpu_function(
            m,
            gpu,
            storage=storage,
            network_gbps=request.network_gbps,
            instance=request.instance,
            ebs_gbps=request.ebs_gbps,
            container_s=request.container_s,
            cuda_context_s=request.cuda_context_s,
            measured=measured.get(m),
        )
        for m in request.models
    )
    which = np.arange(trace.counts.shape[0]) % len(funcs)
    forward = np.array([f.forward_s for f in funcs])[which]
    if request.durations == "trace":
        exec_s = np.where(np.isnan(trace.duration_s), forward, np.fmax(trace.duration_s, forward))
    else:
        exec_s = forward
    load = _Load(
        trace=trace,
        functions=funcs,
        gpu=gpu,
        price=price,
        price_source=price_source,
        exec_s=exec_s,
        cold_s=np.array([f.cold_start_s for f in funcs])[which],
        memory_gib=np.array([f.memory_gib for f in funcs])[which],
        swap_s=np.array([f.weight_bytes / (pcie * 1e9) for f in funcs])[which],
        pcie_gbs=pcie,
        warnings=trace.warnings + measured_notes,
    )
    return _with_unit(request, load, which)


def _check_recording(request: ServerlessLoad, trace: ServerlessTrace) -> None:
    """A trace read from one recording (the Azure LLM trace, an ``arrival_s`` CSV: the
    trace's ``paths``) has no days and no applications, and an ``arrival_s`` CSV is one
    function, serving one model: one line for what does not fit."""
    from gpucast.app._serverless_unit import no_apps_in_trace

    if not trace.paths:
        return
    what = (
        "the Azure LLM inference trace"
        if trace.tokens
        else f"{trace.paths[0].name} (an arrival_s CSV: one function's invocations)"
    )
    if request.day is not None:
        raise InvalidSpecError(
            "day",
            f"picks a day of an Azure Functions 2019 trace, and {what} is one recording (no days)",
            got=request.day,
            fix="drop --day",
        )
    if request.unit == "app":
        raise no_apps_in_trace(what)
    if not trace.tokens and len(request.models) > 1:
        raise InvalidSpecError(
            "models",
            f"gives {len(request.models)} models, and {what} is one function, which serves one",
            got=",".join(request.models),
            fix=f"give one, e.g. --models {request.models[0]}",
        )


def _with_unit(request: ServerlessLoad, load: _Load, model_of: IntArray) -> _Load:
    """``load`` per function, or per application (``--unit app``, the default on a trace with
    applications: :func:`gpucast.inputs.serverless_apps.group_by_app`); ``model_of``: each
    function's model."""
    import numpy as np

    from gpucast.app._serverless_unit import app_memory_warnings
    from gpucast.inputs.serverless_apps import app_summary, group_by_app

    trace = load.trace
    if not trace.apps:  # a generated workload (--unit app refused by the request)
        return load
    apps = app_summary(trace, model_of, len(load.functions))
    if request.unit == "function":
        return dataclasses.replace(load, apps=apps)
    units = group_by_app(
        trace, model_of=model_of, functions=load.functions, exec_s=load.exec_s, gpu=load.gpu,
        pcie_gbs=load.pcie_gbs,
    )  # fmt: skip
    return dataclasses.replace(
        load,
        trace=dataclasses.replace(
            trace,
            counts=units.counts,
            names=units.names,
            duration_s=np.full(len(units.names), np.nan),
            apps=units.names,
        ),
        exec_s=units.exec_s,
        exec_spread=units.exec_spread,
        cold_s=units.cold_s,
        memory_gib=units.memory_gib,
        swap_s=units.swap_s,
        unit="app",
        apps=apps,
        host_memory_mb=units.host_memory_mb,
        warnings=load.warnings + app_memory_warnings(apps, trace.memory_file),
    )


def _stored_cold_starts(
    request: ServerlessLoad, gpu: GpuSpec, db: Path | str | None
) -> tuple[dict[str, StoredColdStart], tuple[str, ...]]:
    """The ``--coldstart-run`` runs by model, and warnings (:mod:`gpucast.inputs.coldstart`)."""
    if not request.coldstart_run:
        return {}, ()
    from gpucast.inputs.coldstart import stored_cold_starts
    from gpucast.store.db import default_db_path

    path = Path(db) if db is not None else default_db_path()
    return stored_cold_starts(path, request.coldstart_run, request.models, gpu)


def _check_pool(pool_gpus: int, load: _Load) -> None:
    """``--pool-gpus N``: every unit's instance must fit in the pool -- its GPUs and their
    memory -- or one line (exit 2) names the flag, the instance's need and the fixes."""
    import numpy as np

    gpu = load.gpu
    usable = usable_gib(gpu.memory_gib)  # the one rule: what an instance can fill of a GPU
    capacity = pool_gpus * usable
    gpus = load.gpus
    bad = np.flatnonzero((load.memory_gib > capacity * (1 + 1e-12)) | (gpus > pool_gpus))
    if not bad.size:
        return
    i = int(bad[0])
    name = load.trace.names[i]
    what = (
        f"{load.unit} {name} ({load.functions[i % len(load.functions)].model})"
        if load.unit == "function"
        else f"{load.unit} {name}"
    )
    need = max(int(gpus[i]), math.ceil(float(load.memory_gib[i]) / usable - 1e-9))
    raise InvalidSpecError(
        "pool-gpus",
        f"a pool of {pool_gpus} x {gpu.name} holds {capacity:.1f} GiB usable (of "
        f"{gpu.memory_gib:g} GiB each), and {what} needs "
        f"{float(load.memory_gib[i]):.1f} GiB on {int(gpus[i])} x {gpu.name} per instance",
        got=pool_gpus,
        fix=f"give --pool-gpus {need} or more, a GPU with more memory (--gpu), or a smaller "
        "model in --models",
    )


def _hours(seconds: float) -> str:
    """``3600`` -> ``1 h``, ``5400`` -> ``1.5 h``, ``86400`` -> ``24 h`` (as the header says);
    below an hour in minutes or seconds, as the header has it too: ``60`` -> ``1 min`` (was
    ``0.01667 h``)."""
    return f"{seconds / 3600:,.4g} h" if seconds >= 3600 else format_duration(seconds)


def _check_warmup(request: ServerlessLoad, load: _Load) -> None:
    """A warm-up must leave some of the trace to count (one line, exit 2, naming both)."""
    horizon_s = float(load.trace.counts.shape[1]) * 60.0
    if request.warmup_s >= horizon_s:
        quarter_h = horizon_s / 4 / 3600  # the example: a quarter of this trace
        example = (
            f"{quarter_h:g}h" if quarter_h.is_integer() else f"{max(1, round(quarter_h * 60))}m"
        )
        raise InvalidSpecError(
            "warmup",
            f"{_hours(request.warmup_s)} is not shorter than the trace "
            f"({_hours(horizon_s)}): nothing would be left to count",
            fix=f"give a --warmup shorter than {_hours(horizon_s)}, e.g. --warmup {example}",
        )


def _warmup_text(warmup_s: float, horizon_s: float) -> str:
    """The ``warm-up`` assumption line (both verbs)."""
    if warmup_s == 0:
        return (
            "none: every function starts unloaded at the trace's first minute, so its first "
            "call is a cold start under every policy (a rarely called function's own p99); "
            "--warmup 1h simulates the first hour without counting it"
        )
    return (
        f"the first {_hours(warmup_s)} simulated (policy state, histograms and loaded "
        "instances built as usual) but not counted: invocations, cold starts, latency, "
        f"GPU-hours and warm-but-idle memory are those of the {_hours(horizon_s - warmup_s)} "
        "after it (rounded up to whole minutes)"
    )


def _load_assumptions(request: ServerlessLoad, load: _Load) -> dict[str, str]:
    if load.trace.tokens:  # an LLM trace (an app's mix of functions also has a spread)
        from gpucast.inputs.serverless import LLM_ENGINE

        execution = (
            f"each request alone on its instance ({LLM_ENGINE}, batch 1: prefill then decode "
            "of its tokens); requests of one minute do not batch or queue; latency "
            "percentiles from each function's service times at 64 quantiles"
        )
    elif request.durations == "model":
        execution = (
            "one forward pass of the function's model at batch 1 (the serving engine's "
            "latency model, as simulate serve prices the device; the request's payload over "
            "the network and PCIe, which simulate serve adds, is left out)"
        )
    else:
        execution = "the trace's average duration per function, at least one forward pass"
    from gpucast.app._serverless_unit import app_memory_assumption, unit_assumption

    out = {
        "assignment": f"function i serves model i mod {len(request.models)} of --models",
        "one instance": f"one instance per {load.unit}; the first invocation of a cold minute "
        "pays the cold start, the others of that minute find it loaded",
        "execution": execution,
        "billing": _billing_text(request.billing),
        "unit": unit_assumption(load.unit, load.apps, len(request.models)),
    }
    several = sorted({(f.model, f.gpus) for f in load.functions if f.gpus > 1})
    if several:
        each = ", ".join(f"{model} {gpus} x {load.gpu.name}" for model, gpus in several)
        out["gpus per instance"] = (
            f"an instance holds all the GPUs its model is split over ({each}): it loads, keeps "
            "warm and is billed for all of them, so its GPU-hours are its hours times them"
        )
    if load.unit == "app" and load.apps is not None:
        out["app memory"] = app_memory_assumption(load.apps)
    out.update(_cold_start_assumptions(load.functions))
    runs = {f.model: f.coldstart_run for f in load.functions if f.coldstart_run is not None}
    if runs:
        each = ", ".join(f"{model}: run {run}" for model, run in runs.items())
        out["cold start"] = (
            f"measured phases of stored coldstart runs replace the predicted ones ({each}; "
            "each model's line says which); measured weights were read from the measuring "
            "host's disk, not --storage; phases a run lacks (the container start) stay predicted"
        )
    return out


def _cold_start_assumptions(functions: Sequence[GpuFunction]) -> dict[str, str]:
    """What the models' predicted cold starts assume (``GpuFunction.assumptions``, as predict
    coldstart says it), keyed ``cold start NAME``; one text where every model shares it, else
    each model's (QA 39 S #6: simulate/plan serverless dropped them)."""
    said: dict[str, dict[str, list[str]]] = {}
    for f in functions:
        for key, text in f.assumptions.items():
            models = said.setdefault(key, {}).setdefault(text, [])
            if f.model not in models:
                models.append(f.model)
    return {
        f"cold start {key}": next(iter(texts))
        if len(texts) == 1
        else "; ".join(f"{', '.join(models)}: {text}" for text, models in texts.items())
        for key, texts in said.items()
    }


def _billing_text(billing: str) -> str:
    """The assumption line that names the bill (both verbs)."""
    if billing == "instance":
        return (
            "instance: the GPU is billed while an instance is loaded (busy and "
            "keep-alive minutes, cold starts), at the same price per GPU-hour as always-on "
            "(--billing execution: execution and cold starts only)"
        )
    return (
        "execution: execution and cold-start seconds only, at the same price per "
        "GPU-hour as always-on; the keep-alive is not billed (--billing instance: it is)"
    )


def simulate_serverless(
    request: SimulateServerlessRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateServerlessResult:
    """Simulate GPU functions under a keep-alive policy (module docstring). ``db``: the
    store ``--coldstart-run`` reads (default: ``$GPUCAST_DB``)."""
    from gpucast.domain.serverless import parse_policy
    from gpucast.simulate.serverless import simulate_keep_alive

    request = resolve(SimulateServerlessRequest, request, options, config)
    policy = parse_policy(request.policy)
    load = _load(request, db)
    _check_warmup(request, load)
    trace, funcs, gpu, exec_s = load.trace, load.functions, load.gpu, load.exec_s
    price, price_source = load.price, load.price_source
    result = simulate_keep_alive(
        trace.counts,
        policy=policy,
        exec_s=exec_s,
        cold_s=load.cold_s,
        memory_gib=load.memory_gib,
        functions=trace.names,
        exec_spread=load.exec_spread,
        warmup_s=request.warmup_s,
        instance_gpus=load.gpus,
        rejected=load.rejected,
    )
    pool = None
    if request.pool_gpus is not None:
        from gpucast.simulate.serverless import simulate_gpu_pool

        _check_pool(request.pool_gpus, load)
        pool = simulate_gpu_pool(
            trace.counts,
            gpus=request.pool_gpus,
            capacity_gib=request.pool_gpus * usable_gib(gpu.memory_gib),
            memory_gib=load.memory_gib,
            swap_s=load.swap_s,
            cold_s=load.cold_s,
            exec_s=exec_s,
            exec_spread=load.exec_spread,
            warmup_s=request.warmup_s,
            instance_gpus=load.gpus,
            rejected=load.rejected,
        )
    assumptions = {
        **_load_assumptions(request, load),
        "warm-up": _warmup_text(result.warmup_s, result.horizon_s),
        "concurrency": "invocations of one minute are billed in full; scale-out instances "
        "beyond the first are not kept warm",
        "policy": policy.describe(),
    }
    if pool is not None:
        assumptions["pool"] = (
            f"{request.pool_gpus} x {gpu.name} always on, their memory one cache of every "
            "function's model (each function its own weights), swapped in over PCIe at "
            f"{load.pcie_gbs:g} GB/s; each {pool.bin_s:g} s bin's execution GPU-seconds "
            f"checked against {request.pool_gpus} x {pool.bin_s:g} s (any call on any GPU); "
            "latency without queueing, not given when a bin is overloaded; billed the pool's "
            "GPU-hours or the execution GPU-hours, the larger"
        )
    return SimulateServerlessResult(
        result=result,
        functions=funcs,
        gpu=gpu.name,
        gpu_memory_gib=gpu.memory_gib,
        price_usd_per_hour=price,
        price_source=price_source,
        trace_source=trace.source,
        arrival_process=trace.arrival_process,
        warnings=load.warnings + (pool.warnings if pool is not None else ()),
        assumptions=assumptions,
        pool=pool,
        pool_gpus=request.pool_gpus,
        billing=request.billing,
        unit=load.unit,
        apps=load.apps,
        host_memory_mb=load.host_memory_mb,
        defaults=defaults_used(request, ("gpu",)),
        slo=None if request.slo is None else _slo_standing(request.slo, result, load),
        validation=_keepalive_validation(load),
        cold_start_validation=_coldstart_validation(load),
        cold_start_measured=_coldstart_measured(load),
    )


def _coldstart_validation(load: _Load) -> Validation | None:
    """The validated error of the models' predicted cold start on ``load``'s GPU, as predict
    coldstart names it (a language model at fp16 on its instance's GPUs, a DNN at fp32); None
    where every model's cold start was measured (``--coldstart-run``: QA 39 S, the line then
    described a prediction nobody made; :func:`_coldstart_measured` says what was measured)."""
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.llm_serving import is_llm_model

    if all(f.coldstart_source is not None for f in load.functions):
        return None
    llm = is_llm_model(load.functions[0].model)
    gpus = max(f.gpus for f in load.functions)
    return validation_for("coldstart", [load.gpu.name], "fp16" if llm else "fp32", gpus)


def _coldstart_measured(load: _Load) -> dict[str, str]:
    """Each model whose cold start a stored run measured (``--coldstart-run``): the run's
    provenance, in place of the predicted cold start's validation."""
    return {f.model: f.coldstart_source for f in load.functions if f.coldstart_source}


def _keepalive_validation(load: _Load) -> Validation:
    """The keep-alive simulator's validated error on ``load``'s GPU (the serverless-keepalive
    row of validation.csv): ``simulate serverless`` and ``plan serverless`` name the same."""
    from gpucast.catalog.validation import validation_for

    return validation_for("serverless-keepalive", [load.gpu.name], "fp32")


def _slo_standing(text: str, result: ServerlessResult, load: _Load) -> dict[str, Any]:
    """``--slo`` against the simulated invocations (execution + cold start), judged as plan
    serverless judges --slo-scope invocations: the latency at the percentile within it."""
    import numpy as np

    from gpucast.app.serve import parse_slo
    from gpucast.simulate.serverless import slo_standing, with_rejected

    percentile, slo_s = parse_slo(text)
    warm = result.invocations - result.cold_starts
    at_s, share = slo_standing(
        np.asarray(load.exec_s, dtype=np.float64),
        with_rejected(((0.0, warm), (load.cold_s, result.cold_starts)), result.rejected),
        percentile=percentile, slo_s=slo_s, spread=load.exec_spread,
    )  # fmt: skip
    return {
        "percentile": percentile,
        "latency_s": slo_s,
        "latency_at_percentile_s": at_s,
        "share_within": share,
        "met": None if np.isnan(at_s) else bool(at_s <= slo_s + 1e-12),
    }


# -- plan serverless: serverless vs always-on for the same load ------------------------------

#: keep-alive policies `plan serverless` compares by default
DEFAULT_PLAN_POLICIES: tuple[str, ...] = ("fixed:10m", "fixed:1h", "histogram", "prewarm")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServerlessRequest(ServerlessLoad):
    """Serverless vs always-on deployments of one load (``gpucast plan serverless``)."""

    VERB: ClassVar[str] = "plan serverless"

    slo: str | None = option(
        None,
        parse=lower_text,
        help="Latency SLO of an invocation, cold starts included: pNN<LATENCY (ms or s; "
        f"default {DEFAULT_SLO}).",
        example="p99<500ms",
    )
    policies: tuple[str, ...] = option(
        DEFAULT_PLAN_POLICIES,
        help="Keep-alive policies of the serverless candidates (fixed:DURATION in whole "
        "minutes, histogram, prewarm); one given twice is one candidate.",
        example="fixed:10m,histogram",
    )
    max_utilisation: float = option(
        0.7,
        help="Always-on GPUs are sized for the peak minute at this utilisation.",
        example="0.7",
    )
    # invocations stays the default: it is the meaning the README and `simulate serverless`
    # give p50/p99 (one percentile over every call), and a new default would change the
    # plans users already have; `functions` is the scope that sees rare functions' cold starts
    slo_scope: str = option(
        "invocations",
        help="What --slo is judged on: invocations (the percentile over every call of every "
        "function; busy functions dominate it) or functions (each function's own percentile "
        "over its own calls, met by at least --slo-functions of the invoked functions: the "
        "cold starts of rarely called functions, which the keep-alive policy decides).",
        example="functions",
    )
    slo_functions: float = option(
        0.95,
        help="With --slo-scope functions: the share of invoked functions (0-1] that must meet "
        "--slo on their own calls.",
        example="0.99",
    )
    budget_usd: float | None = option(
        None,
        help="Cost cap, US$ over the load's counted minutes (the US$ column: the trace or "
        "--minutes after --warmup): the choice is the cheapest meeting --slo within it.",
        example="50",
    )

    def __post_init__(self) -> None:
        ServerlessLoad.__post_init__(self)
        from gpucast.app.serve import parse_slo
        from gpucast.domain.serverless import parse_policy
        from gpucast.plan.serverless import SLO_SCOPES

        parse_slo(self.slo or DEFAULT_SLO)
        if self.slo_scope not in SLO_SCOPES:
            raise InvalidSpecError(
                "slo-scope",
                f"must be one of {', '.join(SLO_SCOPES)}",
                got=self.slo_scope,
                fix="e.g. --slo-scope functions",
            )
        if isinstance(self.slo_functions, bool) or not (
            math.isfinite(self.slo_functions) and 0 < self.slo_functions <= 1
        ):
            raise InvalidSpecError(
                "slo-functions",
                "must be a share of functions in (0, 1]",
                got=self.slo_functions,
                fix="e.g. --slo-functions 0.95",
            )
        if not self.policies:
            raise InvalidSpecError(
                "policies", "needs at least one policy", fix="e.g. --policies histogram"
            )
        for text in self.policies:
            parse_policy(text, flag="policies")
        if not (math.isfinite(self.max_utilisation) and 0 < self.max_utilisation <= 1):
            raise InvalidSpecError("max-utilisation", "must be in (0, 1]", got=self.max_utilisation)
        if self.budget_usd is not None and not (
            math.isfinite(self.budget_usd) and self.budget_usd > 0
        ):
            raise InvalidSpecError(
                "budget-usd", "must be > 0 US$", got=self.budget_usd, fix="e.g. --budget-usd 50"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServerlessResult:
    """The candidates, the choice and why, with sources and assumptions."""

    plan: ServerlessPlan
    gpu: str
    functions: int
    price_usd_per_hour: float
    sources: dict[str, str]
    assumptions: dict[str, str]
    validation: Validation
    arrival_process: str = ""
    #: the predicted cold start's validated error (:func:`_coldstart_validation`; None when
    #: every model's cold start was measured)
    cold_start_validation: Validation | None = None
    #: each model whose cold start a stored run measured: that run's provenance
    cold_start_measured: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    models: tuple[GpuFunction, ...] = ()
    #: what a candidate's instance serves (``app`` or ``function``), how many of them, and the
    #: trace's applications (None: it has none)
    unit: str = "function"
    units: int = 0
    apps: dict[str, Any] | None = None
    #: the functions' names (empty: ``--unit app`` grouped them into apps)
    function_names: tuple[str, ...] = ()
    #: the flags whose default set the result (``--gpu``, ``--slo``)
    defaults: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "rejected_beyond_context": self.plan.rejected,
            "validation": self.validation.to_dict(),
            "cold_start_validation": None
            if self.cold_start_validation is None
            else self.cold_start_validation.to_dict(),
            "cold_start_measured": dict(self.cold_start_measured),
            "gpu": self.gpu,
            "defaults": list(self.defaults),
            "arrival_process": self.arrival_process,
            "unit": self.unit,
            "units": self.units,
            "apps": self.apps,
            "functions": self.functions,
            "models": _model_dicts(self.models, self.function_names or None, self.functions),
            "price_usd_per_hour": self.price_usd_per_hour,
            "sources": dict(self.sources),
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
        }


def plan_serverless(
    request: PlanServerlessRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    config: Path | str | None = None,
    **options: Any,
) -> PlanServerlessResult:
    """Serverless (per keep-alive policy) vs always-on deployments of the same load: the
    cheapest meeting the latency SLO, and why (:mod:`gpucast.plan.serverless`). ``db``: the
    store ``--coldstart-run`` reads (default: ``$GPUCAST_DB``)."""
    from gpucast.app.serve import parse_slo
    from gpucast.domain.serverless import parse_policy
    from gpucast.plan.serverless import plan_serverless as plan

    request = resolve(PlanServerlessRequest, request, options, config)
    percentile, slo_s = parse_slo(request.slo or DEFAULT_SLO)
    load = _load(request, db)
    _check_warmup(request, load)
    if not load.trace.counts.any():  # every candidate would 'miss' at a latency of nan
        raise InvalidInputError(
            f"{'synthetic' if request.trace is None else 'trace'}: the load has no invocations: "
            "nothing to plan",
            fix="raise --synthetic or --minutes (45% of generated functions are invoked at most "
            "hourly)"
            if request.trace is None
            else "give a trace (or --day) with invocations",
        )
    if request.slo_scope == "invocations":
        _check_servable_share(load, percentile, request.warmup_s)
    always_on: AlwaysOnSizing | None = None
    always_on_warnings: tuple[str, ...] = ()
    if load.trace.tokens:  # language models batch continuously when always on
        from gpucast.app._serverless_llm import llm_always_on

        always_on, always_on_warnings = llm_always_on(
            models=tuple(f.model for f in load.functions), names=load.trace.names,
            paths=load.trace.paths, offsets_s=load.trace.offsets_s, gpu=load.gpu.name,
            percentile=percentile, slo_s=slo_s, warmup_s=request.warmup_s, price=load.price,
        )  # fmt: skip
    result = plan(
        load.trace.counts,
        exec_s=load.exec_s,
        cold_s=load.cold_s,
        memory_gib=load.memory_gib,
        swap_s=load.swap_s,
        gpu_memory_gib=usable_gib(load.gpu.memory_gib),  # the one rule: what it can fill
        price_usd_per_hour=load.price,
        # one candidate per distinct policy: fixed:5m,fixed:5m (or fixed:10m,fixed:600s) once
        policies=list(dict.fromkeys(parse_policy(p, flag="policies") for p in request.policies)),
        slo_percentile=percentile,
        slo_s=slo_s,
        billing=request.billing,
        max_utilisation=request.max_utilisation,
        gpu_name=load.gpu.name,
        exec_spread=load.exec_spread,
        slo_scope=request.slo_scope,
        slo_function_share=request.slo_functions,
        warmup_s=request.warmup_s,
        unit=load.unit,
        instance_gpus=load.gpus,
        always_on=always_on,
        always_on_by_peak=not load.trace.tokens,  # a request at a time: not how LLMs serve
        budget_usd=request.budget_usd,
        rejected=load.rejected,
    )
    limit = format_slo_latency(slo_s)
    slo = (
        f"p{percentile:g} of invocation latency (execution + cold start or swap) over every "
        f"call of every function <= {limit} (--slo-scope invocations; busy functions make "
        "most calls)"
        if request.slo_scope == "invocations"
        else f"each invoked function's own p{percentile:g} over its own calls (execution + "
        f"cold start or swap) <= {limit} for >= {request.slo_functions * 100:g}% of the "
        f"invoked {load.unit}s (--slo-scope functions)"
    ) + default_mark(request, "slo")
    assumptions = {
        **_load_assumptions(request, load),
        "warm-up": _warmup_text(result.warmup_s, result.horizon_s),
        "always-on": _always_on_text(request, result),
        "slo": slo,
    }
    units = int(load.trace.counts.shape[0])
    names = tuple(load.trace.names) if load.unit == "function" else None
    count = _functions(load.apps, units)
    return PlanServerlessResult(
        plan=result,
        gpu=load.gpu.name,
        functions=count,
        unit=load.unit,
        units=units,
        apps=load.apps,
        function_names=names or (),
        price_usd_per_hour=load.price,
        sources={
            "trace": load.trace.source,
            "price": load.price_source,
            **{
                f"model {f.model} ({served_by(k, len(load.functions), names, count)})": f.source
                for k, f in enumerate(load.functions)
            },
        },
        assumptions=assumptions,
        validation=_keepalive_validation(load),
        cold_start_validation=_coldstart_validation(load),
        cold_start_measured=_coldstart_measured(load),
        arrival_process=load.trace.arrival_process,
        warnings=load.warnings + always_on_warnings,
        models=load.functions,
        defaults=defaults_used(request, ("gpu", "slo")),
    )


def _check_servable_share(load: _Load, percentile: float, warmup_s: float) -> None:
    """Where the requests beyond the context window (after the warm-up, as invocations are
    counted) alone exceed ``100 - percentile``% of the calls, no candidate meets the SLO:
    plan serve's one line (:mod:`gpucast.app._context_window`), before any candidate is
    sized."""
    import numpy as np

    from gpucast.app._context_window import beyond_context_error
    from gpucast.catalog.llm import llm_model
    from gpucast.simulate.serverless import rejected_after, warmup_bins

    if load.rejected is None:
        return
    counts = load.trace.counts
    n_warm = warmup_bins(warmup_s, 60.0, int(counts.shape[1]))
    beyond = int(rejected_after(load.rejected, counts.shape, n_warm).sum())
    models = dict.fromkeys(f.model for f in load.functions)
    error = beyond_context_error(
        beyond=beyond, total=beyond + int(counts[:, n_warm:].sum()),
        longest=max(int(np.max(inp + out)) for _, inp, out in load.trace.tokens),
        windows=tuple((m, llm_model(m).max_context) for m in models),
        percentile=percentile, percentile_flag="--slo pNN<LATENCY",
    )  # fmt: skip
    if error is not None:
        raise error


def _always_on_text(request: PlanServerlessRequest, plan: ServerlessPlan) -> str:
    """The ``always-on`` assumption line: how the always-on candidate was sized."""
    if plan.always_on_sizing == "none":
        return (
            "none: a language model's always-on deployment is sized as `gpucast plan serve` "
            "sizes it, which found none here (the warning says why)"
        )
    if plan.always_on_sizing == "peak minute":
        return (
            "sized for the peak minute's GPU-seconds"
            + (" after the warm-up" if plan.warmup_s > 0 else "")
            + f" at {request.max_utilisation:.0%} utilisation and for every model resident "
            "(memory packed perfectly; an instance of several GPUs takes all of them); no "
            "queueing delay below that utilisation; no cold starts"
        )
    percentile, slo_s = plan.slo_percentile, plan.slo_s
    return (
        "each function's model served with continuous batching on replicas of its own "
        "(vLLM, colocated), sized as `gpucast plan serve --model MODEL --trace FILE --gpu "
        f"{request.gpu or DEFAULT_GPU} --slo-ttft-ms {slo_s * 1e3:g} --slo-percentile "
        f"{percentile:g} "
        "--no-disaggregation` sizes it (the fewest replicas whose first tokens come within "
        "the SLO, on the trace's busiest hour), then replicas added until the end-to-end "
        f"p{percentile:g} of the requests"
        + (" after the warm-up" if plan.warmup_s > 0 else "")
        + " (token-level simulator, as `simulate serve`; what the serverless candidates are "
        "judged on) is within it; --max-utilisation not used; priced at the serverless "
        "price per GPU-hour; no cold starts"
    )
