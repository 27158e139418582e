"""Cold-start time of a serverless GPU function, phase by phase (issue #19).

Pure arithmetic on facts and measured rates (no files, no clock):

- weights: ``bytes / min(storage, network, PCIe)`` -- the copy streams through every link on
  its way, so the slowest bounds it -- plus ``per_tensor_s`` for each tensor deserialised;
- first inference: one roofline forward pass, ``max(FLOPs / peak, weight bytes / memory
  bandwidth)``, plus the first call's extra cost (handle creation, kernel selection);
- container start and CUDA context: durations from ``catalog/data/coldstart.csv`` or measured.

:func:`with_measured` puts the phases of a measured cold start (``gpucast measure coldstart``)
in place of the predicted ones, phase by phase.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serverless import COLDSTART_PHASES, ColdStartMeasurement, ColdStartPrediction

GB = 1e9


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(name, "must be > 0", got=value)


def load_bandwidth_gbs(links_gbs: Mapping[str, float | None]) -> tuple[float, str]:
    """(GB/s, name) of the slowest of the links a weight copy crosses (None: not crossed)."""
    crossed = {name: gbs for name, gbs in links_gbs.items() if gbs is not None}
    if not crossed:
        raise InvalidSpecError("links", "need at least one bandwidth (storage, network or PCIe)")
    for name, gbs in crossed.items():
        _positive(f"{name} bandwidth", gbs)
    name = min(crossed, key=lambda k: crossed[k])
    return crossed[name], name


def weight_load_s(
    weight_bytes: float,
    links_gbs: Mapping[str, float | None],
    *,
    parameter_tensors: int = 0,
    per_tensor_s: float = 0.0,
) -> float:
    """Seconds to bring ``weight_bytes`` through ``links_gbs`` (the slowest bounds the copy)."""
    if not (math.isfinite(weight_bytes) and weight_bytes >= 0):
        raise InvalidSpecError("weight bytes", "must be >= 0", got=weight_bytes)
    gbs, _ = load_bandwidth_gbs(links_gbs)
    return weight_bytes / (gbs * GB) + max(0, parameter_tensors) * max(0.0, per_tensor_s)


def forward_s(
    inference_flops: float, weight_bytes: float, *, flops: float, memory_gbs: float
) -> float:
    """Roofline time of one forward pass: compute- or weight-read-bound, whichever is longer."""
    _positive("flops", flops)
    _positive("memory_gbs", memory_gbs)
    return max(inference_flops / flops, weight_bytes / (memory_gbs * GB))


def predict_cold_start(
    *,
    weight_bytes: int,
    parameter_tensors: int,
    inference_flops: float,
    links_gbs: Mapping[str, float | None],
    flops: float,
    memory_gbs: float,
    container_s: float,
    cuda_context_s: float,
    first_call_s: float,
    per_tensor_s: float = 0.0,
    sources: Mapping[str, str] | None = None,
    first_forward_s: float | None = None,
) -> ColdStartPrediction:
    """Every phase of one cold start (module docstring). ``first_forward_s``: the first call's
    forward pass as a serving latency model gives it (None: its roofline, :func:`forward_s`)."""
    for name, value in (
        ("container_s", container_s),
        ("cuda_context_s", cuda_context_s),
        ("first_call_s", first_call_s),
        ("per_tensor_s", per_tensor_s),
    ):
        if not (math.isfinite(value) and value >= 0):
            raise InvalidSpecError(name, "must be >= 0", got=value)
    gbs, bound = load_bandwidth_gbs(links_gbs)
    return ColdStartPrediction(
        container_s=container_s,
        cuda_context_s=cuda_context_s,
        weight_load_s=weight_load_s(
            weight_bytes, links_gbs, parameter_tensors=parameter_tensors, per_tensor_s=per_tensor_s
        ),
        first_inference_s=(
            forward_s(inference_flops, weight_bytes, flops=flops, memory_gbs=memory_gbs)
            if first_forward_s is None
            else first_forward_s
        )
        + first_call_s,
        weight_bytes=int(weight_bytes),
        load_gb_per_s=gbs,
        bound_by=bound,
        sources=dict(sources or {}),
    )


#: the ``sources`` keys a predicted phase rests on, the first naming the phase when measured
_PREDICTED_SOURCES: dict[str, tuple[str, ...]] = {
    "container": ("container-start",),
    "cuda_context": ("cuda-context",),
    "weight_load": ("weights", "storage", "instance-ebs", "network", "pcie"),
    "first_inference": ("first-inference", "forward", "first-call"),
}


def measured_phases_s(measured: ColdStartMeasurement) -> dict[str, float]:
    """The phases of :data:`~gpucast.domain.serverless.COLDSTART_PHASES` a measured cold start
    has, in seconds: the CUDA context (when the process had to create one), the weights (read
    from the file plus the copy to the device: what the predicted ``weight_load`` covers) and
    the first inference. The container start is never among them: ``measure coldstart`` runs
    in a process that is already up."""
    phases = {
        "weight_load": measured.weight_read_s + measured.to_device_s,
        "first_inference": measured.first_inference_s,
    }
    if measured.cuda_context_s is not None:
        phases["cuda_context"] = measured.cuda_context_s
    return phases


def with_measured(
    predicted: ColdStartPrediction,
    measured: ColdStartMeasurement,
    *,
    source: str,
    keep: Collection[str] = (),
) -> ColdStartPrediction:
    """``predicted`` with each phase ``measured`` has (:func:`measured_phases_s`) in place of
    the predicted one -- except the phases in ``keep`` (given outright by the user, which wins
    over both). ``source`` names the run; the weights' rate becomes the measured one
    (``bound_by`` "measured"). A phase the run lacks stays predicted."""
    unknown = sorted(set(keep) - set(COLDSTART_PHASES))
    if unknown:
        raise InvalidSpecError("keep", f"must be among {', '.join(COLDSTART_PHASES)}", got=unknown)
    phases = {p: s for p, s in measured_phases_s(measured).items() if p not in keep}
    for phase, seconds in phases.items():
        if not (math.isfinite(seconds) and seconds >= 0):
            raise InvalidSpecError(f"measured {phase}", "must be >= 0 s", got=seconds)
    if not phases:
        return predicted
    sources = {
        k: v
        for k, v in predicted.sources.items()
        if not any(k in _PREDICTED_SOURCES[p] for p in phases)
    }
    for phase in phases:
        sources[_PREDICTED_SOURCES[phase][0]] = source
    changes: dict[str, object] = {f"{p}_s": s for p, s in phases.items()}
    if "weight_load" in phases:
        changes["load_gb_per_s"] = (
            measured.weight_bytes / (phases["weight_load"] * GB)
            if phases["weight_load"] > 0 and measured.weight_bytes > 0
            else predicted.load_gb_per_s
        )
        changes["bound_by"] = "measured"
    return dataclasses.replace(
        predicted,
        sources=sources,
        measured_phases=tuple(
            p for p in COLDSTART_PHASES if p in phases or p in predicted.measured_phases
        ),
        **changes,  # type: ignore[arg-type]
    )
