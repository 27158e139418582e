"""One forward pass, one latency across the verbs (QA 33b #2).

resnet50 b1 fp32 on T4 read 1.01 ms in predict coldstart / plan serverless (a whole-model
roofline at the fp32 peak), 1.75 ms in simulate kaas (a per-class roofline) and 2.38 ms in
simulate serve (the serving engine's latency model). All take the serving engine's model now
(:func:`gpucast.inputs.serving.forward_pass_s`); KaaS too, launch overhead included (QA 39 S
#5: it took the on-device part alone and left launches to --dispatch-us, default 0, so an MLP's
pass read 0.00054 ms in simulate kaas and 0.0156 ms in simulate serverless).
"""

from __future__ import annotations

import pytest

import gpucast
from gpucast.catalog.loader import load_catalog
from gpucast.inputs.serverless import gpu_function, kernel_sequence
from gpucast.inputs.serving import forward_pass_s


def test_serverless_coldstart_kaas_and_serve_price_one_forward_pass_alike() -> None:
    t4 = load_catalog().gpu("T4")
    one = forward_pass_s("resnet50", t4)
    served = gpucast.simulate_serve(
        model="resnet50", gpu="T4", rate=5, max_batch=1, duration_s=2
    ).to_dict()["latency_curve"]
    assert served["latency_s"][0] == pytest.approx(one.value, rel=1e-12)
    function = gpu_function("resnet50", t4, storage="local-nvme", network_gbps=None)
    assert function.forward_s == pytest.approx(one.value, rel=1e-12)
    cold = gpucast.predict_coldstart("resnet50", gpu="T4").prediction
    first_call = cold.first_inference_s - one.value  # the catalog's first-call overhead
    assert 0 < first_call < 1 and "serving engine's latency model" in cold.sources["forward"]
    kernels, text = kernel_sequence("resnet50", t4)
    assert kernels.sum() == pytest.approx(one.value, rel=1e-12)
    device = forward_pass_s("resnet50", t4, on_device=True).value
    assert device == pytest.approx(one.value - served["host_s"], rel=1e-12)
    assert (
        f"{one.value * 1e3:.2f} ms on T4" in text and f"{device * 1e3:.2f} ms on the device" in text
    )


def test_a_tiny_function_reads_alike_in_simulate_kaas_and_simulate_serverless() -> None:
    """QA 39 S #5: mlp on a T4, 0.00054 ms in simulate kaas vs 0.0156 ms in serverless."""
    t4 = load_catalog().gpu("T4")
    function = gpu_function("mlp", t4, storage="local-nvme", network_gbps=None)
    kaas = gpucast.simulate_kaas(models=["mlp"], gpu="T4", rate=5, duration_s=2).to_dict()
    dedicated = kaas["sharing"]["dedicated"]["latency_s"]["p50"]
    assert dedicated == pytest.approx(function.forward_s, rel=1e-9)
    assert function.forward_s > 20 * forward_pass_s("mlp", t4, on_device=True).value
    assert "beyond each kernel's launch overhead" in kaas["assumptions"]["dispatch"]
