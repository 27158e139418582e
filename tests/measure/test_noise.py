"""The gradient noise scale from micro-batch gradients, against a closed form."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure import measure
from gpucast.measure.noise import estimate_gradient_noise
from gpucast.workloads.base import Workload

D = 4


def _regression(noise_sd: float = 1.0, labels: bool = True) -> Workload:
    """y = x . w* + eps, x ~ N(0, I_4), |w*| = 1; MSE/2 at w = 0: per-sample gradient
    -(x . w* + eps) x, so |G|^2 = |w*|^2 = 1 and tr(Sigma) = |w*|^2 (d + 1) + sd^2 d = 9."""
    w_star = torch.tensor([1.0, 0.0, 0.0, 0.0])

    def build(device: torch.device) -> nn.Module:
        model = nn.Linear(D, 1, bias=False)
        nn.init.zeros_(model.weight)
        return model.to(device)

    def batch(n: int, device: torch.device):  # type: ignore[no-untyped-def]
        x = torch.randn(n, D, device=device)
        y = x @ w_star + noise_sd * torch.randn(n, device=device)
        return (x,), (y if labels else torch.zeros(n))

    def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((out.squeeze(-1) - y) ** 2).mean()

    return Workload(
        name="regression", family="mlp", sample_unit="samples",
        build_model=build, make_batch=batch, loss=loss,
    )  # fmt: skip


def test_noise_scale_matches_the_closed_form() -> None:
    wl = _regression()
    model = wl.build_model(torch.device("cpu"))
    noise, notes = estimate_gradient_noise(
        wl, model, torch.device("cpu"), micro_batch=64, micro_batches=8, steps=60
    )
    assert noise is not None and not notes
    assert noise.grad_sqr == pytest.approx(1.0, rel=0.15)
    assert noise.trace_sigma == pytest.approx(9.0, rel=0.15)
    assert noise.noise_scale_lower < 9.0 < noise.noise_scale_upper
    assert noise.noise_scale_upper / noise.noise_scale_lower < 2.0
    assert all(p.grad is None for p in model.parameters())  # nothing left behind
    assert float(model.weight.detach().abs().sum()) == 0.0  # nothing updated


def test_no_signal_gives_a_warning_not_a_number() -> None:
    wl = _regression(noise_sd=0.0, labels=False)  # y = 0 at w = 0: gradient exactly zero
    noise, notes = estimate_gradient_noise(
        wl, wl.build_model(torch.device("cpu")), torch.device("cpu"), micro_batch=8, steps=3
    )
    assert noise is None and "not measured" in notes[0]
    with pytest.raises(InvalidSpecError, match="micro-batches"):
        estimate_gradient_noise(
            wl, wl.build_model(torch.device("cpu")), torch.device("cpu"), micro_batch=8,
            micro_batches=1,
        )  # fmt: skip


def test_measure_stores_the_noise_scale_with_the_measurement() -> None:
    wl = _regression()
    m = measure(
        WorkloadSpec(name="regression", batch_size=64),
        device="cpu",
        workload=wl,
        max_time_s=0.5,
        min_samples=3,
        telemetry=False,
        noise_scale=True,
        noise_steps=6,
    )
    assert m.gradient_noise is not None
    assert m.gradient_noise.micro_batch == 16 and m.gradient_noise.micro_batches == 4
    assert "initialisation" in m.gradient_noise.data
    again = type(m).from_dict(m.to_dict())
    assert again.gradient_noise == m.gradient_noise
    with pytest.raises(InvalidSpecError, match="noise-scale"):
        measure(WorkloadSpec(name="regression", batch_size=2), workload=wl, noise_scale=True)
    with pytest.raises(InvalidSpecError, match="training"):
        measure(WorkloadSpec(name="regression", batch_size=8), workload=wl, mode="infer",
                noise_scale=True)  # fmt: skip


def test_a_user_model_is_measured_on_distinct_slices_of_its_example() -> None:
    from pathlib import Path

    from gpucast.workloads import get_workload

    wl = get_workload(f"{Path(__file__).with_name('regression_model.py')}:factory")
    model = wl.build_model(torch.device("cpu"))
    noise, _ = estimate_gradient_noise(
        wl, model, torch.device("cpu"), micro_batch=64, micro_batches=4, steps=16
    )
    assert noise is not None
    assert noise.noise_scale_lower < noise.noise_scale < noise.noise_scale_upper
    assert noise.noise_scale == pytest.approx(9.0, rel=0.3)


@pytest.mark.gpu
def test_noise_scale_on_a_gpu_matches_the_closed_form() -> None:
    wl = _regression()
    device = torch.device("cuda")
    noise, _ = estimate_gradient_noise(
        wl, wl.build_model(device), device, micro_batch=64, micro_batches=8, steps=60
    )
    assert noise is not None
    assert noise.trace_sigma / noise.grad_sqr == pytest.approx(9.0, rel=0.2)
