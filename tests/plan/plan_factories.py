"""A tiny synthetic catalog, workload and risk model for fast planner tests (no torch)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Any

from gpucast.catalog import Catalog
from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.plan import TrainRequest
from gpucast.plan.inputs import PerfParams, RiskInputs, WorkloadFacts
from gpucast.plan.train import PlanContext
from gpucast.predict.collective import RDMA
from gpucast.predict.power import PowerConstants, PowerModel
from gpucast.predict.revocation import ExponentialLifetime

DAY = date(2026, 1, 1)
URL = "https://example.com"


def gpu(name: str, tflops: float, mem_gib: float, bw: float, nvlink: float | None) -> GpuSpec:
    return GpuSpec(
        name=name,
        vendor="nvidia",
        architecture="Test",
        fp32_tflops=tflops,
        tf32_tflops=None,
        fp16_tflops=None,
        bf16_tflops=None,
        fp8_tflops=None,
        memory_gib=mem_gib,
        memory_bandwidth_gbps=bw,
        interconnect_gbps=nvlink,
        pcie_generation=3,
        tdp_w=300,
        sm_count=80,
        source_url=URL,
        as_of=DAY,
    )


def offer(
    provider: str,
    region: str,
    itype: str,
    g: str | None,
    n: int,
    od: float,
    spot: float | None,
    net: float = 10.0,
    vcpus: int = 8,
) -> Offer:
    return Offer(
        provider=provider,
        region=region,
        instance_type=itype,
        gpu=g,
        gpus=n,
        vcpus=vcpus,
        memory_gib=64,
        network_gbps=net,
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        source_url=URL,
        as_of=DAY,
    )


def catalog() -> Catalog:
    gpus = (
        gpu("SLOW", 8.0, 16, 300, None),
        gpu("FAST", 30.0, 40, 1500, 300.0),
    )
    offers = (
        offer("aws", "r1", "slow.1", "SLOW", 1, 0.5, 0.15),
        offer("aws", "r1", "slow.4", "SLOW", 4, 2.0, 0.6, net=25),
        offer("aws", "r1", "fast.1", "FAST", 1, 3.0, 1.0),
        offer("aws", "r1", "fast.8", "FAST", 8, 24.0, 8.0, net=100),
        offer("aws", "r1", "cpu.4", None, 0, 0.2, 0.05, vcpus=4),
        offer("gcp", "r2", "slow-g", "SLOW", 1, 0.45, None),
        offer("gcp", "r2", "fast-g4", "FAST", 4, 11.0, 4.0, net=50),
    )
    return Catalog(gpus=gpus, offers=offers)


def power_model() -> PowerModel:
    """A power model holding the default constants as if fitted, no GPU factors."""
    model = PowerModel()
    model.constants_ = PowerConstants()
    return model


def facts(**changes: Any) -> WorkloadFacts:
    base = WorkloadFacts(
        name="synthetic",
        precision="fp32",
        profile_batch=32,
        matmul_flops_per_sample=2.4e10,
        matmul_flops_fixed=0.0,
        memory_bytes_per_sample=3e8,
        memory_bytes_fixed=2e8,
        n_kernels=300,
        gradient_bytes=1e8,
        n_tensors=160,
        max_tensor_bytes=1e7,
        weights_bytes=1e8,
        optimizer_bytes=1e8,
        activation_bytes_per_sample=8e7,
        n_layers=50,
    )
    return replace(base, **changes)


def context(hazard_per_hour: float = 0.05, **fact_changes: Any) -> PlanContext:
    life = ExponentialLifetime(hazard_per_hour=hazard_per_hour, source="test hazard")
    return PlanContext(
        catalog=catalog(),
        facts=facts(**fact_changes),
        # the planner's mechanics on nominal links (TCP constants are tested on their own)
        perf=PerfParams(collective_tcp=RDMA),
        risk=RiskInputs(
            lifetime=lambda g, r, p: life,
            startup_mean_s=60.0,
            startup_spot_s=60.0,
            startup_on_demand_s=60.0,
        ),
    )


def request(**changes: Any) -> TrainRequest:
    base: dict[str, Any] = {
        "workload": "resnet50",
        "epochs": 2.0,
        "dataset_size": 200_000,
        "deadline_s": 12 * 3600.0,
        "max_gpus": 16,
        "mc_runs": 1000,
        "max_simulated": 4,
    }
    base.update(changes)
    return TrainRequest(**base)
