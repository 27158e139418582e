"""The cold-start arithmetic: the slowest link bounds the weights, phases add up."""

from __future__ import annotations

import dataclasses

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serverless import ColdStartMeasurement, ColdStartPrediction
from gpucast.predict.coldstart import (
    forward_s,
    load_bandwidth_gbs,
    predict_cold_start,
    weight_load_s,
    with_measured,
)


def test_the_slowest_link_bounds_the_copy() -> None:
    assert load_bandwidth_gbs({"s3": 0.09, "network": 1.25, "pcie3": 12.0}) == (0.09, "s3")
    assert load_bandwidth_gbs({"nvme": 7.0, "network": None, "pcie3": 12.0}) == (7.0, "nvme")
    assert weight_load_s(1e9, {"a": 2.0, "b": 4.0}) == pytest.approx(0.5)
    assert weight_load_s(1e9, {"a": 2.0}, parameter_tensors=100, per_tensor_s=1e-3) == (
        pytest.approx(0.6)
    )


def test_forward_is_a_roofline() -> None:
    assert forward_s(1e12, 1e9, flops=1e12, memory_gbs=100.0) == pytest.approx(1.0)
    assert forward_s(1e9, 1e9, flops=1e12, memory_gbs=1.0) == pytest.approx(1.0)


def test_phases_add_up_and_grow_with_the_weights() -> None:
    kw = {
        "parameter_tensors": 10,
        "inference_flops": 1e9,
        "links_gbs": {"ebs": 0.125, "pcie": 12.0},
        "flops": 1e12,
        "memory_gbs": 300.0,
        "container_s": 1.0,
        "cuda_context_s": 0.5,
        "first_call_s": 0.2,
    }
    small = predict_cold_start(weight_bytes=10**8, **kw)  # type: ignore[arg-type]
    big = predict_cold_start(weight_bytes=10**9, **kw)  # type: ignore[arg-type]
    assert small.bound_by == "ebs"
    assert small.weight_load_s == pytest.approx(0.8)
    assert small.total_s == pytest.approx(1.0 + 0.5 + 0.8 + small.first_inference_s)
    assert big.total_s > small.total_s
    assert small.to_dict()["total_s"] == pytest.approx(small.total_s)


@pytest.mark.parametrize("links", [{}, {"a": None}, {"a": 0.0}, {"a": -1.0}, {"a": float("nan")}])
def test_bad_links(links: dict[str, float | None]) -> None:
    with pytest.raises(InvalidSpecError):
        weight_load_s(1e6, links)


def test_bad_phase() -> None:
    with pytest.raises(InvalidSpecError, match="container_s"):
        predict_cold_start(
            weight_bytes=1, parameter_tensors=1, inference_flops=1.0, links_gbs={"a": 1.0},
            flops=1.0, memory_gbs=1.0, container_s=-1.0, cuda_context_s=0.0, first_call_s=0.0,
        )  # fmt: skip


PREDICTED = ColdStartPrediction(
    container_s=1.0,
    cuda_context_s=0.5,
    weight_load_s=0.1,
    first_inference_s=0.2,
    weight_bytes=10**9,
    load_gb_per_s=10.0,
    bound_by="local-nvme",
    sources={"container-start": "catalog", "cuda-context": "catalog", "storage": "nvme",
             "pcie": "pcie3", "forward": "roofline"},
)  # fmt: skip


def _measured(**kw: object) -> ColdStartMeasurement:
    fields: dict[str, object] = {
        "workload": "mlp", "options": {}, "device": "cuda:0", "batch_size": 1,
        "weight_bytes": 10**9, "parameter_tensors": 4, "cuda_context_s": 0.3,
        "weight_read_s": 1.5, "to_device_s": 0.5, "first_inference_s": 0.04,
        "steady_inference_s": 0.01, "cache_dropped": True, "host": "h",
        "created_at": "2026-01-01T00:00:00", "gpu_name": "Tesla T4", **kw,
    }  # fmt: skip
    return ColdStartMeasurement(**fields)  # type: ignore[arg-type]


def test_measured_phases_replace_the_predicted_ones() -> None:
    cold = with_measured(PREDICTED, _measured(), source="run 3")
    # CUDA context, weights (read + copy to the device) and first inference are measured
    assert (cold.cuda_context_s, cold.weight_load_s, cold.first_inference_s) == (0.3, 2.0, 0.04)
    assert cold.container_s == 1.0  # never measured: predicted
    assert cold.total_s == pytest.approx(1.0 + 0.3 + 2.0 + 0.04)
    assert cold.measured_phases == ("cuda_context", "weight_load", "first_inference")
    assert cold.predicted_phases == ("container",)
    assert cold.load_gb_per_s == pytest.approx(0.5) and cold.bound_by == "measured"
    # the run replaces the predicted phases' sources; the container's stays
    assert cold.sources == {"container-start": "catalog", "cuda-context": "run 3",
                            "weights": "run 3", "first-inference": "run 3"}  # fmt: skip
    assert cold.to_dict()["measured_phases"] == list(cold.measured_phases)


def test_a_phase_the_run_lacks_or_the_user_gives_stays() -> None:
    cpu = with_measured(PREDICTED, _measured(cuda_context_s=None, device="cpu"), source="r")
    assert cpu.cuda_context_s == 0.5 and "cuda_context" in cpu.predicted_phases
    kept = with_measured(PREDICTED, _measured(), source="r", keep=["cuda_context"])
    assert kept.cuda_context_s == 0.5 and kept.weight_load_s == 2.0
    with pytest.raises(InvalidSpecError, match="keep"):
        with_measured(PREDICTED, _measured(), source="r", keep=["boot"])
    with pytest.raises(InvalidSpecError, match="measured_phases"):
        dataclasses.replace(PREDICTED, measured_phases=("boot",))
