"""User models profile on fake tensors (#22): BatchNorm buffers, in-place ops, LSTMs, meta.

The models are in ``user_models.py`` beside this file, loaded as ``path.py:factory`` the way
the CLI loads them. Counts are by hand; FLOPs are 2 per multiply-accumulate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from gpucast.domain.workload import WorkloadSpec
from gpucast.profile import profile, profile_workload
from gpucast.workloads import get_workload
from gpucast.workloads.base import Workload
from gpucast.workloads.steps import make_step
from gpucast.workloads.user import copy_module

FILE = Path(__file__).resolve().parent / "user_models.py"
CPU = torch.device("cpu")
FP32, INT64 = 4, 8

# ResidualCNN: conv 3->8 and 8->8 (3x3, no bias), two BatchNorms, linear 8->5.
CNN_PARAMS = 3 * 8 * 9 + 2 * 8 + 8 * 8 * 9 + 2 * 8 + 8 * 5 + 5
# Two BatchNorms' running mean and variance (fp32) and num_batches_tracked (int64), `scale`.
CNN_BUFFER_BYTES = 2 * (2 * 8 * FP32 + INT64) + 8 * FP32


def cnn_forward_flops(batch: int) -> int:
    pixels = 6 * 6
    return 2 * batch * pixels * 8 * (3 * 9) + 2 * batch * pixels * 8 * (8 * 9) + 2 * batch * 8 * 5


def test_batchnorm_inplace_residual_model_profiles() -> None:
    p = profile_workload(WorkloadSpec(name=f"{FILE}:residual_cnn", batch_size=4))
    assert p.parameters_total == p.parameters_trainable == CNN_PARAMS == 869
    assert p.parameter_tensors == 8  # 2 conv weights, 2 x 2 BatchNorm affine, linear w, b
    assert p.memory.weights_bytes == CNN_PARAMS * FP32 + CNN_BUFFER_BYTES
    assert p.gradient_bytes == CNN_PARAMS * FP32
    assert p.forward_flops == cnn_forward_flops(4)
    assert p.inference_flops == p.forward_flops
    assert p.memory.activations_bytes > 0
    normalization = p.phase("forward").cost("normalization")
    assert normalization.calls == 2  # both BatchNorms ran in training mode


def test_profiling_copies_no_tensor_data(monkeypatch: pytest.MonkeyPatch) -> None:
    # deepcopy of a plain tensor copies its storage (real memory; under fake tensors it then
    # failed with "storage of a tensor on device meta"). Profiling must never take that path.
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a tensor's storage was copied")

    monkeypatch.setattr(torch.storage.TypedStorage, "_deepcopy", refuse)
    monkeypatch.setattr(torch.UntypedStorage, "__deepcopy__", refuse)
    p = profile_workload(WorkloadSpec(name=f"{FILE}:big_buffer", batch_size=2))
    assert p.memory.weights_bytes == (4 * 4 + 4 + 2 * 4) * FP32 + (2 * 4 * FP32 + INT64) + 2**26


def test_recurrent_user_model_counts_lstm_flops() -> None:
    p = profile_workload(WorkloadSpec(name=f"{FILE}:recurrent", batch_size=3))
    layer1 = 4 * 8 * (4 + 8) + 2 * 4 * 8  # per direction: W_ih, W_hh, two biases
    layer2 = 4 * 8 * (16 + 8) + 2 * 4 * 8
    assert p.parameters_total == 2 * (layer1 + layer2) + 16 * 3 + 3
    assert p.memory.weights_bytes == p.parameters_total * FP32  # `offsets` is no buffer
    tokens = 3 * 5
    lstm = 2 * tokens * 2 * (4 * 8 * (4 + 8) + 4 * 8 * (16 + 8))
    assert p.forward_flops == lstm + 2 * 3 * 16 * 3
    assert "aten.mkldnn_rnn_layer" not in p.uncounted_ops


def test_grouped_convolution_backward_is_not_overcounted() -> None:
    p = profile_workload(WorkloadSpec(name=f"{FILE}:grouped", batch_size=2))
    pointwise = 2 * 2 * 36 * 8 * 4
    depthwise = 2 * 2 * 36 * 8 * 9  # one input channel per filter
    assert p.forward_flops == pointwise + depthwise
    # Depthwise: input and weight gradients; pointwise: weight gradient only (data input).
    assert p.backward_flops == 2 * depthwise + pointwise


def test_model_built_on_meta_profiles_and_measures() -> None:
    name = f"{FILE}:on_meta"
    p = profile_workload(WorkloadSpec(name=name, batch_size=4))
    assert p.parameters_total == CNN_PARAMS
    assert p.forward_flops == cnn_forward_flops(4)
    # A real step materialises it (zeros): the measurement harness can time it.
    step = make_step(get_workload(name), WorkloadSpec(name=name, batch_size=3), "train", CPU)
    step()
    assert all(t.device == CPU for t in step.model.parameters())


def test_user_model_still_trains_for_real() -> None:
    name = f"{FILE}:residual_cnn"
    step = make_step(get_workload(name), WorkloadSpec(name=name, batch_size=3), "train", CPU)
    before = step.model.bn1.running_mean.clone()
    step()
    assert not torch.equal(before, step.model.bn1.running_mean)
    assert int(step.model.bn1.num_batches_tracked) == 1


def test_copy_module_keeps_ties_and_leaves_the_original_alone() -> None:
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False), nn.BatchNorm1d(10))
    model[1].weight = model[0].weight
    model.extra = torch.ones(2)  # type: ignore[assignment]  # a plain tensor attribute
    copied = copy_module(model, CPU)
    assert copied[1].weight is copied[0].weight
    assert copied[0].weight is not model[0].weight
    assert isinstance(copied[0].weight, nn.Parameter) and copied[0].weight.requires_grad
    assert torch.equal(copied[0].weight, model[0].weight)
    copied.train()(torch.tensor([1, 2]))
    assert int(model[2].num_batches_tracked) == 0
    assert copied.extra is not model.extra


def test_a_real_prebuilt_model_is_profiled_as_a_fake_copy() -> None:
    # A Workload whose build_model hands back an existing (real) model: the profiler must not
    # run it, nor update its BatchNorm statistics.
    real = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6))
    real_stats = real[1].running_mean.clone()

    def make_batch(batch: int, device: torch.device) -> tuple[tuple[torch.Tensor], None]:
        return (torch.randn(batch, 4, device=device),), None

    workload = Workload(
        name="prebuilt",
        family="user",
        sample_unit="samples",
        build_model=lambda device: real,
        make_batch=make_batch,
        loss=lambda output, _target: output.mean(),
    )
    p = profile(workload, WorkloadSpec(name="prebuilt", batch_size=5))
    assert p.parameters_total == 4 * 6 + 6 + 2 * 6
    assert p.forward_flops == 2 * 5 * 4 * 6
    assert torch.equal(real[1].running_mean, real_stats)
    assert int(real[1].num_batches_tracked) == 0


def test_a_user_models_shape_bug_is_one_line_of_bad_input(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Session 35 QA: a user's example batch that does not fit its model exited 1 (gpucast's
    failure) with a fix about data-dependent shapes, after torch's fake-tensor logger had
    printed an 18-line traceback to stderr. Now: the user's error (exit 2) naming the
    example batch, and nothing on stderr."""
    from gpucast.domain.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"workload: running .*wrong_batch on fake") as err:
        profile_workload(WorkloadSpec(name=f"{FILE}:wrong_batch", batch_size=4))
    assert err.value.exit_code == 2 and "model(*example_batch)" in str(err.value)
    assert "Traceback" not in capfd.readouterr().err


def test_transformer_encoder_inference_counts_the_fused_fast_path() -> None:
    """QA 39: in eval() + no_grad nn.TransformerEncoderLayer takes PyTorch's fused fast path
    (one aten._transformer_encoder_layer_fwd call flop_counter does not count), so the
    inference FLOPs were the head's alone. The inference forward does the training forward's
    arithmetic: per layer and token QKV 2x16x48, output 2x16x16, feed-forward 2x2x16x32,
    attention 2 x 2 x 5 (keys) x 16."""
    p = profile_workload(WorkloadSpec(name=f"{FILE}:encoder", batch_size=2))
    tokens = 2 * 5
    per_token = 2 * 16 * 48 + 2 * 16 * 16 + 2 * 2 * 16 * 32 + 2 * 2 * 5 * 16
    assert p.forward_flops == 2 * tokens * per_token
    assert p.inference_flops == p.forward_flops


def test_a_user_model_is_built_on_meta_for_its_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 39: the factory ran for real before the fake-tensor profile, so profiling a model
    too big for host memory (a 6.4B-parameter MLP: 25.8 GB of fp32 weights) was killed by the
    OS (exit 137). The profile builds it on the meta device: no weight is allocated."""
    built_on = tmp_path / "built_on"
    monkeypatch.setenv("BUILT_ON", str(built_on))
    p = profile_workload(WorkloadSpec(name=f"{FILE}:records_device", batch_size=3))
    assert built_on.read_text().split() == ["meta"]
    assert p.parameters_total == 8 * 4 + 4
    assert p.forward_flops == 2 * 3 * 8 * 4


def test_a_factory_that_cannot_run_on_meta_is_profiled_as_built() -> None:
    p = profile_workload(WorkloadSpec(name=f"{FILE}:real_only", batch_size=2))
    assert p.parameters_total == 3 * 2 + 2
    assert p.forward_flops == 2 * 2 * 3 * 2
