"""Every built-in runs real training and inference steps on the CPU."""

from __future__ import annotations

import copy

import pytest
import torch

from gpucast.domain.errors import DeviceUnavailableError, InvalidSpecError
from gpucast.domain.workload import WorkloadSpec
from gpucast.workloads import get_workload
from gpucast.workloads.steps import make_step

CPU = torch.device("cpu")

# Small options keep the suite fast; the architectures are checked at full size on ``meta``.
CASES = [
    ("cifar-resnet20", {}, 2),
    ("cifar-resnet15", {}, 2),
    ("shake-shake", {}, 2),
    ("resnet50", {}, 1),
    ("bert-base", {"seq_len": 8, "layers": 2}, 2),
    ("gpt2-small", {"seq_len": 8, "layers": 2}, 1),
    ("dlrm", {"table_sizes": (50, 60, 70)}, 4),
    ("gcn", {"in_features": 20}, 30),
    ("mlp", {}, 4),
    ("resnet18", {}, 2),
    ("cifar-resnet18", {}, 2),
    ("shufflenetv2", {}, 2),
    ("deepspeech2", {"seq_len": 60, "hidden": 32, "layers": 2}, 2),
    ("ncf", {}, 2),
    ("bert-large", {"seq_len": 8, "layers": 1}, 2),
    ("transformer-base", {"seq_len": 8, "layers": 1}, 2),
    ("lstm-lm", {"seq_len": 8}, 2),
    ("stable-diffusion", {"resolution": 64, "width": 32, "text_layers": 1}, 2),
]
# unet3d is too slow for a CPU step (3D convolutions over >= 64^3 voxels); it is profiled on
# fake tensors in tests/profile and stepped on a GPU in test_cuda_steps.
GPU_ONLY_CASES = [("unet3d", {}, 1)]


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@pytest.mark.parametrize(("name", "options", "batch"), CASES, ids=[c[0] for c in CASES])
def test_train_and_infer_step(name: str, options: dict, batch: int) -> None:
    workload = get_workload(name, **options)
    spec = WorkloadSpec(name=name, batch_size=batch)
    train = make_step(workload, spec, "train", CPU)
    assert train.samples_per_step == batch
    assert train.parameter_count == sum(p.numel() for p in train.model.parameters())
    before = snapshot(train.model)
    train()
    after = snapshot(train.model)
    assert any(not torch.equal(before[k], after[k]) for k in before), "no parameter changed"
    assert all(torch.isfinite(v).all() for v in after.values())

    infer = make_step(workload, spec, "infer", CPU)
    frozen = snapshot(infer.model)
    infer()
    assert not infer.model.training
    assert all(torch.equal(frozen[k], v) for k, v in snapshot(infer.model).items())


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_steps(precision: str) -> None:
    spec = WorkloadSpec(name="mlp", batch_size=4, precision=precision)  # type: ignore[arg-type]
    step = make_step(get_workload("mlp", hidden=(16,)), spec, "train", CPU)
    assert (step.scaler is not None) == (precision == "fp16")
    step()
    make_step(get_workload("cifar-resnet20"), spec, "infer", CPU)()


def test_adam_creates_two_state_tensors_per_parameter() -> None:
    spec = WorkloadSpec(name="mlp", batch_size=4)
    step = make_step(get_workload("mlp", hidden=(16,)), spec, "train", CPU, optimizer="adam")
    step()
    assert step.optimizer is not None
    for state in step.optimizer.state.values():
        assert {"exp_avg", "exp_avg_sq"} <= set(state)


def test_same_seed_same_weights_and_batch() -> None:
    workload = get_workload("mlp", hidden=(8,))
    spec = WorkloadSpec(name="mlp", batch_size=3)
    a, b = make_step(workload, spec, "infer", CPU), make_step(workload, spec, "infer", CPU)
    assert torch.equal(a.inputs[0], b.inputs[0])
    assert all(
        torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True)
    )


def test_bad_mode_and_optimizer() -> None:
    workload, spec = get_workload("mlp"), WorkloadSpec(name="mlp", batch_size=2)
    with pytest.raises(InvalidSpecError, match="mode"):
        make_step(workload, spec, "serve", CPU)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="optimizer"):
        make_step(workload, spec, "train", CPU, optimizer="lamb")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_cpu_machine_is_a_clear_error() -> None:
    with pytest.raises(DeviceUnavailableError, match="cuda"):
        make_step(
            get_workload("mlp"),
            WorkloadSpec(name="mlp", batch_size=2),
            "train",
            torch.device("cuda"),
        )


def test_unsupported_autocast_names_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.amp, "is_autocast_available", lambda device_type: False)
    spec = WorkloadSpec(name="mlp", batch_size=2, precision="fp16")
    with pytest.raises(InvalidSpecError, match="precision: fp16 autocast is not supported"):
        make_step(get_workload("mlp"), spec, "train", CPU)


def test_workload_is_not_mutated_by_building() -> None:
    workload = get_workload("mlp", hidden=(8,))
    first = copy.deepcopy(workload.description)
    make_step(workload, WorkloadSpec(name="mlp", batch_size=2), "train", CPU)()
    assert workload.description == first


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_cuda_steps(precision: str) -> None:
    cuda = torch.device("cuda")
    for name, options, batch in CASES + GPU_ONLY_CASES:
        workload = get_workload(name, **options)
        spec = WorkloadSpec(name=name, batch_size=batch, precision=precision)  # type: ignore[arg-type]
        for mode in ("train", "infer"):
            step = make_step(workload, spec, mode, cuda)  # type: ignore[arg-type]
            step()
            step()
        torch.cuda.synchronize()


def test_gcn_sparse_backward_matches_dense_autograd() -> None:
    from gpucast.workloads.other import GCN, normalized_random_adjacency

    torch.manual_seed(0)
    adjacency = normalized_random_adjacency(12, 3, CPU)
    dense = adjacency.to_dense()
    assert torch.allclose(dense, dense.t())
    assert adjacency._nnz() == 2 * (12 * 3 // 2) + 12
    h = torch.randn(12, 5, requires_grad=True)
    GCN._propagate(adjacency, h).pow(2).sum().backward()
    expected = torch.autograd.grad((dense @ h).pow(2).sum(), h)[0]
    assert h.grad is not None and torch.allclose(h.grad, expected, atol=1e-6)
