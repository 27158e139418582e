"""The calibration workloads profile on fake tensors; their FLOPs checked against hand counts.

Forward FLOPs per sample at the default inputs (2 FLOPs per multiply-accumulate) are computed
here from the architectures as written in the papers and references, independently of the
profiler's formulas. Batches are small: FLOPs are linear in the batch (tests/profile checks it).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.workload import WorkloadSpec
from gpucast.profile import profile_workload


def prof(name: str, batch: int = 2, **options: object) -> WorkloadProfile:
    return profile_workload(WorkloadSpec(name=name, batch_size=batch), **options)


def per_sample(p: WorkloadProfile) -> float:
    return p.forward_flops / p.batch_size


def lstm_flops(tokens: int, layers: list[tuple[int, int]], directions: int) -> int:
    """2 * tokens * (W_ih + W_hh elements) per layer and direction; layers as (input, hidden)."""
    return sum(2 * tokens * directions * 4 * h * (i + h) for i, h in layers)


def test_resnet18_forward_is_1_8_gmacs() -> None:
    p = prof("resnet18", 1)
    assert p.parameters_total == 11_689_512
    assert per_sample(p) == pytest.approx(2 * 1.814e9, rel=0.005)  # torchvision: 1.81 GFLOPS
    assert 1.9 < p.backward_flops / p.forward_flops < 2.0


def test_cifar_resnet18_forward_is_0_56_gmacs() -> None:
    p = prof("cifar-resnet18")
    assert per_sample(p) == pytest.approx(2 * 0.556e9, rel=0.005)  # kuangliu: 0.56 GMACs


def test_shufflenet_v2_counts_146_mflops_and_grouped_backward() -> None:
    p = prof("shufflenetv2", 1, num_classes=1000, image_size=224)
    assert p.parameters_total == 2_278_604
    # Ma et al. 2018, table 5: 146 M FLOPs (multiply-adds) at 224x224 for 1.0x.
    assert per_sample(p) == pytest.approx(2 * 146e6, rel=0.02)
    # flop_counter alone counts depthwise weight gradients `groups` times over (5x forward).
    assert 1.9 < p.backward_flops / p.forward_flops < 2.0


def test_shufflenet_cifar_default() -> None:
    p = prof("shufflenetv2")
    assert p.parameters_total == 1_356_104
    assert 0.08e9 < per_sample(p) < 0.1e9  # 32x32 at stride 1 ~ a 128x128 ImageNet input


def test_deepspeech2_counts_its_lstms() -> None:
    p = prof("deepspeech2", 1)
    assert p.parameters_total == 86_618_400
    steps = 500  # 1,000 frames, time halved by the first convolution
    first_conv = 2 * (32 * 81 * steps * 41 * 11)  # 161 bins -> 81, 1 input channel
    conv = first_conv + 2 * (32 * 41 * steps * 32 * 21 * 11)
    rnn = lstm_flops(steps, [(1312, 1024)] + [(1024, 1024)] * 4, directions=2)
    fc = 2 * steps * 1024 * 29
    assert p.forward_flops == conv + rnn + fc
    assert p.inference_flops == p.forward_flops
    # Backward: twice the forward, less the spectrogram's (unneeded) input gradient.
    assert p.backward_flops == 2 * p.forward_flops - first_conv
    lstm_classes = {c.op_class: c for c in p.phase("forward").by_class}
    assert lstm_classes["matmul_conv"].flops == p.forward_flops
    assert "aten._ctc_loss" in p.uncounted_ops  # the loss, classed as a reduction
    assert p.memory.activations_bytes > 0


def test_lstm_formula_matches_the_decomposed_lstm() -> None:
    # Without oneDNN, CPU LSTMs run as addmm/mm per step, which flop_counter counts itself.
    options = {"hidden": 16, "vocab": 50, "seq_len": 5}
    fused = prof("lstm-lm", 3, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.backends.mkldnn.flags(enabled=False):
            decomposed = prof("lstm-lm", 3, **options)
    assert fused.forward_flops == decomposed.forward_flops
    assert fused.inference_flops == decomposed.inference_flops
    # The fused kernel also computes the gradient of the zero initial state (one step of the
    # recurrent product per layer) that autograd skips.
    assert fused.backward_flops - decomposed.backward_flops == 2 * 2 * 3 * 64 * 16


def test_lstm_lm_default() -> None:
    p = prof("lstm-lm")
    tokens = 35
    expected = lstm_flops(tokens, [(650, 650)] * 2, directions=1) + 2 * tokens * 650 * 33278
    assert per_sample(p) == expected


def test_ncf_default() -> None:
    p = prof("ncf", 5)
    assert p.parameters_total == 1_602_657
    assert per_sample(p) == 2 * (256 * 128 + 128 * 64 + 64 * 32 + 64 * 1)
    assert p.phase("forward").cost("embedding").calls == 4  # two towers x user and item


def test_bert_large_at_512() -> None:
    p = prof("bert-large", 1)
    s, h, layers, vocab = 512, 1024, 24, 30522
    encoder = layers * (2 * s * 12 * h * h + 4 * s * s * h)  # qkv, out, ff (4h) + attention
    head = 2 * s * h * h + 2 * s * h * vocab
    assert p.forward_flops == encoder + head
    assert p.parameters_total == 335_174_458


def test_transformer_base() -> None:
    p = prof("transformer-base", 1)
    s = t = 128
    h, f, layers, vocab = 512, 2048, 6, 32768
    encoder = 2 * s * (4 * h * h + 2 * h * f) + 4 * s * s * h
    cross = 2 * t * h * h + 2 * s * 2 * h * h + 2 * t * h * h + 4 * t * s * h
    decoder = 2 * t * (4 * h * h + 2 * h * f) + 4 * t * t * h + cross
    assert p.forward_flops == layers * (encoder + decoder) + 2 * t * h * vocab


def test_unet3d_at_128_cubed() -> None:
    p = prof("unet3d", 1)
    assert p.parameters_total == 31_190_243
    filters = [32, 64, 128, 256, 320, 320]  # levels 0..5 (level 5: the bottleneck)
    side = [128 // 2**level for level in range(6)]

    def conv(voxels_side: int, c_in: int, c_out: int, kernel: int = 27) -> int:
        return 2 * voxels_side**3 * kernel * c_in * c_out

    total = conv(side[0], 1, 32) + conv(side[0], 32, 32)
    for level in range(1, 6):
        total += conv(side[level], filters[level - 1], filters[level])
        total += conv(side[level], filters[level], filters[level])
    for level in range(5, 0, -1):  # up: transposed 2x2x2 from level to level-1, two convs
        c_in, c_out = filters[level], filters[level - 1]
        total += conv(side[level], c_in, c_out, kernel=8)
        total += conv(side[level - 1], 2 * c_out, c_out) + conv(side[level - 1], c_out, c_out)
    total += conv(side[0], 32, 3, kernel=1)
    assert p.forward_flops == total
    assert p.memory.activations_bytes > 2**30  # GiBs of activations, allocated nowhere


def test_cudnn_lstm_formula_matches_the_cpu_one() -> None:
    # The profiler runs CPU kernels; the CUDA kernel's formula takes aten's argument layout.
    from gpucast.profile import flops

    meta = torch.device("meta")
    steps, batch, features, hidden = 7, 3, 5, 4
    x = torch.empty(steps, batch, features, device=meta)
    layer = [
        torch.empty(4 * hidden, features, device=meta),
        torch.empty(4 * hidden, hidden, device=meta),
        torch.empty(4 * hidden, device=meta),
        torch.empty(4 * hidden, device=meta),
    ]
    forward = flops._cudnn_rnn(x, layer)
    assert forward == flops._mkldnn_rnn_layer(x, layer[0], layer[1])
    assert forward == 2 * steps * batch * 4 * hidden * (features + hidden)
    # _cudnn_rnn_backward(input, weight, ..., output_mask) with its 22 positional arguments.
    tail: list[object] = [None] * 19
    assert flops._cudnn_rnn_backward(x, layer, *tail, [True, True, True, True]) == 2 * forward
    assert flops._cudnn_rnn_backward(x, layer, *tail, [True, True, True, False]) == forward
