"""The gradient noise scale of a workload, measured in a short run (as Pollux measures it).

Per step, ``micro_batches`` (k) gradients of ``micro_batch`` (b) samples each are taken at the
same weights -- what k data-parallel replicas would compute -- and from ``local_sqr`` (the
mean of their squared norms) and ``total_sqr`` (the squared norm of their mean)::

    |G|^2      ~ (k total_sqr - local_sqr) / (k - 1)        (unbiased; AdaptDL's grad_sqr)
    tr(Sigma)  ~ b k (local_sqr - total_sqr) / (k - 1)      (per-sample gradient variance)

since ``E local_sqr = |G|^2 + tr(Sigma)/b`` and ``E total_sqr = |G|^2 + tr(Sigma)/(k b)``.
Both are averaged over ``steps`` steps, each on fresh batches, and the noise scale is
``B_simple = tr(Sigma) / |G|^2`` (McCandlish et al. 2018) in samples, with an interval from a
jackknife over the steps. Nothing is updated: the weights are the ones the workload was built
with (initialisation, or a checkpoint a user factory loads), so the figure describes that point
of training -- the noise scale grows as training proceeds (Pollux's traces: their median over
training is 2-2000x the first epoch's).

Micro-batches of a built-in workload are drawn independently (``make_batch(b)``, fresh random
samples); a user model's are consecutive slices of one ``make_batch(steps k b)`` (its example
batch, resized by repeating), so they are distinct samples only where the example has that many
rows. Gradients are taken in fp32.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from scipy.stats import norm

from gpucast.domain.errors import InvalidSpecError, MeasurementError
from gpucast.domain.measurement import GradientNoise

if TYPE_CHECKING:
    from torch import nn

    from gpucast.workloads.base import Batch, Workload

#: Coverage of the stored interval.
CONFIDENCE = 0.8


def _slice(batch: Batch, start: int, stop: int) -> Batch:
    inputs, target = batch

    def cut(x: object) -> object:
        return x[start:stop] if isinstance(x, torch.Tensor) and x.dim() > 0 else x

    return tuple(cut(x) for x in inputs), cut(target)


def _micro_batches(
    workload: Workload, b: int, k: int, device: torch.device, step: int, whole: Batch | None
) -> list[Batch]:
    if whole is not None:  # a user model: consecutive slices of its (resized) example batch
        first = step * k
        return [_slice(whole, (first + i) * b, (first + i + 1) * b) for i in range(k)]
    return [workload.make_batch(b, device) for _ in range(k)]


def _flat_grad(params: list[nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1).double() for p in params if p.grad is not None])


def _one_step(model: nn.Module, workload: Workload, batches: list[Batch]) -> tuple[float, float]:
    """(local_sqr, total_sqr) of one step's micro-batch gradients."""
    params = [p for p in model.parameters() if p.requires_grad]
    total: torch.Tensor | None = None
    local = 0.0
    for inputs, target in batches:
        for p in params:
            p.grad = None
        loss = workload.loss(model(*inputs), target)
        loss.backward()
        g = _flat_grad(params)
        local += float(torch.dot(g, g))
        total = g if total is None else total + g
    assert total is not None
    k = len(batches)
    mean = total / k
    return local / k, float(torch.dot(mean, mean))


def estimate_gradient_noise(
    workload: Workload,
    model: nn.Module,
    device: torch.device,
    *,
    micro_batch: int,
    micro_batches: int = 4,
    steps: int = 8,
    seed: int = 0,
    data: str = "",
) -> tuple[GradientNoise | None, tuple[str, ...]]:
    """The noise scale of ``model`` on ``workload``'s batches (module docstring); ``None`` with
    a warning when the gradient signal does not rise above the noise."""
    if micro_batch < 1:
        raise InvalidSpecError("noise micro-batch", "must be >= 1", got=micro_batch)
    if micro_batches < 2:
        raise InvalidSpecError("noise micro-batches", "must be >= 2", got=micro_batches)
    if steps < 2:
        raise InvalidSpecError("noise steps", "must be >= 2", got=steps)
    was_training = model.training
    model.train()
    sqr, var = [], []
    k, b = micro_batches, micro_batch
    cuda = [device] if device.type == "cuda" else []
    try:
        whole = workload.make_batch(b * k * steps, device) if workload.family == "user" else None
        for step in range(steps):
            with torch.random.fork_rng(devices=cuda):
                torch.manual_seed(seed * 100_003 + step + 1)
                batches = _micro_batches(workload, b, k, device, step, whole)
            local, total = _one_step(model, workload, batches)
            sqr.append((k * total - local) / (k - 1))
            var.append(b * k * (local - total) / (k - 1))
    except (RuntimeError, ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MeasurementError(f"gradient noise scale of {workload.name} failed: {first}") from exc
    finally:
        for p in model.parameters():
            p.grad = None
        model.train(was_training)
    n = len(sqr)
    g2, v = sum(sqr) / n, sum(var) / n
    if not (g2 > 0 and v > 0 and math.isfinite(g2) and math.isfinite(v)):
        why = "the gradient variance is zero" if v <= 0 else "the mean gradient is lost in noise"
        return None, (
            f"gradient noise scale not measured: {why} over {n} steps of {k} micro-batches of "
            f"{b} (|G|^2 {g2:.3g}, tr(Sigma) {v:.3g}); raise --batch-size or use distinct "
            "samples per micro-batch",
        )
    # jackknife over steps of log(mean var / mean sqr)
    loo = []
    for i in range(n):
        s_i = (g2 * n - sqr[i]) / (n - 1)
        v_i = (v * n - var[i]) / (n - 1)
        loo.append(math.log(v_i / s_i) if s_i > 0 and v_i > 0 else math.inf)
    centre = math.log(v / g2)
    if all(math.isfinite(x) for x in loo):
        mean_loo = sum(loo) / n
        se = math.sqrt((n - 1) / n * sum((x - mean_loo) ** 2 for x in loo))
    else:
        se = math.inf
    z = float(norm.ppf(0.5 + CONFIDENCE / 2.0))
    notes: tuple[str, ...] = ()
    if not math.isfinite(se) or se > 3.0:
        se = 3.0
        notes = (
            f"gradient noise scale is poorly determined over {n} steps (|G|^2 near zero in "
            "some); its interval is wide",
        )
    return (
        GradientNoise(
            micro_batch=b,
            micro_batches=k,
            steps=n,
            grad_sqr=g2,
            trace_sigma=v,
            noise_scale_lower=min(math.exp(centre - z * se), v / g2),
            noise_scale_upper=max(math.exp(centre + z * se), v / g2),
            confidence=CONFIDENCE,
            data=data,
        ),
        notes,
    )
