"""``gpucast.simulate_kaas``: Kernel-as-a-Service vs per-function GPUs (issue #19).

Each of ``--models`` is a function whose invocations (``--arrivals``, ``--rate`` per second
each: the serving verbs' arrival reader, :func:`gpucast.inputs.serving.arrivals`) run its
kernels on a ``--gpu``: the profile's inference operators, each class's kernels timed by its
roofline (:func:`gpucast.inputs.serverless.kernel_sequence`). The same arrivals are
simulated three ways (:func:`gpucast.simulate.kaas.simulate_kaas`): one GPU per function, a
pool of ``--pool-gpus`` shared per invocation, and the same pool shared per kernel (KaaS).
A way of sharing whose offered work exceeds its GPUs is overloaded: a warning says so, with
the calls offered and served and the GPUs the work needs, and its percentiles are marked as
not a steady state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app.serverless import DEFAULT_GPU
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import allow_large_option, check_pool_gpus, check_seed, check_work
from gpucast.domain.options import default_mark, defaults_used, documented, option
from gpucast.domain.units import format_duration

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.provenance import Validation
    from gpucast.simulate.kaas import KaasResult

#: longest simulated span
MAX_DURATION_S = 3600.0
#: invocations per second of each function, and seconds of arrivals, of generated arrivals
#: without --rate / --duration-s (a trace replays at its own rate, over its own span)
DEFAULT_RATE = 20.0
DEFAULT_DURATION_S = 10.0
#: GPUs of the shared pool without --pool-gpus
DEFAULT_POOL_GPUS = 1
#: memory per simulated invocation (its arrival, function, completion and latency, and its
#: entry in the pool's heap of ready kernels)
INVOCATION_BYTES = 200


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateKaasRequest:
    """Functions as kernel sequences on a GPU pool (``gpucast simulate kaas``)."""

    VERB: ClassVar[str] = "simulate kaas"

    models: tuple[str, ...] = option(
        ("resnet50", "bert-base"),
        help="Workloads, one function each (their profiled inference kernels).",
        example="resnet50,bert-base",
    )
    gpu: str | None = option(
        None, help=f"Catalog GPU of every GPU (default {DEFAULT_GPU}).", example="T4"
    )
    arrivals: str = option(
        "poisson",
        help="poisson | constant | bursty | trace:FILE (an arrival_s CSV, an Azure LLM trace "
        "or an Azure Functions count file), each function at --rate (a trace time-scaled to "
        "it, or as recorded without --rate).",
        example="constant",
    )
    rate: float | None = option(
        None,
        help=f"Invocations per second of each function (default {DEFAULT_RATE:g}; a trace: "
        "its own).",
        example="50",
    )
    pool_gpus: int | None = option(
        None, help=f"GPUs of the shared pool (default {DEFAULT_POOL_GPUS}).", example="2"
    )
    dispatch_us: float = option(
        0.0,
        help="What dispatching one unit of work costs beyond its kernels' launch overhead "
        "(in every kernel's time, as simulate serve prices it), microseconds (per kernel "
        "under KaaS, per invocation otherwise).",
        example="10",
    )
    duration_s: float | None = option(
        None,
        help=f"Simulated seconds of arrivals (default {DEFAULT_DURATION_S:g}; a trace: its "
        "whole span).",
        example="30",
    )
    seed: int = option(0, help="Seed of the arrivals.")
    allow_large: bool = allow_large_option()

    def __post_init__(self) -> None:
        from gpucast.inputs.serving import check_arrival_kind

        if not self.models or any(not m.strip() for m in self.models):
            raise InvalidSpecError(
                "models", "needs workload names", fix="e.g. --models resnet50,mlp"
            )
        check_arrival_kind(self.arrivals)
        if self.rate is not None and not (math.isfinite(self.rate) and 0 < self.rate <= 1e5):
            raise InvalidSpecError(
                "rate", "must be in (0, 100000] per second", got=self.rate, fix="e.g. --rate 50"
            )
        check_pool_gpus(self.pool_gpus)
        if not (math.isfinite(self.dispatch_us) and 0 <= self.dispatch_us <= 1e6):
            raise InvalidSpecError(
                "dispatch-us", "must be in [0, 1e6] us", got=self.dispatch_us,
                fix="e.g. --dispatch-us 20",
            )  # fmt: skip
        if self.duration_s is not None and not (
            math.isfinite(self.duration_s) and 0 < self.duration_s <= MAX_DURATION_S
        ):
            raise InvalidSpecError(
                "duration-s", f"must be in (0, {MAX_DURATION_S:g}] s", got=self.duration_s,
                fix="e.g. --duration-s 10",
            )  # fmt: skip
        check_seed(self.seed)

    @property
    def is_trace(self) -> bool:
        return self.arrivals.startswith("trace:")

    @property
    def labels(self) -> tuple[str, ...]:
        """One name per function: the model's, numbered where a model is given twice."""
        return tuple(
            m if self.models.count(m) == 1 else f"{m}#{self.models[:i].count(m) + 1}"
            for i, m in enumerate(self.models)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateKaasResult:
    """The three ways of sharing, on the same arrivals."""

    models: tuple[str, ...]
    gpu: str
    results: dict[str, KaasResult]
    sources: dict[str, str]
    validation: Validation
    assumptions: dict[str, str] = field(default_factory=dict)
    #: the arrival process the functions' invocations came from, as the output names it
    arrival_process: str = ""
    warnings: tuple[str, ...] = ()
    #: the flags whose default set the result (``--gpu``, ``--rate``, ...)
    defaults: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "gpu": self.gpu,
            "arrival_process": self.arrival_process,
            "sharing": {k: r.to_dict(self.models) for k, r in self.results.items()},
            "defaults": list(self.defaults),
            "validation": self.validation.to_dict(),
            "sources": dict(self.sources),
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
        }


def _round(value: float) -> str:
    """Three significant digits, without an exponent for large values."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _check_size(
    request: SimulateKaasRequest,
    sizes: list[int],
    calls: list[float],
    rate: float,
    duration_s: float,
    *,
    drawn: bool = False,
) -> None:
    """One clear error where kernel-level sharing would schedule more than
    :data:`gpucast.simulate.kaas.MAX_KERNELS` kernels one by one (unless --allow-large):
    ``calls`` invocations of each function (expected, ``rate x duration``, before the arrivals
    are drawn; then as drawn) times its kernels per call (``sizes``); and the memory of the
    invocations (:func:`~gpucast.domain.limits.check_work`)."""
    from gpucast.simulate.kaas import MAX_KERNELS

    kernels = sum(c * n for c, n in zip(calls, sizes, strict=True))
    if kernels > MAX_KERNELS and not request.allow_large:
        per_call = ", ".join(f"{m} {n:,}" for m, n in zip(request.labels, sizes, strict=True))
        longest_s = MAX_KERNELS / (rate * sum(sizes))
        fastest = MAX_KERNELS / (duration_s * sum(sizes))
        each = "one function" if len(sizes) == 1 else f"each of {len(sizes)} functions"
        raise InvalidSpecError(
            "duration-s",
            f"{rate:g} invocations/s of {each} for {duration_s:g} s ({sum(calls):,.0f} "
            f"invocations{'' if drawn else ' expected'}, kernels per call: {per_call}) are "
            f"{'' if drawn else 'about '}{kernels:,.0f} kernels for kernel-level sharing to "
            f"schedule one by one, more than {MAX_KERNELS:,}",
            fix=f"use --duration-s <= {_round(longest_s)} at this --rate, --rate <= "
            f"{_round(fastest)} at this --duration-s, or fewer --models, or pass --allow-large",
        )
    check_work(
        "rate",
        sum(calls),
        what="invocations",
        bytes_per_item=INVOCATION_BYTES,
        allow_large=request.allow_large,
        fix="lower --rate or --duration-s",
    )


def _arrivals(
    request: SimulateKaasRequest, sizes: list[int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], float, str, tuple[str, ...]]:
    """Each function's invocations from the serving verbs' reader (its seed ``--seed + i``),
    merged: (function, time) sorted by time, the window they cover, the process in words and
    the reader's warnings. Refused before anything is drawn where the expected work is too
    large."""
    import numpy as np

    from gpucast.inputs.serving import arrivals

    rate = request.rate if request.rate is not None or request.is_trace else DEFAULT_RATE
    duration = request.duration_s
    if duration is None and not request.is_trace:
        duration = DEFAULT_DURATION_S
    n = len(sizes)
    if rate is not None and duration is not None:
        _check_size(request, sizes, [rate * duration] * n, rate, duration)
    streams = [arrivals(request.arrivals, rate, duration, request.seed + k) for k in range(n)]
    window = max(s.duration_s for s in streams)
    if window > MAX_DURATION_S * (1 + 1e-12):
        raise InvalidSpecError(
            "duration-s", f"is not given, and {request.arrivals} spans {window:,.0f} s, more "
            f"than {MAX_DURATION_S:g}", fix=f"pass --duration-s <= {MAX_DURATION_S:g}",
        )  # fmt: skip
    counts = [s.times_s.size for s in streams]
    func = np.repeat(np.arange(n, dtype=np.int64), counts)
    times = np.concatenate([s.times_s for s in streams])
    order = np.argsort(times, kind="stable")
    func, times = func[order], times[order]
    drawn_rate = sum(counts) / n / window if window > 0 else math.inf
    _check_size(request, sizes, [float(c) for c in counts], drawn_rate, window, drawn=True)
    if func.size == 0:
        raise InvalidSpecError(
            "rate", "gives no invocation in --duration-s", fix="raise --rate or --duration-s"
        )
    marks = default_mark(request, "rate", "duration_s") if not request.is_trace else ""
    each = "each function" if n == 1 else f"each of {n} functions (seeds {request.seed}-"
    each += "" if n == 1 else f"{request.seed + n - 1})"
    text = f"{streams[0].source} for {format_duration(window)}{marks}, {each}"
    if request.is_trace and n > 1:
        text += "; every function replays the same trace"
    warnings = tuple(dict.fromkeys(w for s in streams for w in s.warnings))
    return func, times, window, text, warnings


def _overload_warning(results: dict[str, KaasResult]) -> list[str]:
    """One line for the overloaded ways of sharing, if any: the calls/s offered and each one's
    served, the GPUs the work needs (as ``simulate serverless --pool-gpus`` says it) and what
    that does to the percentiles."""
    over = {name: r for name, r in results.items() if r.overloaded}
    if not over:
        return []
    first = next(iter(over.values()))
    parts = []
    for name, r in over.items():
        gpus = f"{r.gpus} GPU{'' if r.gpus == 1 else 's'}"
        where = (
            f"one GPU per function ({gpus}; the work needs {r.gpus_needed:,}, each function's "
            "own busy all of the run)"
            if name == "dedicated"
            else f"the pool of {gpus} shared per {name} (the work needs {r.gpus_needed:,}, each "
            f"busy all of the run: --pool-gpus {r.gpus_needed})"
        )
        parts.append(f"{r.throughput_per_s:,.1f} by {where}")
    return [
        f"overloaded: {first.offered_per_s:,.1f} calls/s offered, served {'; '.join(parts)}. "
        "Calls queue for as long as they arrive: the p50/p99 marked * grow with --duration-s, "
        "not a steady state"
    ]


def _check_pool_memory(models: tuple[str, ...], gpu: GpuSpec) -> None:
    """Every pool GPU holds every function's weights (the verb's assumption) and runs one
    kernel at a time: all the weights plus the largest working set must fit one GPU, by the
    rule an app's instance of several models meets (QA 37 V #5); one error otherwise."""
    from gpucast.domain.gpu_memory import usable_gib, usable_text
    from gpucast.domain.units import GIB
    from gpucast.inputs.workload import workload_profile

    memory = {m: workload_profile(m, "fp32", batch_size=1).memory for m in dict.fromkeys(models)}
    weights = sum(memory[m].weights_bytes for m in models)
    working = max(p.inference_peak_bytes - p.weights_bytes for p in memory.values())
    need_gib = (weights + working) / GIB
    if need_gib > usable_gib(gpu.memory_gib):
        raise InvalidSpecError(
            "models",
            f"the {len(models)} functions' weights plus the largest working set need "
            f"{need_gib:.1f} GiB on every GPU (each holds every function's model), more than a "
            f"{gpu.name}'s {usable_text(gpu.memory_gib)}",
            fix="give fewer or smaller --models, or a GPU with more memory (--gpu)",
        )


def simulate_kaas(
    request: SimulateKaasRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateKaasResult:
    """Kernel-level vs invocation-level sharing of a GPU pool, and one GPU per function."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.serverless import kernel_sequence
    from gpucast.simulate.kaas import MAX_KERNELS, SHARINGS
    from gpucast.simulate.kaas import simulate_kaas as simulate

    request = resolve(SimulateKaasRequest, request, options, config)
    gpu = load_catalog().gpu(request.gpu or DEFAULT_GPU)
    pool_gpus = request.pool_gpus or DEFAULT_POOL_GPUS
    by_model = {m: kernel_sequence(m, gpu) for m in dict.fromkeys(request.models)}
    _check_pool_memory(request.models, gpu)
    sources = {f"model {m}": source for m, (_seq, source) in by_model.items()}
    seqs = [by_model[m][0] for m in request.models]
    sizes = [int(s.size) for s in seqs]
    func, arrival, window_s, process, warnings = _arrivals(request, sizes)
    dispatch_s = request.dispatch_us * 1e-6
    most = math.inf if request.allow_large else MAX_KERNELS
    results = {
        s: simulate(
            seqs,
            func,
            arrival,
            sharing=s,
            gpus=pool_gpus,
            dispatch_s=dispatch_s,
            window_s=window_s,
            max_dispatches=most,
        )
        for s in SHARINGS
    }
    assumptions = {
        "weights": "every GPU holds every function's weights: no cold starts, no copies "
        "between GPUs",
        "kernels": "one kernel at a time per GPU at its solo duration (the serving engine's "
        "batch-1 time on the device split by per-class roofline shares, plus the engine's "
        "launch overhead per kernel, as simulate serve and simulate serverless price one "
        "forward pass; no overlap)",
        "dispatch": f"{request.dispatch_us:g} us per kernel (KaaS) or per invocation, beyond "
        "each kernel's launch overhead",
        "pool": f"{pool_gpus} x {gpu.name}{default_mark(request, 'pool_gpus')}",
    }
    return SimulateKaasResult(
        models=request.labels,
        gpu=gpu.name,
        results=results,
        sources=sources,
        validation=validation_for("kaas-sharing", [gpu.name], "fp32", pool_gpus),
        assumptions=assumptions,
        arrival_process=process,
        warnings=(*warnings, *_overload_warning(results)),
        defaults=defaults_used(
            request,
            ("models", "gpu", "pool_gpus", *(() if request.is_trace else ("rate", "duration_s"))),
        ),
    )
