"""Per-GPU precision in the planner: each GPU type priced at its own precision and facts."""

from __future__ import annotations

from dataclasses import replace

import pytest
from plan_factories import catalog, context, facts, request

from gpucast.catalog import Catalog
from gpucast.plan.inputs import GpuPrecision, build_gpu_table
from gpucast.plan.train import plan_training, planned_gpus
from gpucast.predict.roofline import RooflineEfficiency

#: FAST as an Ampere-class part: TF32 and bf16 tensor cores far above its fp32 peak
TENSOR = {"tf32_tflops": 120.0, "bf16_tflops": 240.0, "fp16_tflops": 240.0}


def _tensor_catalog() -> Catalog:
    base = catalog()
    gpus = tuple(replace(g, **TENSOR) if g.name == "FAST" else g for g in base.gpus)
    return Catalog(gpus=gpus, offers=base.offers)


def _compute_per_sample(table: object, name: str) -> float:
    return float(table.per_sample_s[table.index(name), 0])  # type: ignore[attr-defined]


def test_each_gpu_uses_its_precision_peak_and_facts() -> None:
    cat = _tensor_catalog()
    specs = [cat.gpu("SLOW"), cat.gpu("FAST")]
    fp32 = facts()
    bf16 = facts(precision="bf16", activation_bytes_per_sample=4e7, memory_bytes_per_sample=1.5e8)
    eff = RooflineEfficiency()
    plain = build_gpu_table(fp32, specs)
    mixed = build_gpu_table(
        fp32, specs, per_gpu={"FAST": GpuPrecision(precision="bf16", facts=bf16)}
    )
    tf32 = build_gpu_table(
        fp32, specs, per_gpu={"FAST": GpuPrecision(precision="tf32", facts=fp32)}
    )
    assert plain.precision == ("fp32", "fp32")
    assert mixed.precision == ("fp32", "bf16")
    assert tf32.precision == ("fp32", "tf32")
    # SLOW (not in per_gpu) is untouched
    assert _compute_per_sample(mixed, "SLOW") == _compute_per_sample(plain, "SLOW")
    # FAST's matmuls at its bf16 / TF32 peak and the tensor-core efficiency
    flops = fp32.matmul_flops_per_sample
    assert _compute_per_sample(mixed, "FAST") == pytest.approx(
        flops / (eff.compute_efficiency("bf16") * 240e12)
    )
    assert _compute_per_sample(tf32, "FAST") == pytest.approx(
        flops / (eff.compute_efficiency("tf32") * 120e12)
    )
    assert _compute_per_sample(plain, "FAST") == pytest.approx(
        flops / (eff.compute_efficiency("fp32") * 30e12)
    )
    # activations at each GPU's precision; bf16 moves fewer bytes
    assert list(mixed.activation_bytes_per_sample) == [8e7, 4e7]
    assert list(tf32.activation_bytes_per_sample) == [8e7, 8e7]
    assert mixed.per_sample_s[1, 1] < plain.per_sample_s[1, 1]


def test_candidates_name_their_precision() -> None:
    ctx = replace(
        context(),
        catalog=_tensor_catalog(),
        per_gpu={
            "FAST": GpuPrecision(
                precision="bf16", facts=facts(precision="bf16", activation_bytes_per_sample=4e7)
            ),
            "SLOW": GpuPrecision(precision="fp32", facts=facts()),
        },
    )
    plan = plan_training(request(allow_mixed=True, max_gpus=8), ctx)
    assert {c.precision for c in plan.candidates} == {"bf16", "fp32", "bf16+fp32"}
    for c in plan.candidates:
        want = "+".join(dict.fromkeys("bf16" if p.gpu == "FAST" else "fp32" for p in c.parts))
        assert c.precision == want, c.label()
        assert c.label().endswith(f" {want}")
        assert c.to_dict()["precision"] == want
    # one precision everywhere without per_gpu: the facts' own
    plain = plan_training(request(), context())
    assert {c.precision for c in plain.candidates} == {"fp32"}


def test_planned_gpus_follow_the_filters() -> None:
    cat = catalog()
    assert planned_gpus(request(), cat) == ("FAST", "SLOW")
    assert planned_gpus(request(gpus=("SLOW",)), cat) == ("SLOW",)
    assert planned_gpus(request(exclude_gpus=("SLOW",)), cat) == ("FAST",)
