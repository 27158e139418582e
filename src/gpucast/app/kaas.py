"""``gpucast.simulate_kaas``: Kernel-as-a-Service vs per-function GPUs (issue #19).

Each of ``--models`` is a function whose invocations (Poisson, ``--rate`` per second each) run
its kernels on a ``--gpu``: the profile's inference operators, each class's kernels timed by
its roofline (:func:`gpucast.inputs.serverless.kernel_sequence`). The same arrivals are
simulated three ways (:func:`gpucast.simulate.kaas.simulate_kaas`): one GPU per function, a
pool of ``--pool-gpus`` shared per invocation, and the same pool shared per kernel (KaaS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option

if TYPE_CHECKING:
    from gpucast.domain.provenance import Validation
    from gpucast.simulate.kaas import KaasResult

#: longest simulated span
MAX_DURATION_S = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateKaasRequest:
    """Functions as kernel sequences on a GPU pool (``gpucast simulate kaas``)."""

    VERB: ClassVar[str] = "simulate kaas"

    models: tuple[str, ...] = option(
        ("resnet50", "bert-base"),
        help="Workloads, one function each (their profiled inference kernels).",
        example="resnet50,bert-base",
    )
    gpu: str = option("T4", help="Catalog GPU of every GPU.", example="T4")
    rate: float = option(20.0, help="Invocations per second of each function.", example="50")
    pool_gpus: int = option(1, help="GPUs of the shared pool.", example="2")
    dispatch_us: float = option(
        0.0,
        help="What dispatching one unit of work costs, microseconds (per kernel under KaaS, "
        "per invocation otherwise).",
        example="10",
    )
    duration_s: float = option(10.0, help="Simulated seconds of arrivals.", example="30")
    seed: int = option(0, help="Seed of the arrivals.")

    def __post_init__(self) -> None:
        if not self.models or any(not m.strip() for m in self.models):
            raise InvalidSpecError("models", "needs workload names", fix="e.g. resnet50")
        if not (math.isfinite(self.rate) and 0 < self.rate <= 1e5):
            raise InvalidSpecError("rate", "must be in (0, 100000] per second", got=self.rate)
        if isinstance(self.pool_gpus, bool) or not 1 <= self.pool_gpus <= 1024:
            raise InvalidSpecError(
                "pool-gpus", "must be an integer in [1, 1024]", got=self.pool_gpus
            )
        if not (math.isfinite(self.dispatch_us) and 0 <= self.dispatch_us <= 1e6):
            raise InvalidSpecError("dispatch-us", "must be in [0, 1e6] us", got=self.dispatch_us)
        if not (math.isfinite(self.duration_s) and 0 < self.duration_s <= MAX_DURATION_S):
            raise InvalidSpecError(
                "duration-s", f"must be in (0, {MAX_DURATION_S:g}] s", got=self.duration_s
            )
        if isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            raise InvalidSpecError("seed", "must be an integer in [0, 2^63)", got=self.seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateKaasResult:
    """The three ways of sharing, on the same arrivals."""

    models: tuple[str, ...]
    gpu: str
    results: dict[str, KaasResult]
    sources: dict[str, str]
    validation: Validation
    assumptions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "gpu": self.gpu,
            "sharing": {k: r.to_dict(self.models) for k, r in self.results.items()},
            "validation": self.validation.to_dict(),
            "sources": dict(self.sources),
            "assumptions": dict(self.assumptions),
        }


def _round(value: float) -> str:
    """Three significant digits, without an exponent for large values."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _check_size(
    request: SimulateKaasRequest, sizes: list[int], calls: list[float], *, drawn: bool = False
) -> None:
    """One clear error where kernel-level sharing would schedule more than
    :data:`gpucast.simulate.kaas.MAX_KERNELS` kernels one by one: ``calls`` invocations of
    each function (expected, ``rate x duration``, before the arrivals are drawn; then as
    drawn) times its kernels per call (``sizes``)."""
    from gpucast.simulate.kaas import MAX_KERNELS

    kernels = sum(c * n for c, n in zip(calls, sizes, strict=True))
    if kernels <= MAX_KERNELS:
        return
    per_call = ", ".join(f"{m} {n:,}" for m, n in zip(request.models, sizes, strict=True))
    longest_s = MAX_KERNELS / (request.rate * sum(sizes))
    fastest = MAX_KERNELS / (request.duration_s * sum(sizes))
    each = "one function" if len(sizes) == 1 else f"each of {len(sizes)} functions"
    raise InvalidSpecError(
        "duration-s",
        f"{request.rate:g} invocations/s of {each} for {request.duration_s:g} s "
        f"({sum(calls):,.0f} invocations{'' if drawn else ' expected'}, kernels per call: "
        f"{per_call}) are {'' if drawn else 'about '}{kernels:,.0f} kernels for kernel-level "
        f"sharing to schedule one by one, more than {MAX_KERNELS:,}",
        fix=f"use --duration-s <= {_round(longest_s)} at this --rate, --rate <= "
        f"{_round(fastest)} at this --duration-s, or fewer --models",
    )


def simulate_kaas(
    request: SimulateKaasRequest | None = None, /, **options: Any
) -> SimulateKaasResult:
    """Kernel-level vs invocation-level sharing of a GPU pool, and one GPU per function."""
    import numpy as np

    from gpucast.catalog import load_catalog
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.serverless import kernel_sequence
    from gpucast.simulate.kaas import SHARINGS, poisson_arrivals
    from gpucast.simulate.kaas import simulate_kaas as simulate

    request = resolve(SimulateKaasRequest, request, options)
    gpu = load_catalog().gpu(request.gpu)
    seqs, sources = [], {}
    for m in request.models:
        seq, source = kernel_sequence(m, gpu)
        seqs.append(seq)
        sources[f"model {m}"] = source
    sizes = [int(s.size) for s in seqs]
    _check_size(request, sizes, [request.rate * request.duration_s] * len(seqs))
    func, arrival = poisson_arrivals(
        [request.rate] * len(seqs), request.duration_s, np.random.default_rng(request.seed)
    )
    _check_size(request, sizes, np.bincount(func, minlength=len(seqs)).tolist(), drawn=True)
    if func.size == 0:
        raise InvalidSpecError(
            "rate", "gives no invocation in --duration-s", fix="raise --rate or --duration-s"
        )
    dispatch_s = request.dispatch_us * 1e-6
    results = {
        s: simulate(seqs, func, arrival, sharing=s, gpus=request.pool_gpus, dispatch_s=dispatch_s)
        for s in SHARINGS
    }
    assumptions = {
        "weights": "every GPU holds every function's weights: no cold starts, no copies "
        "between GPUs",
        "kernels": "one kernel at a time per GPU at its solo roofline duration (no overlap, "
        "no launch gaps beyond --dispatch-us)",
        "dispatch": f"{request.dispatch_us:g} us per kernel (KaaS) or per invocation",
        "arrivals": f"Poisson, {request.rate:g}/s per function for {request.duration_s:g} s, "
        f"seed {request.seed}",
    }
    return SimulateKaasResult(
        models=tuple(request.models),
        gpu=gpu.name,
        results=results,
        sources=sources,
        validation=validation_for("kaas-sharing", [gpu.name], "fp32", request.pool_gpus),
        assumptions=assumptions,
    )
