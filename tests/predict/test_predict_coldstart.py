"""The cold-start arithmetic: the slowest link bounds the weights, phases add up."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.coldstart import (
    forward_s,
    load_bandwidth_gbs,
    predict_cold_start,
    weight_load_s,
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
