"""The static profiler: FLOPs, bytes, memory, uncounted ops — checked against hand counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.profile import OPERATOR_CLASSES, WorkloadProfile
from gpucast.domain.workload import WorkloadSpec
from gpucast.profile import profile_workload

FP32 = 4


def prof(
    name: str, batch: int, precision: str = "fp32", optimizer: str = "sgd", **options: object
) -> WorkloadProfile:
    spec = WorkloadSpec(name=name, batch_size=batch, precision=precision)  # type: ignore[arg-type]
    return profile_workload(spec, optimizer=optimizer, **options)


@pytest.fixture(scope="module")
def resnet50_b1() -> WorkloadProfile:
    return prof("resnet50", 1)


def test_resnet50_forward_is_4_1_gmacs(resnet50_b1: WorkloadProfile) -> None:
    # ResNet-50 at 224x224: 4.1 GMACs (He et al.; torchvision lists 4.09 GFLOPS as MACs).
    assert resnet50_b1.forward_flops == pytest.approx(2 * 4.1e9, rel=0.02)
    assert resnet50_b1.inference_flops == resnet50_b1.forward_flops
    # The backward pass of a CNN costs about twice the forward pass (no input gradient).
    assert 1.9 < resnet50_b1.backward_flops / resnet50_b1.forward_flops < 2.0


def test_convolution_flops_are_recorded_apart(resnet50_b1: WorkloadProfile) -> None:
    # every ResNet-50 FLOP but the final classifier's (2 x 2048 x 1000 a sample) is a conv
    for phase in ("forward", "backward"):
        mm = resnet50_b1.phase(phase).cost("matmul_conv")
        assert 0.999 < mm.conv_flops / mm.flops < 1.0
    assert (
        prof("mlp", 5, in_features=3, hidden=(4,), num_classes=2)
        .phase("forward")
        .cost("matmul_conv")
        .conv_flops
        == 0
    )
    # the planner's per-sample facts carry the share to the roofline
    from gpucast.plan.inputs import WorkloadFacts

    facts = WorkloadFacts.from_profile(resnet50_b1)
    assert 0.999 < facts.conv_share < 1.0
    roof = facts.roofline_workload(8)
    assert roof.conv_flops == pytest.approx(facts.conv_share * 8 * facts.matmul_flops_per_sample)
    again = WorkloadProfile.from_dict(resnet50_b1.to_dict())
    assert again.phase("backward").cost("matmul_conv").conv_flops > 0


def test_resnet50_parameters_and_tensors(resnet50_b1: WorkloadProfile) -> None:
    assert resnet50_b1.parameters_total == resnet50_b1.parameters_trainable == 25_557_032
    assert resnet50_b1.parameter_tensors == 161
    assert resnet50_b1.gradient_bytes == 25_557_032 * FP32
    assert resnet50_b1.parameter_tensor_max_mib == 512 * 512 * 3 * 3 * FP32 / 2**20  # layer4 3x3


def test_flops_scale_with_batch_without_memory(resnet50_b1: WorkloadProfile) -> None:
    big = prof("resnet50", 64)
    assert big.forward_flops == 64 * resnet50_b1.forward_flops
    # Fake tensors: a batch whose activations would need terabytes profiles in seconds.
    huge = prof("resnet50", 100_000)
    assert huge.memory.activations_bytes > 2**40
    assert huge.forward_flops == 100_000 * resnet50_b1.forward_flops


def test_tiny_mlp_by_hand() -> None:
    # 5 samples, 3 -> 4 -> 2 with ReLU and cross-entropy, fp32.
    p = prof("mlp", 5, in_features=3, hidden=(4,), num_classes=2)
    assert p.parameters_total == 3 * 4 + 4 + 4 * 2 + 2 == 26
    assert p.forward_flops == 2 * 5 * 3 * 4 + 2 * 5 * 4 * 2 == 200
    # backward: dW2 = g^T h, dh = g W2, dW1 = g1^T x (no gradient for the input)
    assert p.backward_flops == 2 * 2 * 5 * 4 + 2 * 5 * 2 * 4 + 2 * 4 * 5 * 3 == 280
    forward = p.phase("forward")
    matmul = forward.cost("matmul_conv")
    assert matmul.calls == 2
    assert matmul.flops == 200
    # addmm(b1, x, W1^T) reads 4+15+12 floats, addmm(b2, h, W2^T) reads 2+20+8 floats.
    assert matmul.bytes_read == (4 + 15 + 12 + 2 + 20 + 8) * FP32
    assert matmul.bytes_written == (5 * 4 + 5 * 2) * FP32
    relu = forward.cost("elementwise")
    assert (relu.calls, relu.bytes_read, relu.bytes_written) == (1, 20 * FP32, 20 * FP32)
    assert relu.flops == 0 and relu.approx_uncounted_flops == 20
    assert relu.arithmetic_intensity_flop_per_byte == 20 / (40 * FP32)
    assert p.memory.weights_bytes == p.memory.gradients_bytes == 26 * FP32
    assert p.memory.optimizer_state_bytes == 26 * FP32  # one momentum buffer per parameter
    assert p.memory.inputs_bytes == 5 * 3 * FP32 + 5 * 8  # float features, int64 labels
    # a request carries the features alone: 15 float elements, no integer input
    assert (p.memory.model_input_float_elements, p.memory.model_input_other_bytes) == (15, 0)
    # Saved for backward: the ReLU output and the log-softmax output (+ nll's scalar weight).
    assert p.memory.activations_bytes == (5 * 4 + 5 * 2 + 1) * FP32


def test_uncounted_ops_are_reported_not_silently_zero() -> None:
    p = prof("mlp", 5, in_features=3, hidden=(4,), num_classes=2)
    for op in (
        "aten.relu",
        "aten._log_softmax",
        "aten.nll_loss_forward",
        "aten.threshold_backward",
    ):
        assert op in p.uncounted_ops
    assert "aten.addmm" not in p.uncounted_ops
    assert any("uncounted" in note for note in p.notes)
    by_class = {c.op_class: c for c in p.train_step_by_class()}
    assert by_class["normalization"].approx_uncounted_flops > 0


def test_adam_needs_more_memory_than_sgd() -> None:
    sgd = prof("cifar-resnet20", 8)
    adam = prof("cifar-resnet20", 8, optimizer="adam")
    assert adam.memory.optimizer_state_bytes >= 2 * sgd.memory.optimizer_state_bytes
    assert adam.memory.train_peak_bytes > sgd.memory.train_peak_bytes
    assert sgd.memory.optimizer_state_bytes == sgd.gradient_bytes
    assert adam.forward_flops == sgd.forward_flops


def test_mixed_precision_halves_activations_not_flops() -> None:
    fp32 = prof("cifar-resnet20", 16)
    bf16 = prof("cifar-resnet20", 16, precision="bf16")
    assert bf16.forward_flops == fp32.forward_flops
    assert bf16.memory.activations_bytes < 0.7 * fp32.memory.activations_bytes
    assert bf16.memory.weights_bytes == fp32.memory.weights_bytes  # fp32 master weights
    assert bf16.phase("forward").bytes_moved < fp32.phase("forward").bytes_moved


def test_gcn_sparse_matmul_counts_nonzeros() -> None:
    n, f, h, c, degree = 30, 20, 16, 7, 4
    p = prof("gcn", n, in_features=f, hidden=h, num_classes=c, avg_degree=degree)
    nnz = n * degree + n  # random edges plus self loops
    assert p.forward_flops == 2 * n * f * h + 2 * nnz * h + 2 * n * h * c + 2 * nnz * c
    assert p.backward_flops == (
        2 * n * h * c + 2 * n * c * h + 2 * nnz * c + 2 * nnz * h + 2 * n * f * h
    )


def test_gpt2_attention_is_counted() -> None:
    b, s, hidden, vocab = 2, 16, 768, 50257
    p = prof("gpt2-small", b, seq_len=s, layers=1)
    tokens = b * s
    expected = 2 * tokens * 12 * hidden**2 + 4 * b * s * s * hidden + 2 * tokens * hidden * vocab
    assert p.forward_flops == expected
    assert p.inference_flops == expected  # CPU flash-attention kernel, our formula
    assert "aten.embedding" in p.uncounted_ops


def test_every_builtin_profiles() -> None:
    for name, options in (
        ("bert-base", {"seq_len": 16, "layers": 1}),
        ("dlrm", {}),
        ("shake-shake", {}),
        ("cifar-resnet15", {}),
    ):
        p = prof(name, 4, **options)
        assert p.forward_flops > 0
        assert p.memory.activations_bytes > 0
        assert {c.op_class for c in p.train_step_by_class()} == set(OPERATOR_CLASSES)


def test_round_trip_through_dict() -> None:
    p = prof("mlp", 3, hidden=(8,))
    again = WorkloadProfile.from_dict(p.to_dict())
    assert again == p
    assert again.to_dict() == p.to_dict()


def test_user_model_profiles_on_fake_tensors() -> None:
    file = Path(__file__).resolve().parents[1] / "workloads" / "example_user_model.py"
    p = prof(f"{file}:tied", 3)
    assert p.parameters_total == 50 * 16  # tied weights counted once
    assert p.forward_flops == 2 * 3 * 4 * 16 * 50


def test_bad_optimizer_is_invalid_spec() -> None:
    with pytest.raises(InvalidSpecError, match="optimizer"):
        prof("mlp", 2, optimizer="rmsprop")
